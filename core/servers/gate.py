"""The annotation gate: which of another server's tools run without asking.

MCP's annotations are hints with pessimistic defaults (spec 2025-03-26: `readOnlyHint`
false, `destructiveHint` true, `openWorldHint` true). A tool runs without asking only when it
is proven read-only: `readOnlyHint: true` on a definition the person took on (pinned, or the
server's first use; core.servers.pins). Every other tool, one with no annotations too, goes
through `approve` like our write tools.

The facts are kept on each langchain tool's `metadata` under `FACTS`, where the graph reads
them (`read_only_names`, `pins_of`) without knowing how they were found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool
from mcp import types

from core.servers.pins import Pin

FACTS = "fsagent_server"


def annotation(tool: types.Tool, key: str, default: bool) -> bool:
    value = getattr(tool.annotations, key, None) if tool.annotations else None
    return default if value is None else bool(value)


def facts(server: str, tool: types.Tool, pin: Pin) -> dict[str, Any]:
    claims = annotation(tool, "readOnlyHint", False)
    return {
        "server": server,
        "tool": tool.name,
        "read_only": claims and pin.trusted,
        "claims_read_only": claims,
        "destructive": annotation(tool, "destructiveHint", True),
        "open_world": annotation(tool, "openWorldHint", True),
        "pin": pin.digest,
        "pin_status": pin.status,
        "changed": list(pin.changed),
        "title": getattr(tool.annotations, "title", None) or tool.title or "",
    }


def mark(tool: BaseTool, told: Mapping[str, Any]) -> None:
    tool.metadata = {**(tool.metadata or {}), FACTS: dict(told)}


def facts_of(tool: BaseTool) -> Mapping[str, Any] | None:
    found = (tool.metadata or {}).get(FACTS)
    return found if isinstance(found, dict) else None


def read_only_names(tools: Iterable[BaseTool]) -> frozenset[str]:
    """The other servers' tools proven read-only, by the name the model calls them."""
    return frozenset(
        tool.name for tool in tools if (found := facts_of(tool)) and found.get("read_only") is True
    )


def others(tools: Iterable[BaseTool]) -> dict[str, Mapping[str, Any]]:
    """Each other server's tool's facts, by the name the model calls it."""
    return {tool.name: found for tool in tools if (found := facts_of(tool)) is not None}
