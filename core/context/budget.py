"""The arithmetic of a request against the model's context: pure functions over messages.

Token counts. The server's `usage.prompt_tokens` for the last request is the truth; only the
messages added since are estimated (`estimate_request`). The estimate is one token per
3 characters, rounded up, plus 4 tokens a message for the chat template's role markers. Prose
runs about 4 characters a token, but code and JSON, which are most of what a file agent sends
(tool schemas, arguments, file contents), run nearer 3: erring high only compacts a little
early, erring low overflows. It is deterministic and cheap, so it can run before every request.

The budget. A request must leave room for the reply: the prompt may hold at most
`context_length - max_tokens` tokens (`Budget.prompt_limit`); past `threshold` of that the
older turns are compacted. The reply reserve scales with the context (an eighth, at most
1024): on 4096 tokens a 1,024 reserve left the conversation too little room.

Compaction. `plan_compaction` picks which messages to replace with a model-written summary:
the oldest whole turns first, then, if the latest turn alone is too big, its oldest steps. It
never separates an assistant message with tool calls from their results, and always keeps the
leading system prompt, the latest request from the person, and an assistant message whose
calls are still unanswered (a pending approval) with whatever follows it. It aims at half of
what the prompt leaves after the fixed part and the summary's room (`Budget.room`), so the
next turns fit before the next compaction; a caller may require more (`through`: the context
keeper summarises all its summary request sends, issue 43).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from core.context.reasoning import split_reasoning

CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 4

# Compact only near the limit: on a 4096 context the fixed part is a third of it, and each
# compaction costs a generation (the summary), so an early mark compacted every turn.
DEFAULT_THRESHOLD = 0.9
MAX_REPLY_TOKENS = 1024
REPLY_SHARE = 8  # the default reply reserve: an eighth of the context (512 on 4096)
SUMMARY_TOKENS = 300  # room kept for the summary; also the summary request's max_tokens
# On a small context the summary gets less: 300 tokens were a sixth of 2048, and the fixed
# part and a turn of 150 words left no room for it (issue 30). A twelfth, at least 96.
SUMMARY_SHARE = 12
MIN_SUMMARY_TOKENS = 96

# What the person can do about a request that cannot fit, said wherever it is refused.
WHAT_TO_DO = (
    "load the model with a larger context, pass --read-only (fewer tools), ask for something "
    "smaller, or pass a smaller --max-tokens"
)


# -- estimates -----------------------------------------------------------------------------


def estimate_text(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def message_text(message: BaseMessage) -> str:
    """A message's content as plain text: a string, or the text of its content blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def _calls_text(message: BaseMessage) -> str:
    if not isinstance(message, AIMessage):
        return ""
    return "".join(call["name"] + json.dumps(call["args"]) for call in message.tool_calls)


def estimate_message(message: BaseMessage) -> int:
    return MESSAGE_OVERHEAD + estimate_text(message_text(message) + _calls_text(message))


def estimate_messages(messages: Sequence[BaseMessage]) -> int:
    return sum(estimate_message(m) for m in messages)


def estimate_tools(tools: Sequence[Mapping[str, Any] | Any]) -> int:
    """Tool schemas as sent: OpenAI-format dicts, or anything langchain can convert."""
    schemas = [t if isinstance(t, Mapping) else convert_to_openai_tool(t) for t in tools]
    return sum(estimate_text(json.dumps(schema)) for schema in schemas)


def estimate_request(
    messages: Sequence[BaseMessage],
    *,
    fixed_tokens: int = 0,
    known_tokens: int | None = None,
    known_count: int = 0,
) -> int:
    """The prompt tokens of a request: the server's count where it has one, else estimates.

    known_tokens is what the server counted for the fixed part and the first known_count
    messages; after a reply that is its usage.total_tokens (prompt plus the reply, now in
    the history) with known_count the number of messages sent plus one. Without it, the
    whole request is estimated: fixed_tokens (system prompt outside `messages`, tool schemas)
    plus every message.
    """
    if known_tokens is None:
        return fixed_tokens + estimate_messages(messages)
    return known_tokens + estimate_messages(messages[known_count:])


# -- the budget ----------------------------------------------------------------------------


