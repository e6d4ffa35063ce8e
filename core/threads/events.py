"""A turn as data: the typed events a run of the graph yields, which every front-end consumes.

The terminal prints them and writes them to a transcript; the HTTP service sends them as
server-sent events. Events carry what a person or a regression run compares, never ids of
our own making or timestamps (a call id is the model's, kept so results can be matched).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.approval.questions import Pause


@dataclass(frozen=True)
class Route:
    """The router chose the group of tools this request is offered."""

    route: str


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's reply as it streams."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """A piece of a reasoning model's thinking as it streams: shown apart from the answer
    (dimmed at a terminal), never part of it, never sent back to the model."""

    text: str


@dataclass(frozen=True)
class Unsure:
    """A piece of a reply that is reasoning if a bare `</think>` follows, and the answer
    otherwise: the first reply of a model that has not yet shown which it writes
    (core.context.reasoning). A screen may show it for now; `Settled` takes it back."""

    text: str


@dataclass(frozen=True)
class Settled:
    """The `Unsure` text shown so far is known for what it is: take it back. The same text
    comes again, as Reasoning or TextDelta."""


@dataclass(frozen=True)
class Answer:
    """A finished model message's text (streamed already as TextDelta, unless it is one of
    ours, such as the step limit's)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A call the model made. `args` is None and `error` says why when its arguments were
    not JSON. `from_text` names the form when the model wrote the call as text and fsagent
    read it (core.context.text_calls)."""

    call_id: str
    tool: str
    args: Any
    error: str | None = None
    from_text: str | None = None


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    tool: str
    text: str
    failed: bool


@dataclass(frozen=True)
class Decision:
    """A decision on a write call, or on a question (ask_person). The core reports those a
    rule, the --approve mode or a grant made; a front-end reports its person's."""

    call_id: str
    tool: str
    decision: str  # approve, edit, grant, reject, respond; answer or unanswered (questions)
    reason: str
    by: str  # rule, mode, grant, person, piped, admin

    @property
    def approved(self) -> bool:
        return self.decision in ("approve", "edit", "grant")


@dataclass(frozen=True)
class ReplyCut:
    """The model's reply was cut off at the reply limit (`limit` tokens, 0 when unknown);
    the model is told so too, and any call in it was not run."""

    limit: int


@dataclass(frozen=True)
class Compacted:
    """Older messages were replaced, in what the model is sent, by a summary it wrote; the
    thread keeps them all. `summarised` messages went into the summary this time, which now
    stands for `covered` messages; `kept` are sent as they are. Tokens are estimates of the
    request before and after. `why`: budget (it would not have fit), overflow (the server
    refused it) or requested (/compact)."""

    summarised: int
    covered: int
    kept: int
    tokens_before: int
    tokens_after: int
    context_length: int | None
    why: str


@dataclass(frozen=True)
class Paused:
    """The run stopped for approval: `payload` is the approval contract's (docs/design.md)."""

    payload: Pause


@dataclass(frozen=True)
class Undone:
    """An undo ran: `text` is what the model was told in the thread; `complete` is False
    when some step failed (the text says which)."""

    text: str
    complete: bool


@dataclass(frozen=True)
class Notice:
    """A line of ours about the thread, not the model's: what opening it finishes first (a
    run or an undo a crash cut off)."""

    text: str


@dataclass(frozen=True)
class Failed:
    """The run failed: `text` is one line the person can act on. With `fatal`, the session
    raises the error after this event (--verbose, or a replay that drifted)."""

    text: str
    fatal: bool = False


Event = (
    Route
    | TextDelta
    | Unsure
    | Settled
    | Reasoning
    | Answer
    | ToolCall
    | ToolResult
    | Decision
    | ReplyCut
    | Compacted
    | Paused
    | Undone
    | Notice
    | Failed
)
