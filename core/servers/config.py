"""The person's other MCP servers, as configured: `[mcp_servers.NAME]` tables in
`~/.config/fsagent/config.toml` and in a project's `fsagent.toml`, and the common
`{"mcpServers": {...}}` JSON of LM Studio, Claude Code and Cursor (`--mcp-config FILE`).

    [mcp_servers.git]
    command = "uvx"                       # stdio: command, args, env, cwd
    args = ["mcp-server-git"]
    env = { GIT_AUTHOR_NAME = "me" }
    exclude_tools = ["git_reset"]         # or include_tools = [...]

    [mcp_servers.notes]
    url = "https://notes.example/mcp"     # streamable HTTP
    headers = { Authorization = "Bearer ${NOTES_TOKEN}" }   # values from the environment
    enabled = false

Every entry is checked whole at start: a bad one is a StartupError naming the file and the
key (exit 2), never half-used, as core/user_config.py does. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.errors import StartupError
from core.tools.tool_groups import SEPARATOR, other_server

TABLE = "mcp_servers"
# A server's name is part of its tools' names (`git__git_commit`), which OpenAI-style servers
# hold to [A-Za-z0-9_-]{1,64}; `__` is the separator, so no name holds it.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
HTTP_KEYS = frozenset({"url", "headers"})
COMMON_KEYS = frozenset(
    {"enabled", "include_tools", "exclude_tools", "network", "sandbox", "startup_timeout"}
)
# The JSON files of other tools say the transport too; "sse" is the old HTTP transport.
JSON_ONLY_KEYS = frozenset({"type"})
JSON_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_STARTUP_TIMEOUT = 30.0

Origin = Literal["user", "project", "flag"]


@dataclass(frozen=True)
class ServerSpec:
    """One server as configured, checked. `origin` says where it was written: a project's
    file ("project") adds a server only once the person accepted it (core.servers.acceptance)."""

    name: str
    source: Path  # the file it was written in
    origin: Origin
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    # header -> its value with ${VARIABLE}s, filled from the environment at launch
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    include_tools: frozenset[str] | None = None
    exclude_tools: frozenset[str] = frozenset()
    network: bool = False
    sandbox: bool = True
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    raw: Mapping[str, Any] = field(default_factory=dict)  # the entry as written

    def digest(self) -> str:
        """A digest of the entry as written: an accepted project entry that changes in any
        way (another command, one more argument) is asked about again."""
        text = json.dumps(self.raw, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
        return hashlib.sha256(f"{self.name}\n{text}".encode()).hexdigest()

    def offers(self, tool: str) -> bool:
        """Whether the person's include/exclude lists let this tool through."""
        if tool in self.exclude_tools:
            return False
        return self.include_tools is None or tool in self.include_tools

    def where(self) -> str:
        return f"{self.source}: {TABLE}.{self.name}"


def exposed_name(server: str, tool: str) -> str:
    """The tool's name as the model sees it: `git__git_commit`."""
    return f"{server}{SEPARATOR}{tool}"


def qualified_name(server: str, tool: str) -> str:
    """The tool's name as rules, the audit and the screen say it: `git.git_commit`."""
    return f"{server}.{tool}"


split_exposed = other_server


# --- reading the files -------------------------------------------------------------------


def servers_in_toml(data: Mapping[str, Any], source: Path, origin: Origin) -> list[ServerSpec]:
    """The `[mcp_servers.NAME]` tables of a TOML file already read (config.toml or a
    project's fsagent.toml)."""
    table = data.get(TABLE, {})
    if not isinstance(table, dict):
        raise StartupError(f"{source}: {TABLE}: write each server as [{TABLE}.NAME]; fix it")
    return [parse_entry(name, raw, source, origin) for name, raw in table.items()]


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise StartupError(f"{path}: cannot be read ({error}); fix it or remove it") from None
    except tomllib.TOMLDecodeError as error:
        raise StartupError(f"{path}: not valid TOML ({error}); fix it or remove it") from None


