"""A model's reply as fsagent keeps it: its reasoning set apart from its answer, and a reply
cut off at the reply limit marked as cut, for the person and for the model.

Reasoning models send their thinking as `reasoning_content` (core.context.chat_model keeps it in the
message's additional_kwargs) or inside the content as `<think>…</think>`. Either way it is
moved to additional_kwargs["reasoning_content"]: the content is the answer only, which is
what the router reads, what transcripts record and what later requests send back.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage

from core.approval.approval import CUT_CALL
from core.context.reasoning import split_reasoning

# Where servers stream a reasoning model's thinking: llama.cpp and LM Studio say
# `reasoning_content`, some servers `reasoning`. ChatOpenAI drops both.
REASONING_FIELDS = ("reasoning_content", "reasoning")
REASONING_KEY = "reasoning_content"  # where fsagent keeps it: the message's additional_kwargs
CUT_KEY = "fsagent_cut"  # additional_kwargs: the reply limit a cut reply reached


def reasoning_of(message: AIMessage) -> str:
    value = message.additional_kwargs.get(REASONING_KEY)
    return value if isinstance(value, str) else ""


def separate_reasoning(message: AIMessage) -> AIMessage:
    """The reply with any `<think>` text moved out of its content."""
    if not isinstance(message.content, str):
        return message
    thought, answer = split_reasoning(message.content)
    if not thought and answer == message.content:
        return message
    kept = reasoning_of(message)
    thinking = f"{kept}\n{thought}" if kept and thought else kept or thought
    return message.model_copy(
        update={
            "content": answer,
            "additional_kwargs": {**message.additional_kwargs, REASONING_KEY: thinking},
        }
    )


def without_reasoning(message: AIMessage) -> AIMessage:
    """The reply as later requests send it back: never its reasoning."""
    if REASONING_KEY not in message.additional_kwargs:
        return message
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != REASONING_KEY}
    return message.model_copy(update={"additional_kwargs": kwargs})


def was_cut(message: AIMessage) -> bool:
    return message.response_metadata.get("finish_reason") == "length"


def cut_note(limit: int | None) -> str:
    where = f"the {limit}-token reply limit" if limit else "the reply limit"
    return f"[fsagent: this reply was cut off at {where}.]"


def mark_cut(message: AIMessage, limit: int | None) -> AIMessage:
    """A reply the server stopped at the reply limit (`finish_reason: length`), marked so
    the model knows in later requests, and its calls kept from running: their arguments
    may have lost their end, and a streamed call's partial JSON still parses."""
    content = message.content if isinstance(message.content, str) else ""
    note = cut_note(limit)
    content = f"{content.rstrip()}\n{note}" if content.strip() else note
    cut_calls = [
        {
            "name": call["name"],
            "args": "",
            "id": call["id"],
            "error": CUT_CALL,
            "type": "invalid_tool_call",
        }
        for call in message.tool_calls
    ]
    return message.model_copy(
        update={
            "content": content,
            "tool_calls": [],
            "invalid_tool_calls": [*message.invalid_tool_calls, *cut_calls],
            "additional_kwargs": {**message.additional_kwargs, CUT_KEY: limit or 0},
        }
    )
