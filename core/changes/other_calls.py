"""The preview of a call to another MCP server (docs/other-servers.md): nothing of ours can
work out what it would do, so the person is shown exactly what would be sent: the server and
the tool named, what its annotations say, and every argument, each string escaped
(core.text.visible) so no control character reaches the screen. A long value is shown whole
in the whole preview and by its start in the cut one, with how much was left out. The yes
binds to exactly these arguments (core.changes.binding: the preview_id is over the tool's
name, which holds the server's, and the arguments)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.servers import gate
from core.text import visible
from core.tools.tool_groups import other_server

LONG_VALUE = 400  # characters of one argument a cut preview shows
CANNOT_UNDO = "fsagent cannot undo a call to another server: once run, only that server can."


def is_other_call(call: Mapping[str, Any]) -> bool:
    return other_server(str(call.get("name") or "")) is not None


def other_call_lines(
    call: Mapping[str, Any], tools: Mapping[str, Any], *, whole: bool
) -> list[str]:
    split = other_server(str(call.get("name") or ""))
    assert split is not None, "only another server's call"
    server, tool = split
    facts = gate.facts_of(tools[call["name"]]) if call["name"] in tools else None
    lines = [visible(f"MCP server {server}, tool {tool} ({server}.{tool}): {said(facts)}")]
    for note in (facts or {}).get("changed") or []:
        lines.append(visible(f"⚠ changed since it was pinned: {note}"))
    args = call.get("args")
    for name, value in args.items() if isinstance(args, dict) else []:
        lines.append(f"  {visible(str(name))}: {argument(value, whole)}")
    if not args:
        lines.append("  (no arguments)")
    return [*lines, CANNOT_UNDO]


def said(facts: Mapping[str, Any] | None) -> str:
    """What the tool's annotations say, with the specification's pessimistic defaults."""
    if facts is None:
        return "not known to this process; judged as a write"
    words = ["not proven read-only" if not facts.get("read_only") else "read-only"]
    if facts.get("claims_read_only") and not facts.get("read_only"):
        words[0] = "claims read-only, but not as pinned"
    if facts.get("destructive"):
        words.append("destructive")
    if facts.get("open_world"):
        words.append("open world")
    return ", ".join(words)


def argument(value: Any, whole: bool) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    shown = visible(repr(text) if isinstance(value, str) else text)
    if whole or len(shown) <= LONG_VALUE:
        return shown
    return f"{shown[:LONG_VALUE]}… ({len(shown):,} characters; the whole preview shows all)"
