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

An id names its call in its first part (a digest of the thread, the call and its arguments)
and the state in its second, so a refusal says what happened: an id of another call (another
thread, call or arguments: `Foreign`) is not a file that changed (`Stale`; issue 41: both were
"it changed since"). An edit is bound the same way (issue 41: an edit decided after the file
changed wrote over what no one was shown): to its own preview's id (the inbox's "Preview the
edit", over the edited arguments), or to the id of the call's preview it was decided on (the
terminal's `e`); either is checked against the state read now. The state itself (`expect`)
is never taken from an HTTP body: only this process's own front-ends carry it, with its id.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.approval.decisions import Decision
from core.changes.marks import Flag
from core.changes.plans import CallPlan, Plan, Tools, expect_of, plan_call, plan_of
from core.tools.tool_groups import WRITE_TOOLS
from mcp_servers import race_hook

# The form of the id below; another form gets another prefix. pv1 (one digest, issue 28) had
# no call part: an id of that form is refused as another call's.
PREVIEW_ID_PREFIX = "pv2-"
CALL_PART = 32  # hex digits of the call's own digest at the head of an id
EDIT_PAUSE_ENV = "FSAGENT_TEST_EDIT_PAUSE"  # tests only: _paused_between_reads
_edit_hook: race_hook.Hook | None = None
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
    """An approval of this call's preview, which no longer shows what is there: the file
    changed since the reviewer looked (HTTP: 412)."""


class Foreign(BindingError):
    """An approval that names another call's preview (another thread, call id or arguments,
    or an id of no form this version gives): nothing needs to have changed (HTTP: 412)."""


def preview_id(thread: str, call: Mapping[str, Any], expect: Plan | None) -> str:
    """The digest of one preview's binding: the same thread, call, arguments and state give
    the same id in any process, at any time; anything else another. Its head is the call's
    own digest (`call_part`), so an id of another call is told from a changed state."""
    bound = {**_call_fields(thread, call), "expect": expect}
    return f"{PREVIEW_ID_PREFIX}{call_part(thread, call)}-{_digest(bound)}"


def call_part(thread: str, call: Mapping[str, Any]) -> str:
    """The head of every preview id of this call with these arguments, whatever the state."""
    return _digest(_call_fields(thread, call))[:CALL_PART]


def is_of(given: str, thread: str, call: Mapping[str, Any]) -> bool:
    """Whether `given` is an id of a preview of this very call (thread, id, tool, args)."""
    return given.startswith(f"{PREVIEW_ID_PREFIX}{call_part(thread, call)}-")


def _call_fields(thread: str, call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "thread": thread,
        "call": call.get("id"),
        "tool": call.get("name"),
        "args": call.get("args"),
    }


def _digest(value: Any) -> str:
    # ASCII JSON: a raw path may hold a lone surrogate (a name that is not UTF-8).
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


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
    placed = {at + first: found for at, found in (flags or {}).items()}
    return Preview(said, expect, preview_id(thread, call, expect), placed)


def carry(decision: Decision, preview: Preview) -> Decision:
    """A decision bound to the preview it was made on: an approval carries its id and the
    state it stands for (this process's own preview: no need to read it again), an edit its
    id alone (its own arguments are planned again when it is bound); others as they are."""
    if decision["type"] in ("approve", "edit"):
        decision["preview_id"] = preview.preview_id
    if decision["type"] == "approve" and preview.expect is not None:
        decision["expect"] = preview.expect
    return decision


async def bound_expect(
    thread: str, call: Mapping[str, Any], decision: Mapping[str, Any], tools: Tools
) -> Plan | None:
    """The expect an approval of `call` runs with: the one it carries, when its preview_id is
    that expect's digest (only this process's front-ends carry one: an HTTP body with
    `expect` is refused before this, core.approval.decisions); else the state read now, when
    that is what its preview showed. Unbound without a preview_id, Foreign for another
    call's, Stale when the state is another now."""
    given = decision.get("preview_id")
    if not isinstance(given, str) or not given:
        raise Unbound(
            f"{call['id']}: {call['name']} was approved without the preview it approves (its "
            "preview_id), so nothing binds it to what is there; nothing was run"
        )
    if not is_of(given, thread, call):
        raise Foreign(foreign_line(call))
    carried = decision.get("expect")
    if isinstance(carried, list) and carried and preview_id(thread, call, carried) == given:
        return carried  # what this process's own preview showed: no need to read it again
    now = expect_of(await plan_of(call, tools))
    if preview_id(thread, call, now) != given:
        raise Stale(stale_line(call))
    return now


