"""An undo at the terminal, from `/undo` at the prompt or `fsagent undo NAME`: the plan shown
(what each step restores, as diffs, and what changed since the write), the person's yes or
no (strictly y/yes/n/no from a pipe), then the steps as they run."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator

from core.changes.undo_capture import shown
from core.opening import undo_notice
from core.session import ThreadSession
from core.text import visible
from core.threads import events
from core.undo import NothingToUndo, UndoError, UndoPlan
from terminal.console import Terminal, put
from terminal.interrupts import Interrupted
from terminal.review import NotAnAnswer, describe_call, diff_style
from terminal.slash import CommandContext, Outcome, command
from terminal.steps import StepPrinter

UNDO_USAGE_SHORT = "[--call ID | --turn N] [--force]"
UNDO_USAGE = f"/undo {UNDO_USAGE_SHORT}"
YES, NO = frozenset({"y", "yes"}), frozenset({"n", "no"})


def parse_undo(words: list[str]) -> tuple[str | None, int | None, bool]:
    """(call, turn, force) from the words after /undo; ValueError says the usage."""
    call: str | None = None
    turn: int | None = None
    force = False
    rest = list(words)
    while rest:
        word = rest.pop(0)
        if word == "--force":
            force = True
        elif word == "--call" and rest and call is None and turn is None:
            call = rest.pop(0)
        elif word == "--turn" and rest and rest[0].isdigit() and call is None and turn is None:
            turn = int(rest.pop(0))
        else:
            raise ValueError(f"not understood: {word!r}; use {UNDO_USAGE}")
    return call, turn, force


# A line of the plan: its text, and the colour of a diff line (an SGR code) on a terminal.
PlanLine = tuple[str, str | None]


def plan_lines(plan: UndoPlan) -> list[PlanLine]:
    lines: list[str | PlanLine]
    lines = [f"↶ Undo {plan.what}: {len(plan.to_run)} change(s), newest first."]
    for number, item in enumerate(plan.items, 1):
        record = item.record
        call = {"name": record.tool, "args": record.args}
        lines.append(f"[{number}/{len(plan.items)}] {describe_call(call)}  ({record.call_id})")
        if item.cannot:
            lines.append(f"    ✗ cannot be undone: {item.cannot}; it is left as it is")
            continue
        if item.nothing:
            lines.append(f"    nothing to undo: {item.nothing}")
            continue
        lines += [("    " + visible(line, keep="\t"), diff_style(line)) for line in item.lines]
        forced = " (--force: restored anyway)" if plan.force else ""
        lines += [f"    ⚠ {problem}{forced}" for problem in item.problems]
    return [(line, None) if isinstance(line, str) else line for line in lines]


async def ask_yes(term: Terminal) -> bool | None:
    """The person's yes or no; None at end of input. A pipe must answer exactly."""
    while True:
        line = await term.ask("  undo these changes? [y/n] ")
        if line is None:
            return None
        answer = line.strip().lower()
        if answer in YES or answer in NO:
            return answer in YES
        if term.piped:
            raise NotAnAnswer(f"{line.strip()!r} is not an answer (answer y, yes, n or no)")
        if not answer:
            return False
        term.say("  answer y or n")


# The arguments of our write tools that name a path.
PATH_ARGS = ("path", "source", "destination")


def relative_call(event: events.Event, root: str | None) -> events.Event:
    """An undo step's call as the plan above it shows paths: relative to the root. The
    steps themselves run on the absolute paths the records keep."""
    if not isinstance(event, events.ToolCall) or not root or not isinstance(event.args, dict):
        return event
    args = {
        key: shown(value, root) if key in PATH_ARGS and isinstance(value, str) else value
        for key, value in event.args.items()
    }
    return dataclasses.replace(event, args=args)


def plan_root(plan: UndoPlan) -> str | None:
    """The root the plan's writes were made in (each record keeps its own)."""
    return next((r for item in plan.items if (r := item.record.record.get("root"))), None)


async def show_undo(
    run: AsyncIterator[events.Event], printer: StepPrinter, root: str | None = None
) -> bool:
    """Show an undo as it runs; whether every step succeeded."""
    complete = True
    async for event in run:
        printer.show(relative_call(event, root))
        if isinstance(event, events.Undone):
            complete = event.complete
    return complete


async def undo_at_terminal(
    session: ThreadSession,
    term: Terminal,
    printer: StepPrinter,
    *,
    call: str | None = None,
    turn: int | None = None,
    force: bool = False,
) -> int:
    """Plan, show, ask, run. The exit code: 0 undone (or nothing to undo); 1 refused (a file
    changed since its write, without force), declined, or a step failed; 3 a piped line
    that is not an answer."""
    try:
        plan = await session.plan_undo(call=call, turn=turn, force=force)
    except NothingToUndo as nothing:
        term.say(str(nothing))
        term.event("undo", text=str(nothing))
        return 0
    except UndoError as refused:
        put(f"fsagent: {refused}", file=sys.stderr)
        term.event("error", text=str(refused))
        return 1
    for line, style in plan_lines(plan):
        term.say(line, style=style)
    if plan.blocked:
        refusal = (
            "✗ Nothing was undone: files changed since the write (⚠ above). The diffs show "
            "what an undo would restore; undo with --force to restore them anyway."
        )
        term.say(refusal)
        term.event("undo", text=refusal)
        return 1
    try:
        yes = await ask_yes(term)
    except Interrupted:
        term.say("⨯ Not undone: nothing was changed.")
        return 130
    except NotAnAnswer as refused:
        line = f"not an answer at the undo: {refused}; nothing was undone"
        put(f"fsagent: {line}", file=sys.stderr)
        term.event("error", text=line)
        return 3
    if not yes:
        term.say("Not undone: nothing was changed.")
        return 1
    by = "piped" if term.piped else "person"
    return 0 if await show_undo(session.undo(plan, by), printer, plan_root(plan)) else 1


async def finish_cut_off_undo(session: ThreadSession, term: Terminal, printer: StepPrinter) -> int:
    """Finish an undo a crash cut off, if there is one: what ran is not run again. 0 when
    there was none or it finished, 1 when a step failed."""
    run = await session.unfinished_undo()
    if run is None:
        return 0
    term.say(undo_notice(run))
    return 0 if await show_undo(session.finish_undo(run), printer) else 1


@command(
    "/undo", "take back the last turn's approved changes (diffs first; asks)", UNDO_USAGE_SHORT
)
async def undo_command(context: CommandContext, argument: str) -> Outcome:
    try:
        call, turn, force = parse_undo(argument.split())
    except ValueError as wrong:
        context.term.say(str(wrong))
        return None
    code = await undo_at_terminal(
        context.session, context.term, context.printer, call=call, turn=turn, force=force
    )
    # A piped line that does not answer the undo ends the session, as at an approval.
    return code if code == 3 else None
