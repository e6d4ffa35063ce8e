"""What the server says a write call would touch (its `plan` tool), for the rules, the
preview and the approval to judge the same path the server will act on.

The server decodes and resolves a path argument its own way (the shown form of its names:
`\\x2f` is `/`); judging the text the model wrote would judge another path. So the policy
takes its root-relative paths from the plan, a path written so it reads as one place and
names another is refused, and an approval carries the plan's state of what it replaces (the
server's `expect`), so a yes is bound to what the preview showed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.changes.server_reads import ReadError, ask

Tools = dict[str, Any]
Plan = list[dict[str, Any]]  # one entry per path argument, as the server's plan gives them
Places = dict[str, tuple[Path, str] | None]  # argument -> (root, path relative to it)


async def plan_of(call: Mapping[str, Any], tools: Tools) -> Plan | None:
    """The server's plan for a write call; None when it cannot say (a path it refuses, a
    server without `plan`): the call is then judged as unknown, and asked about."""
    if "plan" not in tools:
        return None
    try:
        answer = json.loads(await ask(tools, "plan", {"tool": call["name"], "args": call["args"]}))
    except (ReadError, ValueError):
        return None
    paths = answer.get("paths") if isinstance(answer, dict) else None
    return paths if isinstance(paths, list) else None


def places_of(plan: Plan | None) -> Places | None:
    if plan is None:
        return None
    return {
        str(entry["argument"]): (Path(str(entry["root"])), str(entry["relative"])) for entry in plan
    }


def disguised(plan: Plan | None) -> str | None:
    """Why the call is refused when one of its paths reads as another place than it names."""
    for entry in plan or []:
        if entry.get("reads_as_shown") is False:
            return (
                f"refused: its {entry['argument']} '{entry['given']}' is written with escapes "
                f"the server decodes, and names '{entry['path']}'; write the path plainly"
            )
    return None


def expect_of(plan: Plan | None) -> Plan | None:
    """What the server checks before it acts (its `expect`): each path and its state."""
    if plan is None:
        return None
    return [{"argument": e["argument"], "path": e["path"], "state": e["state"]} for e in plan]
