"""What the server says a write call would touch (its `plan` tool), for the rules, the
preview and the approval to judge the same path the server will act on.

The server decodes and resolves a path argument its own way (the shown form of its names:
`\\x2f` is `/`); judging the text the model wrote would judge another path. So the policy
takes its paths from the plan and from nothing else: each entry's `root` and `relative` are
raw paths (the root's real path; the path below it, posix, `.` for the root itself; a
non-UTF-8 byte as Python's surrogateescape character), compared with our roots and the
rules file in that one raw form; `path` is only for showing. A path written so it reads as
one place and names another is refused, so is a protected one (the server's `"protected":
true`) and one through the server's own names (`"reserved": true`), and an approval carries
the plan's state of what it replaces (the server's `expect`), so a yes is bound to what the
preview showed.

A call the server cannot plan (an unreadable file, a timeout, a path it refuses, a server
without `plan`) is never judged on its text: it is `CallPlan` with an `error` and no paths,
which no rule, mode or grant may approve (core.approval.approval.decide_without_person).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from core.approval.policy import Places, path_arguments
from core.changes.server_reads import ReadError, ask
from core.tools.tool_groups import other_server

Tools = dict[str, Any]
Plan = list[dict[str, Any]]  # one entry per path argument, as the server's plan gives them


@dataclass(frozen=True)
class CallPlan:
    """The server's plan of one write call (`paths`), or why there is none (`error`)."""

    paths: Plan | None = None
    error: str = ""

    def kept(self) -> str:
        """As the thread keeps it: JSON text, all ASCII. A raw path's non-UTF-8 byte is a
        lone surrogate, which the checkpoint's msgpack writes as `?`; escaped in JSON it
        comes back as it was, so a resume judges the same path."""
        kept = {"paths": self.paths} if self.paths is not None else {"error": self.error}
        return json.dumps(kept)


def read_kept(value: Any) -> CallPlan:
    """A plan as `kept` wrote it. An older thread's plan (a plain list) is read as it is;
    anything else is no plan at all, which fails closed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return CallPlan(error="the plan kept for this call cannot be read")
    if isinstance(value, list):
        return CallPlan(value)
    if isinstance(value, dict):
        if isinstance(value.get("paths"), list):
            return CallPlan(value["paths"])
        if isinstance(value.get("error"), str):
            return CallPlan(error=value["error"])
    return CallPlan(error="no plan was made for this call")


async def plan_call(call: Mapping[str, Any], tools: Tools) -> CallPlan:
    """The server's plan for a write call, or its one-line reason for giving none."""
    if other_server(str(call.get("name") or "")) is not None:
        # Our server plans our calls only: another server's arguments are what it does.
        return CallPlan(error="another server's call: its arguments are what it does")
    if "plan" not in tools:
        return CallPlan(error="the MCP server offers no plan tool")
    try:
        answer = json.loads(await ask(tools, "plan", {"tool": call["name"], "args": call["args"]}))
    except ReadError as error:
        return CallPlan(error=str(error) or "the server gave no reason")
    except ValueError:
        return CallPlan(error="the server's plan is not JSON")
    paths = answer.get("paths") if isinstance(answer, dict) else None
    if not isinstance(paths, list):
        return CallPlan(error="the server's plan has no paths")
    return CallPlan(paths)


async def plan_of(call: Mapping[str, Any], tools: Tools) -> Plan | None:
    """The plan's paths, for a preview; None when the server could not plan the call."""
    return (await plan_call(call, tools)).paths


# --- what the rules judge ------------------------------------------------------------------


class Judged(NamedTuple):
    """A call's plan as the policy reads it. `places` is None when the plan cannot be
    judged, and `unplanned` says why; `refused` is why the call is refused outright."""

    places: Places | None
    refused: str | None = None
    unplanned: str | None = None


def judged(call: Mapping[str, Any], plan: CallPlan, roots: Sequence[Path]) -> Judged:
    """The raw (root, relative) of each path argument, checked: every argument the tool
    takes has exactly one entry, in one of our `roots`, below it by a normal posix path.
    A plan that fails any of that is no plan (the server's answer is not what we judge)."""
    if plan.paths is None:
        return Judged(None, unplanned=plan.error or "the server gave no plan")
    refused = disguised(plan.paths) or protected(plan.paths) or reserved(plan.paths)
    wanted = path_arguments(str(call["name"]))
    places: Places = {}
    for entry in plan.paths:
        place = raw_place(entry, roots)
        argument = entry.get("argument") if isinstance(entry, dict) else None
        if place is None or argument not in wanted or argument in places:
            return Judged(None, refused, "the server's plan names a place fsagent cannot judge")
        places[str(argument)] = place
    if set(places) != set(wanted):
        return Judged(None, refused, "the server's plan leaves out a path of the call")
    return Judged(places, refused)


def raw_place(entry: Any, roots: Sequence[Path]) -> tuple[Path, str] | None:
    """An entry's (root, relative), raw; None unless the root is one of ours and the
    relative path is a plain one below it."""
    if not isinstance(entry, dict):
        return None
    root, relative = entry.get("root"), entry.get("relative")
    if not isinstance(root, str) or not isinstance(relative, str) or Path(root) not in roots:
        return None
    if relative != "." and (
        PurePosixPath(relative).as_posix() != relative
        or relative.startswith("/")
        or ".." in relative.split("/")
    ):
        return None
    return Path(root), relative


def disguised(plan: Plan) -> str | None:
    """Why the call is refused when one of its paths reads as another place than it names."""
    for entry in plan:
        if isinstance(entry, dict) and entry.get("reads_as_shown") is False:
            return (
                f"refused: its {entry.get('argument')} '{entry.get('given')}' is written with "
                f"escapes the server decodes, and names '{entry.get('path')}'; write the path "
                "plainly"
            )
    return None


def flagged(plan: Plan, flag: str) -> dict[str, Any] | None:
    """The plan's first entry the server marked with `flag` (`protected`, `reserved`)."""
    for entry in plan:
        if isinstance(entry, dict) and entry.get(flag) is True:
            return entry
    return None


def protected(plan: Plan) -> str | None:
    """Why the call is refused when it would change a protected file (the rules file, the
    thread store) or a folder holding one: only the person changes those, by hand."""
    entry = flagged(plan, "protected")
    if entry is None:
        return None
    return (
        f"refused: '{entry.get('path')}' is protected (fsagent's rules file or its "
        "thread store, or a folder holding one), and no approval can change it; "
        "the person must edit it themselves"
    )


def reserved(plan: Plan) -> str | None:
    """Why the call is refused when a path goes through a name the server keeps for its own
    temporary and set-aside entries (`.fsagent-...`): a rename there is a delete in disguise,
    and the server refuses it anyway (mcp_servers/reserved.py)."""
    entry = flagged(plan, "reserved")
    if entry is None:
        return None
    return (
        f"refused: its {entry.get('argument')} '{entry.get('path')}' goes through a "
        "name the filesystem server keeps for its own entries (every name starting "
        "'.fsagent-'); choose another name"
    )


def expect_of(plan: Plan | None) -> Plan | None:
    """What the server checks before it acts (its `expect`): each path and its state."""
    if plan is None:
        return None
    return [{"argument": e["argument"], "path": e["path"], "state": e["state"]} for e in plan]
