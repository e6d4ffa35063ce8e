"""Tool calls a model wrote as text, read into real calls.

Small models often write their call in the content when the server's chat template or its
tool-call parser misses it (see docs/model-servers.md):

- `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`: the Hermes and Qwen templates;
- a bare `{"name": ..., "parameters": {...}}`: Llama 3.x's JSON tool format (sometimes after
  `<|python_tag|>`);
- a fenced ```json block holding one.

A call is read only when it is the whole reply, or a clearly delimited block in it (the
tags, or a fence), and it names a tool we offered. JSON in the middle of prose is left alone:
a model explaining a config is not calling anything. A call read from text is then a call
like any other: the graph reviews it, asks for approval, runs it and answers it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage

from core.context.reasoning import ThinkSplitter

TEXT_CALL_KEY = "fsagent_text_calls"  # additional_kwargs: the forms the calls were read from

TAGGED = "tool_call tags"
BARE = "bare JSON"
FENCED = "fenced JSON"

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(
    r"^[ \t]*```(?:json|tool_call)?[ \t]*\n(.*?)\n[ \t]*```[ \t]*$", re.DOTALL | re.M
)
_PYTHON_TAG = "<|python_tag|>"


def read_text_calls(message: AIMessage, offered: Collection[str]) -> AIMessage:
    """The reply with the calls its text holds made real calls, or the reply as it was."""
    if message.tool_calls or message.invalid_tool_calls or not isinstance(message.content, str):
        return message
    found = calls_in_text(message.content, offered)
    if found is None:
        return message
    calls, rest, form = found
    return message.model_copy(
        update={
            "content": rest,
            "tool_calls": [
                {
                    "name": name,
                    "args": args,
                    "id": f"call_text_{uuid.uuid4().hex[:12]}",
                    "type": "tool_call",
                }
                for name, args in calls
            ],
            "additional_kwargs": {**message.additional_kwargs, TEXT_CALL_KEY: form},
        }
    )


def calls_in_text(
    text: str, offered: Collection[str]
) -> tuple[list[tuple[str, dict[str, Any]]], str, str] | None:
    """(calls, the text left when they are taken out, the form) or None when the text holds
    no call we can take: every block must be a call to an offered tool, or nothing is read."""
    if "<tool_call>" in text:
        return _blocks(text, _TAG, offered, TAGGED)
    whole = text.strip().removeprefix(_PYTHON_TAG).strip()
    if whole.startswith(("{", "[")):
        calls = _calls(whole, offered)
        return (calls, "", BARE) if calls else None
    if "```" in text:
        return _blocks(text, _FENCE, offered, FENCED)
    return None


def _blocks(
    text: str, pattern: re.Pattern[str], offered: Collection[str], form: str
) -> tuple[list[tuple[str, dict[str, Any]]], str, str] | None:
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    calls: list[tuple[str, dict[str, Any]]] = []
    for match in matches:
        found = _calls(match.group(1), offered)
        if not found:
            return None  # a block that is not a call: the reply is prose that shows JSON
        calls += found
    rest = pattern.sub("", text).strip()
    return calls, re.sub(r"\n{3,}", "\n\n", rest), form


def _calls(raw: str, offered: Collection[str]) -> list[tuple[str, dict[str, Any]]]:
    """The calls one JSON text holds (an object, or a list of them); [] unless every one is
    a call to an offered tool with an object of arguments."""
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = _call(item, offered)
        if call is None:
            return []
        calls.append(call)
    return calls


def _call(item: Any, offered: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in offered:
        return None
    args: Any = next((item[k] for k in ("arguments", "parameters", "args") if k in item), {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    if set(item) - {"name", "arguments", "parameters", "args", "type", "id"}:
        return None  # more than a call: some other object that happens to have a name
    return name, args


# -- on screen: hold back what may be a call written as text --------------------------------

_MARKERS = ("<tool_call>", "```")
_OPENERS = ("<tool_call>", _PYTHON_TAG)


class CallHold:
    """Answer text as it streams, held back from where a call written as text may begin
    (a `<tool_call>` tag, a fence, or a reply that opens with JSON), so that a call is never
    shown as the answer. What was held is released at the end if the reply was not a call."""

    def __init__(self) -> None:
        self.seen = ""  # all the answer text so far
        self.shown = 0  # how much of it was let through
        self.holding = False

    def feed(self, text: str) -> str:
        """What of this piece may be shown now."""
        self.seen += text
        if self.holding:
            return ""
        if self.shown == 0:
            opening = self.seen.lstrip()
            if not opening:
                return ""
            if opening[0] in "{[" or opening.startswith(_OPENERS):
                self.holding = True
                return ""
            if any(tag.startswith(opening) for tag in _OPENERS):
                return ""  # `<tool` so far: wait for the next piece to say
        start = self._marker_at()
        if start is not None:
            self.holding = True
            out, self.shown = self.seen[self.shown : start], start
            return out
        end = max(self.shown, len(self.seen) - _partial_marker(self.seen))
        out, self.shown = self.seen[self.shown : end], end
        return out

    def _marker_at(self) -> int | None:
        spots = [self.seen.find(m, self.shown) for m in _MARKERS]
        spots = [s for s in spots if s >= 0]
        return min(spots) if spots else None

    def release(self) -> str:
        """Everything not shown yet, for a reply that turned out not to be a call."""
        out, self.shown = self.seen[self.shown :], len(self.seen)
        return out


def _partial_marker(text: str) -> int:
    """How many characters at the end of text could begin a marker."""
    return max(
        (
            size
            for marker in _MARKERS
            for size in range(1, min(len(marker) - 1, len(text)) + 1)
            if marker.startswith(text[-size:])
        ),
        default=0,
    )


class Shown(NamedTuple):
    """What to show of a reply as it streams, in this order: the unsure text shown so far
    taken back (`take_back`), then reasoning, then answer, then new `unsure` text: text that
    is reasoning if a bare `</think>` follows and the answer otherwise, to show for now."""

    reasoning: str = ""
    answer: str = ""
    unsure: str = ""
    take_back: bool = False
    # A model known to be plain closed a think block: the text shown as its answer before
    # this was its reasoning (core.context.reasoning).
    late_close: bool = False


class ReplyStream:
    """One reply's streamed content as the person sees it: reasoning told apart
    (core.context.reasoning.ThinkSplitter), and a call written as text held back (CallHold)."""

    def __init__(self, *, plain: bool, hold_calls: bool) -> None:
        self.splitter = ThinkSplitter(plain=plain)
        self.hold = CallHold() if hold_calls else None
        # Unsure text is held back like answer text: a call written as text never shows.
        self.unsure_hold = CallHold() if hold_calls else None
        self.showing_unsure = False

    def feed(self, text: str) -> Shown:
        """What to show of this piece."""
        closed_before = self.splitter.late_close
        thought, answer = self.splitter.feed(text)
        if self.hold is not None and answer:
            answer = self.hold.feed(answer)
        late = self.splitter.late_close and not closed_before
        return Shown(thought, answer, self._unsure(), self._decided(), late)

    def finish(self, *, read_as_calls: bool) -> Shown:
        """What is left to show once the reply is whole; nothing of the text a call was read
        from."""
        thought, answer = self.splitter.flush()
        take_back = self._decided()
        if self.hold is None:
            return Shown(thought, answer, take_back=take_back)
        shown = self.hold.feed(answer) if answer else ""
        rest = self.hold.release()
        return Shown(thought, shown + ("" if read_as_calls else rest), take_back=take_back)

    def _unsure(self) -> str:
        fresh = self.splitter.take_unsure()
        if fresh and self.unsure_hold is not None:
            fresh = self.unsure_hold.feed(fresh)
        self.showing_unsure = self.showing_unsure or bool(fresh)
        return fresh

    def _decided(self) -> bool:
        """Whether unsure text was shown and is now known for what it is."""
        if self.showing_unsure and not self.splitter.undecided:
            self.showing_unsure = False
            return True
        return False
