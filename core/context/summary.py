"""A thread's summary: what it stands for, as the thread's state stores it, and how the model
is asked to write it (core.context.context decides when).

The summary replaces the older turns in what requests send; the stored history is never
changed. It is asked for within the conversation (the same tools, system prompt and
messages as the last request, through the last reply, then the question), so the server's
prompt cache serves all but the question; after an overflow, or when that request would not
fit, on its own, with the turns as a clipped transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)

from core.context.budget import SUMMARY_PREFIX, SUMMARY_TOKENS, summary_prompt, transcript
from core.context.prompts import SUMMARY_REQUEST
from core.threads.messages import content_text, messages_for_model


@dataclass(frozen=True)
class Summary:
    """A thread's summary as its state stores it (a plain dict there).

    text stands for the history's first `upto` messages, except those named in `held`,
    which are still sent as they are (the latest request, when a turn was compacted in the
    middle). made_at is how many messages the history had when it was written: the server's
    counts of replies made since then are counts of requests with this summary. The rest
    says what the last compaction did, for the person.
    """

    text: str
    upto: int
    held: tuple[str, ...]
    made_at: int
    count: int  # compactions so far in this thread
    summarised: int  # messages the last compaction summarised
    kept: int  # messages sent as they are after it
    before: int  # estimated prompt tokens before it
    after: int  # and after
    why: str  # budget, overflow or requested

    def as_state(self) -> dict[str, Any]:
        return {**asdict(self), "held": list(self.held)}

    @classmethod
    def from_state(cls, value: Any) -> Summary | None:
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            return None
        try:
            return cls(**{**value, "held": tuple(value.get("held") or ())})
        except TypeError:  # written by another version: start afresh rather than fail
            return None

    @property
    def covers(self) -> int:
        """How many messages of the history the summary stands for."""
        return self.upto - len(self.held)


def in_conversation(system: str, prefix: list[BaseMessage]) -> list[BaseMessage]:
    """The request for a summary of `prefix`, sent as the conversation is (the caller binds
    the same tools, with tool_choice none), the question last."""
    ask = SUMMARY_REQUEST.format(instructions=summary_prompt())
    request: list[BaseMessage] = [SystemMessage(system)]
    request += messages_for_model(prefix)  # type: ignore[arg-type]
    return [*request, HumanMessage(ask)]


def standalone(
    summary: Summary | None, messages: Sequence[BaseMessage], max_tokens: int
) -> list[BaseMessage]:
    """The request for a summary on its own: the old summary and the messages as a
    transcript of at most max_tokens."""
    earlier = f"{SUMMARY_PREFIX}\n{summary.text}\n\n" if summary else ""
    body = earlier + "The conversation:\n" + transcript(messages, max(max_tokens, 100))
    return [SystemMessage(summary_prompt()), HumanMessage(body)]


def summary_text(
    response: AIMessage, summarised: Sequence[BaseMessage], limit: int = SUMMARY_TOKENS
) -> str:
    """The summary in a reply (its reasoning set apart already); a model that only thought
    leaves the facts, plainly, within `limit` tokens."""
    text = content_text(response.content).strip().removeprefix(SUMMARY_PREFIX).strip()
    return text or transcript(summarised, limit)


def trusted_replies(messages: Sequence[AnyMessage], summary: Summary | None) -> set[str]:
    """The replies whose usage counts a request as it is built now: those made since the
    summary was written."""
    start = summary.made_at if summary is not None else 0
    return {
        str(message.id)
        for message in messages[start:]
        if isinstance(message, AIMessage) and message.usage_metadata
    }
