"""The person's own defaults: `$XDG_CONFIG_HOME/fsagent/config.toml` (by default
`~/.config/fsagent/config.toml`). Flags and FSAGENT_* variables override what it says.

    base_url = "http://localhost:11434"
    model = "qwen3:8b"
    db = "~/notes/threads.db"
    approve = "ask"      # ask, yes or no
    max_tokens = 1024    # the longest reply, in tokens

    [mcp_servers.git]    # the person's other MCP servers: core/servers/config.py
    command = "mcp-server-git"

Standard library only (`tomllib`): the command line reads it before anything heavy is
imported. A bad file (not TOML, a key fsagent does not know, a value of the wrong type) is a
StartupError naming the file and the key: it is never half-used.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import StartupError
from store.location import xdg_folder

APPROVE_MODES = ("ask", "yes", "no")
KEYS = ("base_url", "model", "db", "approve", "max_tokens")
# The person's other MCP servers, `[mcp_servers.NAME]`: read and checked by
# core.servers.config, which reads this same file.
SERVERS_TABLE = "mcp_servers"


@dataclass(frozen=True)
class UserConfig:
    """What the file says, checked; `path` is None when there is no file."""

    path: Path | None = None
    values: Mapping[str, str | int] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)


def config_path(environ: Mapping[str, str]) -> Path:
    return xdg_folder(environ, "XDG_CONFIG_HOME", ".config") / "fsagent" / "config.toml"


def load_config(environ: Mapping[str, str]) -> UserConfig:
    path = config_path(environ)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return UserConfig()
    except (OSError, UnicodeDecodeError) as error:
        raise StartupError(f"{path}: cannot be read ({error}); fix it or remove it") from None
    except tomllib.TOMLDecodeError as error:
        raise StartupError(f"{path}: not valid TOML ({error}); fix it or remove it") from None
    values = {k: checked(path, k, v) for k, v in data.items() if k != SERVERS_TABLE}
    return UserConfig(path, values)


def checked(path: Path, key: str, value: object) -> str | int:
    """One key's value, or a StartupError naming the file and the key."""

    def refuse(why: str) -> StartupError:
        return StartupError(f"{path}: {key}: {why}; fix it or remove it")

    if key not in KEYS:
        raise refuse(f"not a setting fsagent knows (it knows {', '.join(KEYS)})")
    if key == "max_tokens":
        # A TOML true is a Python bool, which is an int: refused as the wrong type.
        if not isinstance(value, int) or isinstance(value, bool):
            raise refuse(f"{value!r} is not a whole number of tokens")
        if value <= 0:
            raise refuse(f"{value} is not a whole number of tokens above 0")
        return value
    if not isinstance(value, str):
        raise refuse(f"{value!r} is not a string")
    if not value.strip():
        raise refuse("it is empty")
    if key == "approve" and value not in APPROVE_MODES:
        raise refuse(f"{value!r} is not one of {', '.join(APPROVE_MODES)}")
    return value