def summary_tokens_for(context_length: int) -> int:
    """The room a summary gets, and its reply limit: 300 tokens from 3600 up, a twelfth of a
    smaller context (170 on 2048), never under 96."""
    return max(MIN_SUMMARY_TOKENS, min(SUMMARY_TOKENS, context_length // SUMMARY_SHARE))


def too_big(
    tokens: int,
    fixed_tokens: int,
    context_length: int | None,
    prompt_limit: int | None,
    *,
    counted: bool = False,
) -> str:
    """The one line for a request that cannot fit: what it needs against what a request may
    hold (the context less the reply's room), so the two numbers never seem to agree."""
    needs = (
        f"the server counted {tokens:,} tokens for it ({fixed_tokens:,} of them system prompt "
        "and tools, by our count)"
        if counted
        else f"it needs ~{tokens:,} tokens ({fixed_tokens:,} of them system prompt and tools)"
    )
    if context_length is None or prompt_limit is None:
        return f"this request does not fit the model's context: {needs}: {WHAT_TO_DO}"
    return (
        f"this request does not fit the model's context: {needs}, more than the "
        f"{prompt_limit:,} a request may hold in a context of {context_length:,} tokens with "
        f"{context_length - prompt_limit:,} kept for the reply: {WHAT_TO_DO}"
    )


def default_max_tokens(context_length: int) -> int:
    """A reply cap that leaves most of a small context to the prompt: an eighth, at most 1024
    (512 on 4096, 1024 from 8192). A reply cut there is marked as cut (core.context.replies)."""
    return max(1, min(MAX_REPLY_TOKENS, context_length // REPLY_SHARE))


@dataclass(frozen=True)
class Budget:
    """What one request may spend: the context, less the reply, with a compaction mark."""

    context_length: int
    max_tokens: int
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if not 0 < self.max_tokens < self.context_length:
            raise ValueError(
                f"max_tokens {self.max_tokens} leaves no room for a prompt in a context "
                f"of {self.context_length} tokens"
            )
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold {self.threshold} is not a share between 0 and 1")

    @classmethod
    def for_context(
        cls,
        context_length: int,
        max_tokens: int | None = None,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> Budget:
        if max_tokens is None:
            max_tokens = default_max_tokens(context_length)
        return cls(context_length, max_tokens, threshold)

    @property
    def prompt_limit(self) -> int:
        """The most a prompt may hold and still leave room for a whole reply."""
        return self.context_length - self.max_tokens

    @property
    def compact_at(self) -> int:
        """Past this many prompt tokens, the older turns are compacted."""
        return int(self.prompt_limit * self.threshold)

    def needs_compaction(self, prompt_tokens: int) -> bool:
        return prompt_tokens > self.compact_at

    @property
    def summary_tokens(self) -> int:
        """The room kept for a summary, and the summary request's reply limit."""
        return summary_tokens_for(self.context_length)

    def room(self, fixed_tokens: int, summary_tokens: int | None = None) -> int:
        """What the prompt leaves the conversation after the fixed part and a summary."""
        summary = self.summary_tokens if summary_tokens is None else summary_tokens
        return max(0, self.prompt_limit - fixed_tokens - summary)

    def compaction_target(
        self, fixed_tokens: int, summary_tokens: int | None = None, *, limit: int | None = None
    ) -> int:
        """Where a compaction aims: the fixed part and the summary, then half of what is left
        below the mark, so the other half is there for the next turns. Half the whole
        prompt limit, which the fixed part and the summary nearly filled on 4096, left no
        room: the next 2 KB result crossed the mark again, and every turn compacted.
        limit: a prompt limit smaller than the budget's (a server counting more than our
        estimate), whose mark is used instead."""
        floor = fixed_tokens + (self.summary_tokens if summary_tokens is None else summary_tokens)
        held = self.prompt_limit if limit is None else min(limit, self.prompt_limit)
        mark = int(held * self.threshold)
        return floor + max(0, mark - floor) // 2


# -- compaction ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPlan:
    """Which messages (by index) to send as they are and which to replace with a summary.

    The request becomes: pinned, then one summary message (if `summarise` is not empty),
    then keep. `keep` holds the latest request even when steps of its turn after it are
    summarised, so the summary then stands before it.
    """

    pinned: tuple[int, ...]
    summarise: tuple[int, ...]
    keep: tuple[int, ...]
    tokens: int  # estimated prompt of the compacted request, summary at its full size
    minimum: int  # the smallest request possible: fixed part, pinned, summary, must-keep
    fixed_tokens: int
    limit: int  # the budget's prompt_limit
    context_length: int

    @property
    def fits(self) -> bool:
        return self.tokens <= self.limit

    def apply(
        self, messages: Sequence[BaseMessage], summary: BaseMessage | None
    ) -> list[BaseMessage]:
        """The messages to send, with `summary` standing for the summarised ones."""
        head = [messages[i] for i in self.pinned]
        if self.summarise and summary is not None:
            head.append(summary)
        return head + [messages[i] for i in self.keep]

    def describe(self) -> str:
        """One line for the person when even the smallest request does not fit."""
        return too_big(self.minimum, self.fixed_tokens, self.context_length, self.limit)


def pending_call_index(messages: Sequence[BaseMessage]) -> int | None:
    """The last assistant message whose tool calls are not all answered yet, if any."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage) and message.tool_calls:
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            if any(call["id"] not in answered for call in message.tool_calls):
                return index
            return None
    return None


def plan_compaction(
    messages: Sequence[BaseMessage],
    budget: Budget,
    *,
    fixed_tokens: int,
    summary_tokens: int | None = None,
    target: int | None = None,
    measure: Callable[[BaseMessage], int] = estimate_message,
    through: int = 0,
) -> CompactionPlan:
    """Keep the most recent messages that fit `target` tokens; summarise the rest.

    fixed_tokens is what the request holds outside `messages` (tool schemas, and a system
    prompt not passed in). target defaults to `Budget.compaction_target`: half of what is
    left after the fixed part, the pinned messages and the summary, so the next few turns
    fit before compacting again. measure counts a
    message's tokens; pass one calibrated against the server's counts if you have it.
    When even the minimum is over the prompt limit, the plan keeps only the minimum and
    `fits` is False. through: the messages before this index are summarised whatever the
    target (those the summary request sends, which its summary tells of anyway).
    """
    n = len(messages)
    if summary_tokens is None:
        summary_tokens = budget.summary_tokens
    sizes = [measure(m) for m in messages]
    start = 0
    while start < n and isinstance(messages[start], SystemMessage):
        start += 1
    pinned = tuple(range(start))
    latest = next(
        (i for i in range(n - 1, start - 1, -1) if isinstance(messages[i], HumanMessage)), None
    )
    pending = pending_call_index(messages)
    base = fixed_tokens + sum(sizes[:start])
    if target is None:
        target = budget.compaction_target(base, summary_tokens)

    # A cut at j sends messages[j:] as they are. Never cut before a tool result (it would
    # leave its call behind), never after a pending call, and keep at least the last step.
    last = pending if pending is not None and pending >= start else n - 1
    cuts = [
        j
        for j in range(start, max(start, last) + 1)
        if j == start or not isinstance(messages[j], ToolMessage)
    ]
    cuts = [j for j in cuts if j >= through] or cuts[-1:]

    def split(j: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        held = (latest,) if latest is not None and start <= latest < j else ()
        summarised = tuple(i for i in range(start, j) if i not in held)
        return summarised, held + tuple(range(j, n))

    def cost(j: int) -> int:
        summarised, kept = split(j)
        summary = summary_tokens if summarised else 0
        return base + summary + sum(sizes[i] for i in kept)

    # The smallest request: usually the latest cut, unless a summary would outweigh what it
    # replaces; on a tie, the one that keeps more.
    smallest = min(cuts, key=lambda j: (cost(j), j))
    turns = [j for j in cuts if j == cuts[0] or isinstance(messages[j], HumanMessage)]
    chosen = next((j for j in (*turns, *cuts) if cost(j) <= target), smallest)
    summarised, kept = split(chosen)
    return CompactionPlan(
        pinned=pinned,
        summarise=summarised,
        keep=kept,
        tokens=cost(chosen),
        minimum=cost(smallest),
        fixed_tokens=fixed_tokens,
        limit=budget.prompt_limit,
        context_length=budget.context_length,
    )


# -- the summary -----------------------------------------------------------------------------

SUMMARY_PREFIX = "Summary of the conversation so far:"


def summary_prompt(max_words: int = 200) -> str:
    """The instruction sent with the turns to summarise."""
    return (
        "Summarise the conversation below for yourself, to continue it later without it. "
        f"Use at most {max_words} words, plain sentences, no preamble. Name every file and "
        "folder touched, by its path, and what was done to it. Say every decision made: "
        "which writes the person approved, rejected or edited, and any instruction or "
        "preference they gave. Say what was asked last and what remains to do. Do not "
        "invent anything that is not in the conversation."
    )


def transcript(messages: Sequence[BaseMessage], max_tokens: int, *, clip_chars: int = 800) -> str:
    """The messages as plain lines for the summary request, within max_tokens (estimated).

    Long texts (file contents, mostly) are clipped, harder until the whole fits; if even
    short lines do not fit, the oldest are left out with a note saying how many.
    """
    clip = clip_chars
    while True:
        lines = [_line(m, clip) for m in messages]
        if estimate_text("\n".join(lines)) <= max_tokens or clip <= 80:
            break
        clip //= 2
    dropped = 0
    kept = lines
    while dropped < len(lines) and estimate_text("\n".join(kept)) > max_tokens:
        dropped += 1
        kept = [f"[{dropped} earlier messages left out]", *lines[dropped:]]
    return "\n".join(kept)


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" [… {len(text) - limit} more chars]"


def _line(message: BaseMessage, clip: int) -> str:
    if isinstance(message, AIMessage):
        calls = "; ".join(
            f"called {c['name']}({_clip(json.dumps(c['args']), clip)})" for c in message.tool_calls
        )
        # Reasoning is the model's scratch work, not something that happened: leave it out.
        said = _clip(split_reasoning(message_text(message))[1], clip)
        return "Assistant: " + " ".join(part for part in (said, calls) if part)
    text = _clip(message_text(message), clip)
    if isinstance(message, HumanMessage):
        return f"Person: {text}"
    if isinstance(message, ToolMessage):
        name = message.name or "tool"
        return f"Result of {name}: {text}"
    return f"{message.type.capitalize()}: {text}"


# -- what servers and models send back -------------------------------------------------------

# How servers say a prompt did not fit, lower-cased: llama.cpp (type and message, old and
# new), OpenAI (code and message), and LM Studio's wordings across versions.
_OVERFLOW_PHRASES = (
    "exceed_context_size_error",
    "exceeds the available context size",
    "larger than the max context size",
    "context_length_exceeded",
    "maximum context length is",
    "greater than the context length",
    "when context the overflows",
    "does not fit in context length",
    "context size has been exceeded",
)
_N_KEEP = re.compile(r"n_keep\W*\d+\W*>=?\s*n_ctx")


def is_context_overflow(error_text: str) -> bool:
    """Whether an error from the server says the prompt was too long for its context."""
    lowered = error_text.lower()
    return any(p in lowered for p in _OVERFLOW_PHRASES) or bool(_N_KEEP.search(lowered))


_SIZES = (
    # llama.cpp: request (2981 tokens) exceeds the available context size (2048 tokens)
    re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    # LM Studio: (n_keep: 13055 >= n_ctx: 4096), Cannot truncate prompt with n_keep (N) >= ...
    re.compile(r"n_keep\W*(\d+)\W*>=?\s*n_ctx\W*(\d+)"),
    # LM Studio: The input has 31430 tokens, but the context length only supports 30000
    re.compile(r"input has (\d+) tokens, but the context length only supports (\d+)"),
    # LM Studio 0.3: Trying to keep the first N tokens ... context length of only M tokens
    re.compile(r"keep the first (\d+) tokens.*?context length of only (\d+)", re.DOTALL),
)
_OPENAI_SIZES = re.compile(r"maximum context length is (\d+) tokens.*?resulted in (\d+) tokens")


def overflow_sizes(error_text: str) -> tuple[int, int] | None:
    """(prompt tokens, context length) when an overflow error names them."""
    for pattern in _SIZES:
        found = pattern.search(error_text)
        if found:
            return int(found.group(1)), int(found.group(2))
    found = _OPENAI_SIZES.search(error_text)
    if found:
        return int(found.group(2)), int(found.group(1))
    return None
