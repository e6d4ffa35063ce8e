"""The commands that work on the thread store from any shell, as the person sees them:
`fsagent threads [show|rm|reset]`, `approvals`, `approve`, `deny`, `undo` and `audit`.

Each takes the store and graph the command line opened for it, and prints. Only `approve`
and `deny` run the agent; `undo` needs the MCP server but not LM Studio; the others need
neither.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from core.approval.approval import ApprovalCall
from core.approval.decisions import AnswerValue, Decision, ResumeValue, resume_json
from core.approval.questions import QUESTION_KIND, QuestionCall
from core.changes.binding import BindingError, carry
from core.errors import StartupError, ThreadError
from core.session import ThreadSession
from core.text import counted, visible
from core.threads.thread_names import escaped
from core.threads.threads import (
    IDLE,
    Graph,
    ThreadView,
    all_views,
    cannot_resume_message,
    close_run,
    require_thread,
)
from store.base import Store
from terminal import thread_listing as listing
from terminal.console import Terminal, put
from terminal.review import describe_call, show_preview
from terminal.steps import StepPrinter, show_run
from terminal.thread_listing import call_lines as call_lines
from terminal.thread_listing import status_text as status_text
from terminal.typeahead import before_question
from terminal.undo import finish_cut_off_undo, undo_at_terminal

# --- threads ----------------------------------------------------------------------------------


# `threads`, `threads show`, `approvals` and `audit` read the store directly
# (terminal.thread_listing); these read through the graph when that reader cannot.


async def list_threads(store: Store, app: Graph) -> int:
    views = await all_views(store, app)
    return listing.print_listing([view.as_stored() for view in views], store.location)


async def show_thread(app: Graph, name: str) -> int:
    return listing.print_thread((await require_thread(app, name)).as_stored())


async def remove_thread(store: Store, app: Graph, name: str, ask: bool) -> int:
    """Delete a thread; on a terminal, asks first unless `ask` is False (-y)."""
    view = await require_thread(app, name)
    if ask and sys.stdin.isatty():
        messages = counted(len(view.messages), "message")
        question = f"Delete thread '{escaped(name)}' ({messages})? [y/N] "
        try:
            answer = confirm(visible(question, keep=""))
        except KeyboardInterrupt:
            put("\nKept.")
            return 130
        if answer.strip().lower() not in ("y", "yes"):
            put("Kept.")
            return 1
    await store.forget(name)
    put(f"Deleted thread '{escaped(name)}'.")
    return 0


def confirm(question: str) -> str:
    """A yes/no on the terminal; "" at end of input. Read here, on the loop's own thread,
    with Python's own Ctrl-C: asyncio's first Ctrl-C only cancels the main task, which a
    blocking read never notices, and a read on a worker thread would outlive the command.
    Only keys typed once it is asked count (terminal.typeahead)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before_question(sys.stdin, put)
        return input(question)
    except EOFError:
        put()
        return ""
    finally:
        signal.signal(signal.SIGINT, previous)


async def reset_thread(store: Store, app: Graph, name: str) -> int:
    view = await require_thread(app, name)
    if view.status == IDLE and not view.problem:
        put(f"Thread '{escaped(name)}' is idle; nothing to reset.")
        return 0
    why = "the person cancelled it with `fsagent threads reset`"
    answers = await close_run(app, store, name, why)
    put(f"Thread '{escaped(name)}' reset: it takes new prompts.")
    for line in call_lines(view, "  cancelled "):
        put(line)
    if answers and not view.waiting:
        closed = counted(len(answers), "unanswered call")
        put(f"  {closed} of the cut-off run {'was' if len(answers) == 1 else 'were'} closed.")
    return 0


# --- approvals --------------------------------------------------------------------------------


async def list_approvals(store: Store, app: Graph) -> int:
    views = await all_views(store, app)
    return listing.print_approvals([view.as_stored() for view in views])


async def waiting_view(app: Graph, name: str) -> ThreadView:
    """The thread, waiting on calls; an error if it waits on nothing this version can
    resume."""
    view = await require_thread(app, name)
    if view.problem:
        raise StartupError(cannot_resume_message(view))
    if not view.waiting:
        raise ThreadError(f"thread '{escaped(name)}' is not waiting for approval ({view.status})")
    return view


# The calls a thread waits on (ThreadView.waiting): an approval's, or a question's.
Waiting = Sequence[ApprovalCall | QuestionCall]


def named_calls(calls: Waiting, chosen: list[str] | None) -> tuple[list[str], set[str]]:
    """The pending call ids, and those --call names (all of them when it names none); a name
    that is not pending is an error that lists the pending ones."""
    ids = [call["id"] for call in calls]
    unknown = [c for c in chosen or [] if c not in ids]
    if unknown:
        raise ThreadError(
            f"no pending call {', '.join(unknown)}; the pending calls are {', '.join(ids)}"
        )
    return ids, set(chosen or ids)


