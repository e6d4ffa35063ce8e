"""What state each thread is in, judged from its checkpoint, and how a cut-off run is closed.

A checkpoint records a position in our code. A thread paused at a step a newer version renamed
would resume into nothing (langgraph returns having done nothing), so the raw checkpoint is
read as well as the graph's view, and such a thread is reported, loudly, as unable to resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from core.approval.approval import (
    ApprovalCall,
    cut_off_answer,
    is_resumable_approval,
)
from core.approval.questions import (
    QUESTION_KIND,
    Pause,
    QuestionCall,
    is_question,
    is_resumable_question,
    read_pause,
)
from core.errors import ThreadError
from core.text import format_call
from core.threads.ledger import recorded_answer
from core.threads.messages import last_human_text, unanswered_calls

# The statuses and the steps are core.threads.stored_views', which judges a thread from the
# store alone, for the commands that only read.
from core.threads.stored_views import IDLE as IDLE
from core.threads.stored_views import INTERRUPTED as INTERRUPTED
from core.threads.stored_views import PERSON_UPDATE as PERSON_UPDATE
from core.threads.stored_views import WAITING as WAITING
from core.threads.stored_views import WAITING_ANSWER as WAITING_ANSWER
from core.threads.stored_views import Message, StoredView
from core.threads.stored_views import stopped_at as stopped_at
from core.threads.thread_names import escaped
from core.tools.tool_groups import needs_approval
from store.base import Store

# One request may take this many model calls before the turn is stopped for the person.
MAX_MODEL_CALLS_PER_TURN = 25


# The graph a thread is read and run on; its state is untyped here (agent_graph has it).
Graph = CompiledStateGraph[Any, Any, Any, Any]


def thread_config(name: str) -> RunnableConfig:
    return RunnableConfig(configurable={"thread_id": name})


def run_config(thread: str) -> RunnableConfig:
    """The config a run of the graph on `thread` takes, whoever starts it."""
    return RunnableConfig(configurable={"thread_id": thread}, recursion_limit=recursion_limit())


def recursion_limit(max_model_calls: int = MAX_MODEL_CALLS_PER_TURN) -> int:
    """LangGraph's own step cap, set above ours so the person gets our clear message."""
    return 4 * max_model_calls + 10


@dataclass
class ThreadView:
    name: str
    status: str
    messages: list[AnyMessage]
    last_activity: str
    # The calls of the approval or the question.
    waiting: list[ApprovalCall | QuestionCall] = field(default_factory=list)
    kind: str | None = None  # what it waits on: "approval" or "question"
    steps: list[str] = field(default_factory=list)  # where the last run stopped
    problem: str | None = None  # why this version cannot resume it
    snapshot: StateSnapshot | None = None  # the state it was judged from, for reuse

    @property
    def request(self) -> str:
        """The person's last request: what caused the calls it waits on, if it waits."""
        return last_human_text(self.messages)

    def as_stored(self) -> StoredView:
        """The view as the reading commands print it (terminal.thread_listing)."""
        values = (self.snapshot and self.snapshot.values) or {}
        return StoredView(
            name=self.name,
            status=self.status,
            messages=[as_message(m) for m in self.messages],
            last_activity=self.last_activity,
            waiting=self.waiting,
            kind=self.kind,
            steps=self.steps,
            problem=self.problem,
            summary=values.get("summary"),
        )


def as_message(message: AnyMessage) -> Message:
    return Message(
        type=message.type,
        id=message.id or "",
        content=message.content,
        tool_calls=[dict(call) for call in getattr(message, "tool_calls", None) or []],
        status=str(getattr(message, "status", None) or "success"),
        name=message.name,
    )


async def view_thread(app: Graph, name: str) -> ThreadView | None:
    """The thread as stored, judged from the raw checkpoint as well as the graph's view: a
    step the graph no longer has is invisible to `aget_state` (no next, no interrupts)."""
    config = thread_config(name)
    assert isinstance(app.checkpointer, BaseCheckpointSaver)
    raw = await app.checkpointer.aget_tuple(config)
    if raw is None:
        return None
    snapshot = await app.aget_state(config)
    steps = stopped_at(raw.checkpoint)
    payloads = stored_interrupts(raw.pending_writes or [])
    pause = next((p for p in map(read_pause, payloads) if p is not None), None)
    waiting: list[ApprovalCall | QuestionCall] = list(pause["calls"]) if pause else []
    problem = resume_problem(app, steps, payloads, snapshot)
    if payloads:
        status = WAITING_ANSWER if pause and pause["kind"] == QUESTION_KIND else WAITING
    elif steps:
        status = INTERRUPTED
    else:
        status = IDLE
    return ThreadView(
        name=name,
        status=status,
        messages=list((snapshot.values or {}).get("messages") or []),
        last_activity=str(raw.checkpoint.get("ts") or ""),
        waiting=waiting,
        kind=pause["kind"] if pause else None,
        steps=steps,
        problem=problem,
        snapshot=snapshot,
    )


