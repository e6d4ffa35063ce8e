"""The message history: how it grows (the reducer), how it is read, and the well-formed view
of it a model request is built from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall
from langgraph.graph.message import add_messages

from core.approval.approval import cut_off_answer

# Here once; core.text has it, so that reading commands need not load langchain.
from core.text import content_text as content_text


def append_messages(current: list[Any], writes: Sequence[Any]) -> list[Any]:
    """The message reducer for DeltaChannel: apply a batch of writes in order.

    It is `add_messages` folded over the batch, which is batching-invariant as DeltaChannel
    needs, but with the id index built once: folding `add_messages` re-indexes the whole
    history for every write, which made a turn's cost grow with the thread. Anything
    `add_messages` treats specially (a removal, a chunk, no id, a dict) goes through it.
    Every message we write carries an id already, so replaying never invents new ones.
    """
    merged: list[Any] = list(current)
    index = {message.id: n for n, message in enumerate(merged)}
    for write in writes:
        batch = write if isinstance(write, list) else [write]
        if not all(_plain_message(message) for message in batch):
            # add_messages is annotated as returning one message or a list; given a list it
            # always returns a list.
            merged = cast(list[Any], add_messages(merged, write))
            index = {message.id: n for n, message in enumerate(merged)}
            continue
        for message in batch:
            if message.id in index:
                merged[index[message.id]] = message
            else:
                index[message.id] = len(merged)
                merged.append(message)
    return merged


def _plain_message(message: Any) -> bool:
    return (
        isinstance(message, BaseMessage)
        and not isinstance(message, BaseMessageChunk | RemoveMessage)
        and bool(message.id)
    )


def last_ai_message(messages: list[AnyMessage]) -> AIMessage | None:
    if messages and isinstance(messages[-1], AIMessage):
        return messages[-1]
    return None


def last_human_text(messages: list[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def messages_for_model(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The history as a well-formed request.

    Calls whose arguments did not parse are sent as calls with empty arguments (the bad text
    is never sent back), and a call left without an answer by a cut-off run gets one, right
    after its message, so the request never has a tool call without a result.
    """
    request: list[AnyMessage] = []
    unanswered: list[Mapping[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            request += [cut_off_answer(call, "the run was cut off") for call in unanswered]
            unanswered = []
        if isinstance(message, AIMessage):
            message = _without_invalid_arguments(message)
            unanswered = list(message.tool_calls)
        elif isinstance(message, ToolMessage):
            unanswered = [c for c in unanswered if c["id"] != message.tool_call_id]
        request.append(message)
    return request + [cut_off_answer(call, "the run was cut off") for call in unanswered]


def _without_invalid_arguments(message: AIMessage) -> AIMessage:
    if not message.invalid_tool_calls:
        return message
    repaired: list[ToolCall] = [
        {"name": call.get("name") or "unknown", "args": {}, "id": call["id"], "type": "tool_call"}
        for call in message.invalid_tool_calls
    ]
    return AIMessage(
        content=message.content, id=message.id, tool_calls=[*message.tool_calls, *repaired]
    )


def unanswered_calls(messages: list[AnyMessage]) -> tuple[str, list[Mapping[str, Any]]]:
    """The calls of the last AI message that have no answer yet, if the history ends with
    that message and its answers. Older gaps stay repaired in the request view only: an
    answer appended now would come after later messages, out of place."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            return str(message.id), [c for c in calls if c.get("id") not in answered]
        break
    return "", []
