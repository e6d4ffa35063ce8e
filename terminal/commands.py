"""The commands that work on the thread store from any shell, as the person sees them:
`fsagent threads [show|rm|reset]`, `approvals`, `approve`, `deny`, `undo` and `audit`.

Each takes the store and graph the command line opened for it, and prints. Only `approve`
and `deny` run the agent; `undo` needs the MCP server but not LM Studio; the others need
neither.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from core.approval.approval import ApprovalCall
from core.approval.decisions import AnswerValue, Decision, ResumeValue, resume_json
from core.approval.questions import QUESTION_KIND, QuestionCall
from core.context.summary import Summary
from core.errors import StartupError, ThreadError
from core.session import ThreadSession
from core.text import NOTE_MARK, counted, format_call, format_result, json_visible, visible
from core.threads.messages import content_text
from core.threads.thread_names import escaped
from core.threads.threads import (
    IDLE,
    INTERRUPTED,
    Graph,
    ThreadView,
    all_views,
    cannot_resume_message,
    close_run,
    require_thread,
)
from store.base import AuditRow, Store
from terminal.console import Terminal, put
from terminal.review import describe_call, diff_style
from terminal.steps import StepPrinter, show_run
from terminal.undo import finish_cut_off_undo, undo_at_terminal

AUDIT_FIELDS = ("time", "thread", "call_id", "tool", "args", "decision", "reason", "by")


def local_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp or "-"


def status_text(view: ThreadView) -> str:
    if view.problem:
        return f"{view.status} (cannot resume: run fsagent threads reset {escaped(view.name)})"
    if view.status == INTERRUPTED:
        return f"{INTERRUPTED} (at {', '.join(view.steps)}; opening it finishes the run)"
    return view.status


def call_lines(view: ThreadView, indent: str = "    ") -> list[str]:
    return [
        f"{indent}{call.get('id')}: {format_call(call.get('name'), call.get('args'), 60)}"
        for call in view.waiting
    ]


# --- threads ----------------------------------------------------------------------------------


async def list_threads(store: Store, app: Graph) -> int:
    views = await all_views(store, app)
    if not views:
        put(f"No threads in {store.location}.")
        return 0
    width = max(len("NAME"), *(len(escaped(v.name)) for v in views))
    put(f"{'NAME':<{width}}  {'MESSAGES':>8}  {'LAST ACTIVITY':<16}  STATUS")
    for view in views:
        put(
            f"{escaped(view.name):<{width}}  {len(view.messages):>8}  "
            f"{local_time(view.last_activity):<16}  {status_text(view)}"
        )
        for line in call_lines(view):
            put(line)
    return 0


async def show_thread(app: Graph, name: str) -> int:
    view = await require_thread(app, name)
    put(f"Thread '{escaped(name)}': {counted(len(view.messages), 'message')}, {status_text(view)}")
    for message in view.messages:
        if isinstance(message, HumanMessage):
            said = content_text(message.content)
            # fsagent's own note (an undo's) is not the person's words.
            mine = said.startswith(NOTE_MARK)
            put(f"fsagent> {said.removeprefix(NOTE_MARK)}" if mine else f"you> {said}")
        elif isinstance(message, AIMessage):
            if message.content:
                put(f"agent> {content_text(message.content)}")
            for call in message.tool_calls:
                put(f"→ {format_call(call['name'], call['args'])}")
        elif isinstance(message, ToolMessage):
            mark = "✗ " if message.status == "error" else ""
            put(f"← {mark}{format_result(content_text(message.content))}")
    summary = Summary.from_state(((view.snapshot and view.snapshot.values) or {}).get("summary"))
    if summary is not None:
        # Every message is above; this is what the model is sent in place of the older ones.
        put(
            f"The model is sent this summary in place of the first "
            f"{counted(summary.covers, 'message')} (compacted {counted(summary.count, 'time')}):"
        )
        for line in summary.text.splitlines():
            put(f"  {line}")
    if view.waiting:
        put("Waiting for approval of:")
        for line in call_lines(view, "  "):
            put(line)
    return 0


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
    blocking read never notices, and a read on a worker thread would outlive the command."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
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
    views = [view for view in await all_views(store, app) if view.waiting]
    if not views:
        put("No pending approvals.")
        return 0
    for view in views:
        note = (
            f" (cannot resume: run fsagent threads reset {escaped(view.name)})"
            if view.problem
            else ""
        )
        asks = " (a question)" if view.kind == QUESTION_KIND else ""
        put(f"{escaped(view.name)}{asks}{note}")
        for line in call_lines(view, "  "):
            put(line)
    put("Decide with: fsagent approve NAME [--call ID] or fsagent deny NAME [--reason TEXT]")
    if any(view.kind == QUESTION_KIND for view in views):
        put("Answer a question with: fsagent approve NAME --answer TEXT")
    return 0


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
    """Print what each call to be approved would change, as the terminal's review shows it
    (and bind the approval to it); then the person's yes, or --yes. From a pipe without
    --yes nothing is decided: no one read the previews."""
    term = Terminal()
    approving = [c for c in calls if decisions["decisions"][c["id"]]["type"] == "approve"]
    for number, call in enumerate(approving, 1):
        term.say(f"[{number}/{len(approving)}] {describe_call(call)}")
        for line in await session.preview(call):
            term.say("    " + visible(line, keep="\t"), style=diff_style(line))
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
    for call in calls:
        if "answers" in value:
            answer = value["answers"].get(call["id"])
            term.say(f"✓ answered: {call['id']}" if answer else f"✗ no answer: {call['id']}")
            continue
        verdict = value["decisions"][call["id"]]["type"]
        term.say(f"{'✓ approved' if verdict == 'approve' else '✗ rejected'}: {call['id']}")
    with term.ctrl_c.installed():
        run = session.resume(value)
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
    if as_json:
        shown = json.dumps([audit_dict(row) for row in rows], ensure_ascii=False, indent=1)
        put(json_visible(shown))
        return 0
    if not rows:
        where = f"thread '{thread}'" if thread else store.location
        put(f"No decisions recorded in {where}.")
    for row in rows:
        put(format_audit_row(row))
    return 0


def audit_dict(row: AuditRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in AUDIT_FIELDS}


def format_audit_row(row: AuditRow) -> str:
    args = json.dumps(row.args, ensure_ascii=False)
    if len(args) > 120:
        args = f"{args[:120]}… (+{len(args) - 120} chars; --json shows all)"
    reason = f"  ({row.reason})" if row.reason else ""
    return f"{row.time}  {row.thread}  {row.tool} {args}  {row.decision} by {row.by}{reason}"
