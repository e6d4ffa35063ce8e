"""Each other server's tools pinned: the definition the person first used, so a later change
(tool poisoning, a description that grows instructions, a tool that drops or gains its
read-only hint) is seen, said, and asked about.

The first time a server is used, each tool's name, description, input schema and annotations
are recorded with a digest, in `$XDG_DATA_HOME/fsagent/pins/NAME.json`. Kept in the data
folder, not the thread store: a pin is about the server this person configured on this
machine, the same for every thread and both stores, and is read before any thread opens; a
Postgres store may be shared by people whose servers differ.

At each start the listed tools are held against the pins:

- `pinned`: as recorded; its read-only hint is trusted.
- `first`: the server was never used: recorded now, and trusted as listed (the person just
  added the server).
- `added`: a tool the pins do not have; `changed`: one whose definition differs. Both are
  treated as new: asked about on every call (a read-only claim is not trusted), grants given
  under the old definition void (a grant carries the digest), and what changed is said in one
  line. The person accepts the new definitions by deleting the pin file, which pins the server
  again at the next start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp import types

from core.errors import StartupError
from core.servers.records import NO_FILE, read_json, write_json
from core.text import visible

Status = Literal["pinned", "first", "added", "changed"]
FIELDS = ("description", "inputSchema", "annotations")
SHOWN_CHARS = 80


def pin_file(data_folder: Path, server: str) -> Path:
    return data_folder / "pins" / f"{server}.json"


def definition(tool: types.Tool) -> dict[str, Any]:
    """What is pinned of a tool: what the model reads of it and what decides its approval."""
    annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}
    return {
        "name": tool.name,
        "description": tool.description or "",
        "inputSchema": tool.inputSchema,
        "annotations": annotations,
    }


def digest(defined: Mapping[str, Any]) -> str:
    text = json.dumps(defined, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Pin:
    """One listed tool held against its pin."""

    tool: str
    status: Status
    digest: str  # of the definition listed now
    changed: tuple[str, ...] = field(default_factory=tuple)  # what differs, for the person

    @property
    def trusted(self) -> bool:
        """Whether its definition is one the person took on: only then does its read-only
        hint let it run without asking."""
        return self.status in ("pinned", "first")


def load_pins(path: Path) -> dict[str, dict[str, Any]] | None:
    """The pinned definitions by tool name; None when the server was never pinned."""
    data = read_json(path, "the server's pinned tools", "delete it to pin the server again")
    if data is NO_FILE:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise StartupError(f"{path}: not a file of pinned tools; delete it to pin the server again")
    return data


def hold(listed: Sequence[types.Tool], pinned: Mapping[str, dict[str, Any]] | None) -> list[Pin]:
    """Each listed tool held against the pins (None: never pinned)."""
    held = []
    for tool in listed:
        now = definition(tool)
        if pinned is None:
            held.append(Pin(tool.name, "first", digest(now)))
            continue
        before = pinned.get(tool.name)
        if before is None:
            held.append(Pin(tool.name, "added", digest(now)))
        elif before != now:
            held.append(Pin(tool.name, "changed", digest(now), differences(before, now)))
        else:
            held.append(Pin(tool.name, "pinned", digest(now)))
    return held


def differences(before: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[str, ...]:
    """What changed, each as a short phrase a person can read."""
    said = []
    for key in FIELDS:
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        if key == "description":
            said.append(f"description {shown(old)} -> {shown(new)}")
        elif key == "annotations":
            old_map = old if isinstance(old, dict) else {}
            new_map = new if isinstance(new, dict) else {}
            keys = sorted(set(old_map) | set(new_map))
            parts = [
                f"{k} {old_map.get(k, 'unset')} -> {new_map.get(k, 'unset')}"
                for k in keys
                if old_map.get(k) != new_map.get(k)
            ]
            said.append("annotations " + ", ".join(parts))
        else:
            said.append("input schema")
    return tuple(said)


def shown(value: Any) -> str:
    text = " ".join(visible(str(value or "")).split())
    text = text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
    return repr(text)


def record(path: Path, listed: Sequence[types.Tool]) -> None:
    """Pin these definitions (the server's first use). Written whole, then renamed."""
    write_json(path, {tool.name: definition(tool) for tool in listed})


def lines(server: str, held: Sequence[Pin], path: Path) -> list[str]:
    """One line for each tool that is not as pinned, saying what changed and what to do."""
    said = []
    for pin in held:
        if pin.status == "changed":
            what = "; ".join(pin.changed)
            said.append(
                f"MCP server {server}: {pin.tool} changed since it was pinned ({what}); every "
                f"call is asked as a new tool's; accept it by deleting {path}"
            )
        elif pin.status == "added":
            said.append(
                f"MCP server {server}: {pin.tool} is new since the server was pinned; every "
                f"call is asked as a new tool's; accept it by deleting {path}"
            )
    return [visible(line) for line in said]