def question_answers(
    calls: Waiting, chosen: list[str] | None, answer: str | None, reason: str
) -> AnswerValue:
    """The resume value for a waiting question: `answer` for every question (or those named
    with --call); the others, and all of them without --answer, get "no one can answer"."""
    ids, named = named_calls(calls, chosen)
    answers = {i: answer if i in named else None for i in ids}
    value: AnswerValue = {"answers": answers, "by": "person"}
    if reason:
        value["reason"] = reason
    return value


def batch_decisions(
    calls: Waiting, chosen: list[str] | None, approve: bool, reason: str
) -> ResumeValue:
    """One resume value for the whole batch (it is one interrupt). Only calls approved by
    name run; every other call is rejected, so nothing is left pending."""
    ids, named = named_calls(calls, chosen)
    decisions: dict[str, Decision] = {}
    for call_id in ids:
        if approve and call_id in named:
            decisions[call_id] = {"type": "approve", "by": "person"}
        elif approve:
            decisions[call_id] = {
                "type": "reject",
                "message": "the person approved only other calls of this batch",
                "by": "person",
            }
        elif call_id in named:
            message = reason or "the person said no"
            decisions[call_id] = {"type": "reject", "message": message, "by": "person"}
        else:
            message = "the person denied this batch"
            decisions[call_id] = {"type": "reject", "message": message, "by": "person"}
    return {"decisions": decisions}


async def confirm_previews(
    session: ThreadSession, calls: Waiting, decisions: ResumeValue, yes: bool
) -> bool:
    """Print what each call to be approved would change, as the terminal's review shows it,
    and bind each approval to the preview printed (its expect, core.changes.binding); then
    the person's yes, or --yes. From a pipe without --yes nothing is decided: no one read
    the previews."""
    term = Terminal()
    approving = [c for c in calls if decisions["decisions"][c["id"]]["type"] == "approve"]
    for number, call in enumerate(approving, 1):
        term.say(f"[{number}/{len(approving)}] {describe_call(call)}")
        shown = await session.preview(call)
        show_preview(term, shown)
        carry(decisions["decisions"][call["id"]], shown)
    if yes or not approving:
        return True
    if term.piped:
        print(
            f"fsagent: approve {session.thread}: stdin is not a terminal, so no one read the "
            "previews above; pass --yes to approve them as shown. Nothing was run",
            file=sys.stderr,
        )
        return False
    answer = confirm(f"approve {len(approving)} call(s) as shown? [y/n] ").strip().lower()
    if answer in ("y", "yes"):
        return True
    term.say("Nothing was decided; the thread still waits.")
    return False


async def decide(
    session: ThreadSession, calls: Waiting, decisions: ResumeValue | AnswerValue
) -> int:
    """approve/deny: resume the waiting thread with `decisions`, printing the steps and the
    model's answer as a session would."""
    term = Terminal()
    value = resume_json(decisions)  # either kind, read as its JSON form
    try:
        bound = await session.bind(value)
    except BindingError as stale:
        line = f"fsagent: approve {session.thread}: {stale}; the thread still waits"
        print(line, file=sys.stderr)
        return 3
    for call in calls:
        if "answers" in value:
            answer = value["answers"].get(call["id"])
            term.say(f"✓ answered: {call['id']}" if answer else f"✗ no answer: {call['id']}")
            continue
        verdict = value["decisions"][call["id"]]["type"]
        term.say(f"{'✓ approved' if verdict == 'approve' else '✗ rejected'}: {call['id']}")
    with term.ctrl_c.installed():
        run = session.resume(bound)
        if not await show_run(session, run, StepPrinter(term), "running"):
            return 1
    if session.paused_on is not None:
        waits = "an answer" if session.paused_on.get("kind") == QUESTION_KIND else "approval"
        term.say(f"Thread '{session.thread}' waits for {waits} again:")
        for call in session.paused_on["calls"]:
            term.say(f"  {call['id']}: {call['name']}")
        return 3
    return 0


# --- undo -------------------------------------------------------------------------------------


async def undoable_view(app: Graph, name: str) -> ThreadView:
    """The thread, idle: an undo changes files the model must then be told about, so a
    thread in the middle of a run or waiting on the person is answered first."""
    view = await require_thread(app, name)
    if view.problem:
        raise StartupError(cannot_resume_message(view))
    if view.status != IDLE:
        raise ThreadError(
            f"thread '{escaped(name)}' is {view.status}; open it (fsagent --thread "
            f"{escaped(name)}) or answer it first, then undo"
        )
    return view


async def undo(session: ThreadSession, call: str | None, turn: int | None, force: bool) -> int:
    """`fsagent undo NAME`: finish an undo a crash cut off, or plan one, show it, ask, run."""
    term = Terminal()
    printer = StepPrinter(term)
    with term.ctrl_c.installed():
        run = await session.unfinished_undo()
        if run is not None:
            code = await finish_cut_off_undo(session, term, printer)
            term.say("Run fsagent undo again to undo more.")
            return code
        return await undo_at_terminal(session, term, printer, call=call, turn=turn, force=force)


# --- audit ------------------------------------------------------------------------------------


async def print_audit(store: Store, thread: str | None, as_json: bool) -> int:
    rows = await store.audit_rows(thread)
    return listing.print_audit(rows, thread, store.location, as_json)
