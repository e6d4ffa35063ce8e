"""Which tools write (and so wait for approval), and the groups the router chooses among.
Names only: importable without loading the MCP client."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_servers.tool_names import READ_TOOL_NAMES, WRITE_TOOL_NAMES

# The write tools (each one waits for approval) and the read tools, as our server names them.
WRITE_TOOLS: frozenset[str] = WRITE_TOOL_NAMES
ALLOWED_TOOLS: frozenset[str] = READ_TOOL_NAMES
# Another server's tool is named `SERVER__TOOL` for the model (core.servers.config); no tool of
# ours holds `__`, so the name alone says whose a tool is.
SEPARATOR = "__"


def other_server(name: str) -> tuple[str, str] | None:
    """(server, tool) of another server's tool by the name the model calls it; None for ours."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def needs_approval(name: str, read_only_others: frozenset[str] = frozenset()) -> bool:
    """Whether a call waits for approval: our write tools, and every other server's tool
    not proven read-only (core.servers.gate). Fail closed: a caller that does not know which
    are proven read-only treats every other server's tool as a write."""
    if name in WRITE_TOOLS:
        return True
    return other_server(name) is not None and name not in read_only_others


# The agent's own tool, not the server's: the model asks the person (core.approval.questions). Every
# group offers it.
ASK_PERSON = "ask_person"

# Each group is an agent node (`agent_<group>`). Every request offers the model the same
# tools, whatever the group (a changed tool list would void the server's prompt cache); a
# group narrows what may run, by a note after the person's words (core.context.prompts.ROUTE_NOTES)
# and by refusing the calls outside it. None means every tool.
# Groups only narrow; approval is decided by tool name, never by group.
TOOL_GROUPS: dict[str, frozenset[str] | None] = {
    "filesystem": None,  # read, create, change, copy, move or delete files and folders
    "search": ALLOWED_TOOLS | {ASK_PERSON},  # find and read: no write runs on this route
    "general": None,
}
ROUTES: tuple[str, ...] = tuple(TOOL_GROUPS)


def in_group(group: str, tool: str) -> bool:
    names = TOOL_GROUPS.get(group)
    return names is None or tool in names


# The tools each route offers where the fixed part would be a large share of the context (a
# 2048 context, where every tool and the system prompt took 60% of it; issue 30): what the
# route needs, each tool on one route at least (a test holds that). On larger contexts every
# route offers every tool, which keeps the prompt cache across route switches; here a thread
# keeps offering the tools of every route it took (core.context.context.ContextKeeper.offered),
# so only a thread's first turn on a route makes the server read its history again. Like any
# tool not offered, a call to another still runs if its route allows it. Another server's route
# offers its own tools here (Routes.small_tools), and only there; every route but search may
# run them.
SMALL_CONTEXT_TOOLS: dict[str, tuple[str, ...]] = {
    "filesystem": ("list_directory", "read_file", "write_file", "move", "delete"),
    "search": ("grep", "list_directory", "read_file"),
    "general": ("list_directory", "read_file", "ask_person"),
}


# The agent node of a route is `agent_<route>`.
AGENT_PREFIX = "agent_"


def is_agent_step(step: str) -> bool:
    """Whether a graph step is a route's agent node. A server's route is there only while its
    server is configured, so a run cut off at one is closed, never judged by the node list."""
    return step.startswith(AGENT_PREFIX) and len(step) > len(AGENT_PREFIX)


@dataclass(frozen=True)
class ServerRoute:
    """Another MCP server as a route of its own (core.servers.routes builds them): its word
    for the router and its node (`agent_<name>`), the server it is, the server's own
    one-line description as the router's question quotes it, and its tools by the names
    the model calls them."""

    name: str
    server: str
    description: str
    tools: tuple[str, ...]


@dataclass(frozen=True)
class Routes:
    """The routes the router chooses among: our filesystem groups, then one per other server
    with tools."""

    servers: tuple[ServerRoute, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return ROUTES + tuple(route.name for route in self.servers)

    def server(self, route: str) -> ServerRoute | None:
        return next((found for found in self.servers if found.name == route), None)

    def small_tools(self, route: str) -> tuple[str, ...]:
        """The tools a route offers on a small context: a filesystem group's few, or a
        server's own tools and no other."""
        found = self.server(route)
        return found.tools if found is not None else SMALL_CONTEXT_TOOLS.get(route, ())


FILESYSTEM_ROUTES = Routes()


def route_name(server: str, taken: set[str]) -> str:
    """A server's route word: its name in lower case (the router reads the model's word so),
    and `_mcp` after it (then a number) when that is one of our groups or another route's."""
    base = server.lower()
    name, n = base, 1
    while name in taken:
        name = f"{base}_mcp" if n == 1 else f"{base}_mcp{n}"
        n += 1
    return name