def servers_in_json(path: Path) -> list[ServerSpec]:
    """`--mcp-config FILE`: `{"mcpServers": {NAME: {...}}}`, as LM Studio's mcp.json, Claude
    Code's .mcp.json and Cursor write it. Named on the command line, so the person chose it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StartupError(f"--mcp-config {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise StartupError(f"--mcp-config {path}: cannot be read ({error})") from None
    except json.JSONDecodeError as error:
        raise StartupError(f"--mcp-config {path}: not valid JSON ({error}); fix it") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise StartupError(
            f'--mcp-config {path}: no "mcpServers" object (the file is '
            '{"mcpServers": {"NAME": {"command": ...}}}); fix it'
        )
    return [parse_entry(name, raw, path, "flag", json_form=True) for name, raw in servers.items()]


def parse_entry(
    name: Any, raw: Any, source: Path, origin: Origin, *, json_form: bool = False
) -> ServerSpec:
    """One entry, checked whole; a StartupError naming the file and the key otherwise."""
    where = f"{source}: {TABLE}.{name}"

    def refuse(key: str | None, why: str) -> StartupError:
        at = f"{where}.{key}" if key else where
        return StartupError(f"{at}: {why}; fix it or remove it")

    if not isinstance(name, str) or not NAME.fullmatch(name) or SEPARATOR in name:
        raise refuse(
            None,
            "a server's name is 1-32 letters, digits, '_' or '-', starting with a letter or "
            "digit, without '__'",
        )
    if not isinstance(raw, dict):
        raise refuse(None, "must be a table of settings")
    allowed = STDIO_KEYS | HTTP_KEYS | COMMON_KEYS | (JSON_ONLY_KEYS if json_form else set())
    for key in raw:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise refuse(key, f"not a setting fsagent knows (it knows {known})")
    transport = transport_of(raw, refuse, json_form)
    common = {
        "enabled": boolean(raw, "enabled", True, refuse),
        "include_tools": names(raw, "include_tools", refuse),
        "exclude_tools": names(raw, "exclude_tools", refuse) or frozenset(),
        "network": boolean(raw, "network", False, refuse),
        "sandbox": boolean(raw, "sandbox", True, refuse),
        "startup_timeout": timeout(raw, refuse),
    }
    if transport == "stdio":
        return ServerSpec(
            name,
            source,
            origin,
            "stdio",
            command=text(raw, "command", refuse),
            args=tuple(strings(raw, "args", refuse)),
            env=string_table(raw, "env", refuse),
            cwd=text(raw, "cwd", refuse) if "cwd" in raw else None,
            raw=dict(raw),
            **common,  # type: ignore[arg-type]
        )
    url = text(raw, "url", refuse)
    if not url.startswith(("http://", "https://")):
        raise refuse("url", f"{url!r} is not an http:// or https:// address")
    headers = string_table(raw, "headers", refuse)
    for header, value in headers.items():
        if not VARIABLE.search(value):
            raise refuse(
                f"headers.{header}",
                "a header's value is never written in the file: name an environment "
                'variable, as "Bearer ${TOKEN}"',
            )
    return ServerSpec(
        name,
        source,
        origin,
        "http",
        url=url,
        headers=headers,
        raw=dict(raw),
        **common,  # type: ignore[arg-type]
    )


def transport_of(raw: dict[str, Any], refuse: Any, json_form: bool) -> Literal["stdio", "http"]:
    stdio = sorted(STDIO_KEYS & set(raw))
    http = sorted(HTTP_KEYS & set(raw))
    if json_form and "type" in raw:
        kind = JSON_TYPES.get(raw["type"]) if isinstance(raw["type"], str) else None
        if kind is None:
            raise refuse("type", f"{raw['type']!r}: fsagent speaks stdio and streamable http")
    if "command" in raw and http:
        raise refuse(http[0], "a server is started by a command or reached at a url, not both")
    if "url" in raw and stdio:
        raise refuse(stdio[0], "a server is started by a command or reached at a url, not both")
    if "command" in raw:
        return "stdio"
    if "url" in raw:
        return "http"
    raise refuse(None, "give a command (a server fsagent starts) or a url (streamable HTTP)")


def text(raw: dict[str, Any], key: str, refuse: Any) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise refuse(key, f"{value!r} is not a non-empty string")
    return value


def boolean(raw: dict[str, Any], key: str, default: bool, refuse: Any) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise refuse(key, f"{value!r} is not true or false")
    return value


def timeout(raw: dict[str, Any], refuse: Any) -> float:
    value = raw.get("startup_timeout", DEFAULT_STARTUP_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise refuse("startup_timeout", f"{value!r} is not a number of seconds above 0")
    return float(value)


def strings(raw: dict[str, Any], key: str, refuse: Any) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise refuse(key, f"{value!r} is not a list of strings")
    return value


def names(raw: dict[str, Any], key: str, refuse: Any) -> frozenset[str] | None:
    return frozenset(strings(raw, key, refuse)) if key in raw else None


def string_table(raw: dict[str, Any], key: str, refuse: Any) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise refuse(key, f"{value!r} is not a table of strings")
    return dict(value)


def filled_headers(spec: ServerSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The headers with their variables filled in from the environment; a StartupError
    naming the server and the variable when one is not set."""
    filled: dict[str, str] = {}
    for header, value in spec.headers.items():

        def fill(match: re.Match[str], header: str = header) -> str:
            variable = match.group(1)
            if variable not in environ:
                raise StartupError(
                    f"{spec.where()}.headers.{header}: the environment variable {variable} "
                    "is not set; set it or disable the server (enabled = false)"
                )
            return environ[variable]

        filled[header] = VARIABLE.sub(fill, value)
    return filled


# --- every configured server --------------------------------------------------------------


def configured_servers(
    user_file: Path, project_file: Path | None, mcp_config: Path | None
) -> list[ServerSpec]:
    """Every server configured, in order: the person's config.toml, --mcp-config, then the
    project's fsagent.toml (which may add servers, never replace one of the person's)."""
    found = servers_in_toml(read_toml(user_file), user_file, "user")
    if mcp_config is not None:
        found += servers_in_json(mcp_config)
    seen: dict[str, ServerSpec] = {}
    for spec in found:
        if spec.name in seen:
            raise StartupError(
                f"{spec.where()}: a server named {spec.name!r} is also in "
                f"{seen[spec.name].source}; rename one of them"
            )
        seen[spec.name] = spec
    if project_file is not None:
        for spec in servers_in_toml(read_toml(project_file), project_file, "project"):
            if spec.name in seen:
                raise StartupError(
                    f"{spec.where()}: a project's file adds servers and never replaces "
                    f"yours ({spec.name!r} is in {seen[spec.name].source}); rename it there"
                )
            seen[spec.name] = spec
    return list(seen.values())
