"""A thread's view (status, messages, what it waits on) from its stored checkpoint, without
LangGraph or langchain: the reading commands' way (`fsagent threads`, `threads show`,
`approvals`). core.threads.threads judges a thread the same way through the graph; the
parity tests (tests/store/test_reading.py) hold the two equal.

Messages are kept by LangGraph's DeltaChannel, so they are rebuilt as LangGraph rebuilds
them (langgraph/pregel/_checkpoint.py, `_replay`): the nearest stored snapshot, then every
later write on the channel, oldest first, through the reducer. The reducer is ours,
`core.threads.messages.append_messages`, which is `add_messages` folded over the writes:
a message whose id is known replaces it, a RemoveMessage removes it, one that removes all
clears what came before it in its write. Anything else (a chunk, a dict, a message with no
id) makes the thread `Unreadable` here, and the command reads it through the graph instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.approval.pauses import (
    QUESTION_KIND,
    ApprovalCall,
    QuestionCall,
    is_question,
    is_resumable_approval,
    is_resumable_question,
    read_pause,
)
from core.tools.tool_groups import ROUTES, is_agent_step
from store.checkpoint_format import Snapshot, Stored, Unreadable
from store.reading import StoredThread

IDLE = "idle"
WAITING = "waiting for approval"
WAITING_ANSWER = "waiting for an answer"  # to the model's ask_person question
INTERRUPTED = "interrupted"

# The node whose name updates made between turns (revoking a grant) are recorded under. It
# never runs; it leads to END, so an update as it schedules nothing.
PERSON_UPDATE = "person_update"

# The graph's steps (agent_graph.build_graph's nodes, START's too): a thread paused at
# another cannot be resumed by this version. tests/store/test_reading.py holds it equal.
GRAPH_STEPS = frozenset(
    {"__start__", "router", *(f"agent_{g}" for g in ROUTES), "ask", "judge", "approve",
     "tools", PERSON_UPDATE}
)  # fmt: skip

MESSAGES = "messages"
INTERRUPT = "__interrupt__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"  # langgraph._internal._constants
REMOVE_ALL = "__remove_all__"  # langgraph.graph.message.REMOVE_ALL_MESSAGES
MESSAGE_TYPES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "ToolMessage": "tool",
    "SystemMessage": "system",
    "RemoveMessage": "remove",
}


@dataclass
class Message:
    """A langchain message as stored: what the reading commands show of it."""

    type: str  # human, ai, tool, system, remove
    id: str
    content: Any = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: str = "success"  # a tool message's
    name: str | None = None


@dataclass
class StoredView:
    """What core.threads.threads.ThreadView says of a thread, read from the store."""

    name: str
    status: str
    messages: list[Message]
    last_activity: str
    waiting: list[ApprovalCall | QuestionCall] = field(default_factory=list)
    kind: str | None = None
    steps: list[str] = field(default_factory=list)
    problem: str | None = None
    summary: Any = None  # the state's `summary` value, as stored


def message(value: Any, thread: str) -> Message:
    if not (
        isinstance(value, Stored)
        and value.module.startswith("langchain_core.messages")
        and value.name in MESSAGE_TYPES
        and isinstance(value.fields, dict)
        and isinstance(value.fields.get("id"), str)
    ):
        raise Unreadable(f"thread '{thread}': a message this reader does not know ({value!r:.80})")
    fields = value.fields
    return Message(
        type=MESSAGE_TYPES[value.name],
        id=fields["id"],
        content=fields.get("content", ""),
        tool_calls=list(fields.get("tool_calls") or []),
        status=str(fields.get("status") or "success"),
        name=fields.get("name"),
    )


def replay(base: list[Message], writes: Iterable[Any], thread: str) -> list[Message]:
    """The reducer over `writes`, each a message or a list of them, in order."""
    merged = list(base)
    for write in writes:
        batch = [message(m, thread) for m in (write if isinstance(write, list) else [write])]
        merged = add_by_id(merged, batch)
    return merged


def add_by_id(left: list[Message], right: list[Message]) -> list[Message]:
    """`langgraph.graph.message.add_messages` on messages that all carry an id."""
    for n in range(len(right) - 1, -1, -1):
        if right[n].type == "remove" and right[n].id == REMOVE_ALL:
            return right[n + 1 :]
    merged = list(left)
    index = {m.id: n for n, m in enumerate(merged)}
    removed: set[str] = set()
    for m in right:
        if m.id in index:
            if m.type == "remove":
                removed.add(m.id)
            else:
                removed.discard(m.id)
                merged[index[m.id]] = m
        elif m.type == "remove":
            raise Unreadable(f"a removal of message {m.id!r}, which the thread does not have")
        else:
            index[m.id] = len(merged)
            merged.append(m)
    return [m for m in merged if m.id not in removed] if removed else merged


def stored_messages(thread: StoredThread) -> list[Message]:
    values = thread.checkpoint.get("channel_values") or {}
    history = thread.histories.get(MESSAGES)
    if history is not None:
        seed = history.seed if history.seeded else []
        writes = history.writes
    else:  # held here, or never written
        seed, writes = values.get(MESSAGES, []), []
    if isinstance(seed, Snapshot):
        seed = seed.value
    if not isinstance(seed, list):
        raise Unreadable(f"thread '{thread.name}': its messages are not a list")
    # Writes of no task (an input not yet run) count, as `aget_state` applies them.
    null = [
        value for task, ch, value, _ in thread.pending if task == NULL_TASK_ID and ch == MESSAGES
    ]
    messages = [message(m, thread.name) for m in seed]
    return replay(messages, [*writes, *null], thread.name)


def stopped_at(checkpoint: Any) -> list[str]:
    """The steps a checkpoint is due to run next, by name, whatever graph wrote it.

    LangGraph triggers node X through channel `branch:to:X` and clears that channel when X
    runs, so a value still there is a step not yet done."""
    prefix = "branch:to:"
    values = checkpoint.get("channel_values") or {}
    return sorted(channel[len(prefix) :] for channel in values if channel.startswith(prefix))


def interrupt_values(pending: Iterable[tuple[str, str, Any, str]]) -> list[Any]:
    """The payloads of the pending `__interrupt__` writes (each an Interrupt's `value`)."""
    values: list[Any] = []
    for _task, channel, value, _path in pending:
        if channel == INTERRUPT:
            items = value if isinstance(value, list | tuple) else [value]
            values += [interrupt_value(item) for item in items]
    return values


def interrupt_value(item: Any) -> Any:
    if isinstance(item, Stored) and item.name == "Interrupt" and isinstance(item.fields, dict):
        return item.fields.get("value")
    return item


def resume_problem(steps: list[str], payloads: list[Any], graph_sees: bool) -> str | None:
    """Why this version cannot resume the thread; `graph_sees` is whether the graph's own
    view has the interrupts (`StateSnapshot.interrupts` non-empty)."""
    for step in steps:
        # Another server's route (`agent_git`) is a node only while the server is
        # configured, which this reader does not know: the graph that runs it judges.
        if step not in GRAPH_STEPS and not is_agent_step(step):
            return f"it is paused at step {step!r}, which this version of fsagent does not have"
    for payload in payloads:
        if not (is_resumable_approval(payload) or is_resumable_question(payload)):
            version = payload.get("version") if isinstance(payload, dict) else None
            what = "a question" if is_question(payload) else "an approval"
            return f"it waits on {what} of another format (version {version!r})"
    if payloads and not graph_sees:
        return "its pending approval is not one this version of fsagent can resume"
    return None


def graph_sees_interrupts(thread: StoredThread, steps: list[str]) -> bool:
    """Whether `aget_state` would report the pending interrupts: it reports those written by
    a task it is due to run, and a task's path names its step (`~__pregel_pull, NAME`)."""
    # A write without its path (copied by `fsagent migrate-db`, whose put_writes keeps the
    # task's id but not its path) is matched by that id, which the copy kept: the graph sees it.
    return any(
        channel == INTERRUPT and (not path or path.rsplit(", ", 1)[-1] in steps)
        for _task, channel, _value, path in thread.pending
    )


def stored_view(thread: StoredThread) -> StoredView:
    checkpoint = thread.checkpoint
    steps = stopped_at(checkpoint)
    payloads = interrupt_values(thread.pending)
    pause = next((p for p in map(read_pause, payloads) if p is not None), None)
    if payloads:
        status = WAITING_ANSWER if pause and pause["kind"] == QUESTION_KIND else WAITING
    elif steps:
        status = INTERRUPTED
    else:
        status = IDLE
    values = checkpoint.get("channel_values") or {}
    return StoredView(
        name=thread.name,
        status=status,
        messages=stored_messages(thread),
        last_activity=str(checkpoint.get("ts") or ""),
        waiting=list(pause["calls"]) if pause else [],
        kind=pause["kind"] if pause else None,
        steps=steps,
        problem=resume_problem(steps, payloads, graph_sees_interrupts(thread, steps)),
        summary=values.get("summary"),
    )
