"""What a yes is bound to: the state the preview a reviewer read showed, carried with the
decision itself and never looked up in a cache (issue 28: a per-process cache, overwritten by
any later preview, once approved a file the admin had never seen, and was empty after a
restart).

Every preview comes with its binding: the plan's `expect` (each path and its state, which the
MCP server checks again right before it acts) and a `preview_id`, a sha256 over the thread,
the call and that expect. A front-end in this process (the terminal's review, `fsagent
approve`) sends both back with its yes. An HTTP client sends the preview_id alone: the state
is read again, and the same digest gives the approval the expect it stands for, while another
refuses it as stale before anything resumes. A digest needs no memory, so it survives a
restart of `fsagent serve`, and any process on the same files verifies it alike. When the
plan failed, the preview says so and its id stands for "no plan": it binds only while the
server still cannot plan the call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.approval.decisions import Decision
from core.changes.marks import Flag
from core.changes.plans import Plan, Tools, expect_of, plan_of
from core.tools.tool_groups import WRITE_TOOLS

PREVIEW_ID_PREFIX = "pv1-"  # the form of the digest below; another form gets another prefix
NO_PLAN = (
    "⚠ no plan: the server could not say what this call would touch, so what is shown here "
    "is not checked again before the call runs"
)


@dataclass(frozen=True)
class Preview:
    """What one preview displayed, and the binding a yes to it carries."""

    lines: list[str]
    expect: Plan | None  # the plan's paths and their state; None when the plan failed
    preview_id: str
    # The characters marked in the lines (core.changes.marks), by line index.
    flags: dict[int, list[Flag]] = field(default_factory=dict)

    def flag_data(self) -> dict[str, list[dict[str, Any]]]:
        """The marked characters as JSON: line index (a string) -> each flag."""
        return {str(at): [found.data() for found in self.flags[at]] for at in sorted(self.flags)}

    def binding(self) -> dict[str, Any]:
        """The fields an approval of this preview carries."""
        bound: dict[str, Any] = {"preview_id": self.preview_id}
        if self.expect is not None:
            bound["expect"] = self.expect
        return bound


@dataclass(frozen=True)
class Bound:
    """A resume value whose approvals are each bound to a preview (made by
    ThreadSession.bind only), so it is resumed as it is."""

    value: dict[str, Any] = field(default_factory=dict)


class BindingError(ValueError):
    """An approval not bound to what is there now; nothing resumes. The message is one line."""


class Unbound(BindingError):
    """An approval that names no preview (HTTP: 428 Precondition Required)."""


class Stale(BindingError):
    """An approval of a preview that no longer shows what is there (HTTP: 412)."""


def preview_id(thread: str, call: Mapping[str, Any], expect: Plan | None) -> str:
    """The digest of one preview's binding: the same thread, call, arguments and state give
    the same id in any process, at any time; anything else another."""
    bound = {
        "thread": thread,
        "call": call.get("id"),
        "tool": call.get("name"),
        "args": call.get("args"),
        "expect": expect,
    }
    # ASCII JSON: a raw path may hold a lone surrogate (a name that is not UTF-8).
    text = json.dumps(bound, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return PREVIEW_ID_PREFIX + hashlib.sha256(text.encode("ascii")).hexdigest()


def shown(
    thread: str,
    call: Mapping[str, Any],
    plan: Plan | None,
    lines: list[str],
    flags: Mapping[int, list[Flag]] | None = None,
) -> Preview:
    """A preview's lines with their binding; a write's failed plan is said first."""
    expect = expect_of(plan)
    first = plan is None and call.get("name") in WRITE_TOOLS
    said = [NO_PLAN, *lines] if first else lines
    moved = {at + first: found for at, found in (flags or {}).items()}
    return Preview(said, expect, preview_id(thread, call, expect), moved)


def carry(decision: Decision, preview: Preview) -> Decision:
    """An approval bound to the preview it answers; other decisions as they are."""
    if decision["type"] == "approve":
        decision["preview_id"] = preview.preview_id
        if preview.expect is not None:
            decision["expect"] = preview.expect
    return decision


async def bound_expect(
    thread: str, call: Mapping[str, Any], decision: Mapping[str, Any], tools: Tools
) -> Plan | None:
    """The expect an approval of `call` runs with: the one it carries, when its preview_id is
    that expect's digest; else the state read now, when that is what its preview showed.
    Unbound without a preview_id, Stale when the state is another now."""
    given = decision.get("preview_id")
    if not isinstance(given, str) or not given:
        raise Unbound(
            f"{call['id']}: {call['name']} was approved without the preview it approves (its "
            "preview_id), so nothing binds it to what is there; nothing was run"
        )
    carried = decision.get("expect")
    if isinstance(carried, list) and carried and preview_id(thread, call, carried) == given:
        return carried  # what this process's own preview showed: no need to read it again
    now = expect_of(await plan_of(call, tools))
    if preview_id(thread, call, now) != given:
        raise Stale(
            f"{call['id']}: {call['name']} {where(call)} is not what its preview showed (it "
            "changed since); nothing was run: look at its preview again and decide"
        )
    return now


def where(call: Mapping[str, Any]) -> str:
    """What a call works on, as the model wrote it, for a line a reviewer reads."""
    args = call.get("args")
    if not isinstance(args, dict):
        return ""
    if isinstance(args.get("path"), str):
        return repr(args["path"])
    return f"{args.get('source')!r} -> {args.get('destination')!r}"
