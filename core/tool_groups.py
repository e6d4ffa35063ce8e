"""Which tools write (and so wait for approval), and the groups the router chooses among.
Names only: importable without loading the MCP client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_servers.tool_names import READ_TOOL_NAMES, WRITE_TOOL_NAMES

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

# The write tools (each one waits for approval) and the read tools, as our server names them.
WRITE_TOOLS: frozenset[str] = WRITE_TOOL_NAMES
ALLOWED_TOOLS: frozenset[str] = READ_TOOL_NAMES
# The agent's own tool, not the server's: the model asks the person (core.questions). Every
# group offers it.
ASK_PERSON = "ask_person"

# Each group is an agent node (`agent_<group>`) bound to these tools. `general` gets every tool.
# Groups only narrow what the model is offered; approval is decided by tool name, never by group.
TOOL_GROUPS: dict[str, frozenset[str] | None] = {
    # Files and folders: every tool but the searches.
    "filesystem": (ALLOWED_TOOLS - {"search_files", "grep"}) | WRITE_TOOLS | {ASK_PERSON},
    "search": frozenset(
        {
            "list_allowed_roots",
            "list_directory",
            "directory_tree",
            "search_files",
            "grep",
            "read_file",
            "get_file_info",
            ASK_PERSON,
        }
    ),
    "general": None,  # None means every loaded tool
}
ROUTES: tuple[str, ...] = tuple(TOOL_GROUPS)


def tools_for_group(tools: list[BaseTool], group: str) -> list[BaseTool]:
    names = TOOL_GROUPS[group]
    return [tool for tool in tools if names is None or tool.name in names]
