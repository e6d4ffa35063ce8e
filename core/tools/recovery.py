"""What the MCP server's recovery at start put right, as the one line a session says.

A server killed mid-act (issue 40) leaves its journal of intent; the next server on the root
finishes or undoes each act before it serves (mcp_servers/journal.py), and says in
`initialize` (the experimental capability `fsagent/recovery`) what it put back under its name
and what it had to keep under another (`NAME.fsagent-recovered-<time>`, its name was taken).
The person should know: a file they deleted by hand may be back, another is under a new name.
The terminal's banner says the line (display.py), `fsagent serve` and the other commands write
it to stderr (agent.py); it holds paths of the tree, so it is escaped where it is written
(core.text.visible: the terminal's `say`, `complain`), as every line of theirs is.
"""

from __future__ import annotations

from typing import Any

from mcp.types import InitializeResult

from mcp_servers.tool_names import RECOVERY_CAPABILITY

SHOWN_PATHS = 5  # paths put back the line names; the rest are counted
LEAD = "recovery: "  # how the server starts each of its lines


def recovery_line(initialized: InitializeResult) -> str | None:
    """The one line of what the server's recovery did, or None when it did nothing to say."""
    report = (initialized.capabilities.experimental or {}).get(RECOVERY_CAPABILITY)
    if not isinstance(report, dict):
        return None
    return line_of(report)


def line_of(report: dict[str, Any]) -> str | None:
    put_back = [str(path) for path in report.get("put_back") or []]
    kept = [str(line).removeprefix(LEAD) for line in report.get("kept") or []]
    more = report.get("more") if isinstance(report.get("more"), int) else 0
    parts = []
    if put_back:
        named = ", ".join(put_back[:SHOWN_PATHS])
        left_out = len(put_back) - SHOWN_PATHS
        named += f" and {left_out:,} more" if left_out > 0 else ""
        parts.append(
            f"put back under {'its name' if len(put_back) == 1 else 'their names'}: {named}"
        )
    parts += kept
    if not parts:
        return None
    line = "⚠ recovery: a server stopped mid-act before this one; " + "; ".join(parts)
    if more:
        line += f" (and {more:,} more)"
    return line
