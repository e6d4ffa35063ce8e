"""Each of the person's other servers as a route of its own (docs/other-servers.md, "One
route per server"): the router's word for it, its node (`agent_<word>`), its tools, and the
server's one-line description as the router's question quotes it.

The description is the server's text, not ours (its `instructions`, else its title or name):
it is made one line and cut (core.servers.launch.one_line: control characters written out,
whitespace runs made one space, at most DESCRIPTION_CHARS), and then made unable to end the
quote or the bracket it is put in: `"` becomes `'`, `[` and `]` become `(` and `)`. So a
description cannot close the router's `[fsagent: ...]` note and write one of its own, and it
never reaches the route schema, whose enum holds our words for the routes alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.tools import BaseTool

from core.servers import gate
from core.servers.launch import one_line
from core.tools.tool_groups import ROUTES, Routes, ServerRoute, route_name

QUOTE_SAFE = str.maketrans({'"': "'", "[": "(", "]": ")"})


def quoted(words: str) -> str:
    """A server's description as the router's question carries it: one line, cut, and in
    double quotes it cannot end."""
    return '"' + one_line(words).translate(QUOTE_SAFE) + '"'


def server_routes(tools: Iterable[BaseTool]) -> Routes:
    """A route per other server among `tools`, in the order their tools come."""
    servers: dict[str, list[str]] = {}
    descriptions: dict[str, str] = {}
    for tool in tools:
        facts = gate.facts_of(tool)
        if facts is None:
            continue
        server = str(facts.get("server") or "")
        servers.setdefault(server, []).append(tool.name)
        descriptions.setdefault(server, str(facts.get("description") or server))
    taken = set(ROUTES)
    made = []
    for server, names in servers.items():
        name = route_name(server, taken)
        taken.add(name)
        made.append(ServerRoute(name, server, quoted(descriptions[server]), tuple(names)))
    return Routes(tuple(made))