def stored_interrupts(pending_writes: list[Any]) -> list[Any]:
    values = []
    for _task, channel, value in pending_writes:
        if channel == "__interrupt__":
            items = value if isinstance(value, list | tuple) else [value]
            values += [getattr(item, "value", item) for item in items]
    return values


def pending_approval(snapshot: StateSnapshot | None) -> Pause | None:
    """The payload a thread's state waits on (an approval or a question), if any."""
    if snapshot is None:
        return None
    return approval_among(snapshot.interrupts)


def approval_among(interrupts: Any) -> Pause | None:
    for interrupt in interrupts:
        payload = read_pause(interrupt.value)
        if payload is not None:
            return payload
    return None


def resume_problem(
    app: Graph, steps: list[str], payloads: list[Any], snapshot: StateSnapshot
) -> str | None:
    for step in steps:
        if step not in app.nodes:
            return f"it is paused at step {step!r}, which this version of fsagent does not have"
    for payload in payloads:
        if not (is_resumable_approval(payload) or is_resumable_question(payload)):
            version = payload.get("version") if isinstance(payload, dict) else None
            what = "a question" if is_question(payload) else "an approval"
            return f"it waits on {what} of another format (version {version!r})"
    if payloads and not snapshot.interrupts:
        return "its pending approval is not one this version of fsagent can resume"
    return None


def cannot_resume_message(view: ThreadView) -> str:
    waits = ", ".join(format_call(c.get("name") or "?", c.get("args"), 60) for c in view.waiting)
    waited = f"; it was waiting for approval of {waits}" if waits else ""
    name = escaped(view.name)
    return (
        f"thread '{name}' cannot be resumed: {view.problem}{waited}. Nothing was run. "
        f"Run `fsagent threads reset {name}` to cancel what it waits for and go on with it"
    )


async def require_thread(app: Graph, name: str) -> ThreadView:
    view = await view_thread(app, name)
    if view is None:
        raise ThreadError(
            f"no thread named '{escaped(name)}' in this file; `fsagent threads` lists them"
        )
    return view


async def all_views(store: Store, app: Graph) -> list[ThreadView]:
    views = [await view_thread(app, name) for name in await store.thread_names()]
    return [view for view in views if view is not None]


async def waiting_views(store: Store, app: Graph) -> list[ThreadView]:
    """Every thread waiting for approval, judged from its checkpoint: each view has the calls
    (`waiting`), the request that caused them (`request`) and, if this version cannot resume
    it, why (`problem`)."""
    return [view for view in await all_views(store, app) if view.waiting]


# --- closing a run that was cut off ----------------------------------------------------------


async def closing_answer(
    store: Store, thread: str, message_id: str, call: Mapping[str, Any], why: str
) -> ToolMessage:
    """The truthful answer for a call whose run ended without one: the ledger knows whether
    a write ran, may have run, or never started."""
    # Every call that may go through the ledger: ours that write, and every other server's
    # (its read-only ones have no row, and are answered as cut off).
    if needs_approval(str(call.get("name") or "")):
        row = await store.ledger_row(thread, message_id, call["id"])
        if row is not None:
            return recorded_answer(row, call)
    return cut_off_answer(call, why)


async def close_run(app: Graph, store: Store, thread: str, why: str) -> list[ToolMessage]:
    """Leave the thread idle and consistent: drop the steps it was due to run (a pending
    approval included) and store an answer for every call left without one, so `threads
    show` and the next model request agree. Returns the answers stored."""
    config = thread_config(thread)
    snapshot = await app.aget_state(config)
    if not snapshot.created_at:
        return []
    message_id, calls = unanswered_calls((snapshot.values or {}).get("messages") or [])
    answers = [await closing_answer(store, thread, message_id, c, why) for c in calls]
    await app.aupdate_state(config, None, as_node=END)
    if answers:
        update: dict[str, Any] = {"messages": answers}
        if "approvals" in app.channels:  # the read-only agent's state has none
            update["approvals"] = {}
        # Written as if the tools node answered, which queues the agent step; clear it again.
        await app.aupdate_state(config, update, as_node="tools")
        await app.aupdate_state(config, None, as_node=END)
    return answers
