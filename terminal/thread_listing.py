"""What the reading commands print: `fsagent threads`, `threads show NAME`, `approvals` and
`audit`, from threads as stored (core.threads.stored_views) and audit rows. No LangGraph, no
langchain: these commands read the store directly (store.reading). When a thread holds
something that reader cannot decode, the command reads it through the graph instead
(terminal.commands), which turns its views into the same `StoredView` and prints here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from core.approval.pauses import QUESTION_KIND, ApprovalCall, QuestionCall
from core.text import NOTE_MARK, content_text, counted, format_call, format_result, json_visible
from core.threads.stored_views import INTERRUPTED, StoredView
from core.threads.thread_names import escaped
from store.base import AuditRow
from store.location import shown
from terminal.console import put

AUDIT_FIELDS = ("time", "thread", "call_id", "tool", "args", "decision", "reason", "by")
# core.context.summary.Summary's fields: a stored summary with other keys is not one
# (Summary.from_state reads it as none).
SUMMARY_FIELDS = frozenset(
    {"text", "upto", "held", "made_at", "count", "summarised", "kept", "before", "after", "why"}
)


class Judged(Protocol):
    """A thread as judged: a StoredView, or the graph's core.threads.threads.ThreadView."""

    name: str
    status: str
    steps: list[str]
    problem: str | None
    waiting: list[ApprovalCall | QuestionCall]


def local_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp or "-"


def status_text(view: Judged) -> str:
    if view.problem:
        return f"{view.status} (cannot resume: run fsagent threads reset {escaped(view.name)})"
    if view.status == INTERRUPTED:
        return f"{INTERRUPTED} (at {', '.join(view.steps)}; opening it finishes the run)"
    return view.status


def call_lines(view: Judged, indent: str = "    ") -> list[str]:
    return [
        f"{indent}{call.get('id')}: {format_call(call.get('name'), call.get('args'), 60)}"
        for call in view.waiting
    ]


def print_listing(views: Sequence[StoredView], location: str) -> int:
    """The threads, and the store they are kept in (the data folder's file, a clone's
    threads.db, --db or a Postgres URL without its password): a person with threads in more
    than one place sees which one this is."""
    where = shown(location)
    if not views:
        put(f"No threads in {where}.")
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
    put(f"{counted(len(views), 'thread')} in {where}")
    return 0


def print_thread(view: StoredView) -> int:
    name = view.name
    put(f"Thread '{escaped(name)}': {counted(len(view.messages), 'message')}, {status_text(view)}")
    for message in view.messages:
        if message.type == "human":
            said = content_text(message.content)
            # fsagent's own note (an undo's) is not the person's words.
            mine = said.startswith(NOTE_MARK)
            put(f"fsagent> {said.removeprefix(NOTE_MARK)}" if mine else f"you> {said}")
        elif message.type == "ai":
            if message.content:
                put(f"agent> {content_text(message.content)}")
            for call in message.tool_calls:
                put(f"→ {format_call(call['name'], call['args'])}")
        elif message.type == "tool":
            mark = "✗ " if message.status == "error" else ""
            put(f"← {mark}{format_result(content_text(message.content))}")
    summary = view.summary
    if (
        isinstance(summary, dict)
        and set(summary) == SUMMARY_FIELDS
        and isinstance(summary["text"], str)
    ):
        covers = summary["upto"] - len(summary.get("held") or ())
        # Every message is above; this is what the model is sent in place of the older ones.
        put(
            f"The model is sent this summary in place of the first "
            f"{counted(covers, 'message')} (compacted {counted(summary['count'], 'time')}):"
        )
        for line in summary["text"].splitlines():
            put(f"  {line}")
    if view.waiting:
        put("Waiting for approval of:")
        for line in call_lines(view, "  "):
            put(line)
    return 0


def print_approvals(views: Sequence[StoredView]) -> int:
    views = [view for view in views if view.waiting]
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


def print_audit(rows: Sequence[AuditRow], thread: str | None, location: str, as_json: bool) -> int:
    if as_json:
        shown = json.dumps([audit_dict(row) for row in rows], ensure_ascii=False, indent=1)
        put(json_visible(shown))
        return 0
    if not rows:
        where = f"thread '{thread}'" if thread else location
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