async def bound_edit(
    thread: str, call: Mapping[str, Any], args: Any, given: Any, tools: Tools
) -> CallPlan:
    """The plan an edit of `call` to `args` runs with (its expect the state read now), bound
    to the preview it was decided on: the edit's own (an id over the edited arguments, as the
    inbox previews an edit), or the call's (the terminal shows the call's diff, then takes
    `e`). Either must show what is there now: Stale when it does not, and for the call's
    preview also when a path the two share reads otherwise for the edit (it changed between
    the two reads). Unbound without an id, Foreign for an id of neither."""
    edited = {**call, "args": args}
    if not isinstance(given, str) or not given:
        raise Unbound(
            f"{call['id']}: {call['name']} was edited without the preview it answers (its "
            "preview_id: the edit's own preview, or the call's), so nothing binds it to what "
            "is there; nothing was run"
        )
    if is_of(given, thread, edited):
        made = await plan_call(edited, tools)
        if preview_id(thread, edited, expect_of(made.paths)) != given:
            raise Stale(stale_line(edited))
        return made
    if not is_of(given, thread, call):
        raise Foreign(foreign_line(call, edit=True))
    seen = await plan_call(call, tools)
    if preview_id(thread, call, expect_of(seen.paths)) != given:
        raise Stale(stale_line(call))
    await _paused_between_reads()
    made = await plan_call(edited, tools)
    if moved(seen, made):  # what the preview showed changed after it was read again
        raise Stale(stale_line(call))
    return made


async def _paused_between_reads() -> None:
    """Tests only: FSAGENT_TEST_EDIT_PAUSE names a folder with the two FIFOs of
    mcp_servers/race_hook.py; between an edit's two reads the binding writes `paused edit
    bound` and waits for `go`, so a test can change a file exactly there. Unset, nothing."""
    global _edit_hook
    folder = os.environ.get(EDIT_PAUSE_ENV)
    if folder:
        _edit_hook = _edit_hook or race_hook.Hook(folder)
        await asyncio.to_thread(_edit_hook.pause, "edit", "bound")


def moved(seen: CallPlan, made: CallPlan) -> bool:
    """Whether a path in both plans (by its raw root and relative path) is in two states."""
    states = {_place(entry): entry.get("state") for entry in seen.paths or []}
    return any(
        _place(entry) in states and states[_place(entry)] != entry.get("state")
        for entry in made.paths or []
    )


def _place(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    return entry.get("root"), entry.get("relative")


def stale_line(call: Mapping[str, Any]) -> str:
    return (
        f"{call['id']}: {call['name']} {where(call)} changed since you looked: what is there "
        "now is not what its preview showed; nothing was run: look at its preview again and "
        "decide"
    )


def foreign_line(call: Mapping[str, Any], *, edit: bool = False) -> str:
    about, then = (
        ("this edit", "preview the edit as you send it and decide with that preview's id")
        if edit
        else ("this call", "decide with the preview_id of its own preview")
    )
    return (
        f"{call['id']}: {call['name']} {where(call)}: this preview id belongs to another call "
        f"(another thread, call or arguments), not to {about}; nothing changed and nothing "
        f"was run: {then}"
    )


def where(call: Mapping[str, Any]) -> str:
    """What a call works on, as the model wrote it, for a line a reviewer reads."""
    args = call.get("args")
    if not isinstance(args, dict):
        return ""
    if isinstance(args.get("path"), str):
        return repr(args["path"])
    return f"{args.get('source')!r} -> {args.get('destination')!r}"
