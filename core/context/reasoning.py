"""A reasoning model's thinking told apart from its answer, in text that streams: the one
splitter the screen, the transcript and the stored message all use.

Reasoning arrives in the content in three shapes:

- `<think>…</think>answer`: Qwen3 and most reasoning models;
- `…</think>answer` with no opening tag: templates that open the think block in the prompt
  themselves (DeepSeek-R1 distills, QwQ, Qwen3 "Thinking-2507": Qwen's docs say "it is normal
  for the model's output to contain only `</think>`", quoted in
  Cerebras/cerebras-cloud-sdk-python#10 and vllm-project/vllm#31045);
- `<think>` never closed: the reply limit cut the thinking short (all of it is reasoning).

Tags may be split across streamed pieces. A reply that does not open with `<think>` could
still be reasoning until `</think>` comes, so its text is held back as reasoning or answer
until the tag comes or the reply ends. Meanwhile `take_unsure` gives it out as it arrives,
for a screen that can show it for now and take it back (terminal.live). Once a reply of the
thread came with no tag at all (`plain`), later replies are the answer as they stream: a
model writes the bare `</think>` in every reply or in none. Should a plain model close a
think block after all, what streamed before the tag was shown as the answer already; the
rest of that text is reasoning, as in the stored message, and `late_close` says so, for
the screen to tell the person.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


class ThinkSplitter:
    """Streamed content, told apart into reasoning and answer as it arrives.

    plain: replies of this model are known to carry no bare `</think>` (a reply came
    without one), so text that does not open with `<think>` is the answer at once.
    After the reply, `saw_bare_close` and `saw_plain` say what it taught.
    """

    def __init__(self, *, plain: bool = False) -> None:
        # start (nothing but space yet), undecided (no opening tag: reasoning if a
        # `</think>` comes), thinking, closed (space after </think> is dropped), answering
        self.state = "start"
        self.held = ""
        self.plain = plain
        self.saw_bare_close = False
        self.late_close = False  # a plain reply closed a think block: its start was shown
        self.saw_answer = False
        self.unsure_given = 0  # of the text held while undecided, how much take_unsure gave out

    @property
    def saw_plain(self) -> bool:
        """The reply had an answer and no think tag at all."""
        return self.saw_answer and not self.saw_bare_close and self.state == "answering"

    @property
    def undecided(self) -> bool:
        """Text is being held that is reasoning if a bare `</think>` comes, else the answer."""
        return self.state == "undecided"

    def take_unsure(self) -> str:
        """The held undecided text that came since the last call: to show for now, never as
        what it is. Once it is decided, `feed` or `flush` give all of it again as reasoning
        or answer."""
        if self.state != "undecided":
            self.unsure_given = 0
            return ""
        end = len(self.held) - _partial_suffix(self.held, CLOSE)
        fresh = self.held[self.unsure_given : end]
        self.unsure_given = max(self.unsure_given, end)
        return fresh

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, answer) of this piece, as far as can be told yet."""
        text = self.held + text
        self.held = ""
        reasoning, answer = "", ""
        while text:
            if self.state == "start":
                stripped = text.lstrip()
                if not stripped:
                    self.held = text
                    return reasoning, answer
                if stripped.startswith(OPEN):
                    self.state, text = "thinking", stripped[len(OPEN) :]
                elif OPEN.startswith(stripped):
                    self.held = text
                    return reasoning, answer
                else:
                    self.state = "answering" if self.plain else "undecided"
            elif self.state in ("thinking", "undecided"):
                head, closed, tail = text.partition(CLOSE)
                if closed:
                    self.saw_bare_close = self.saw_bare_close or self.state == "undecided"
                    reasoning += head
                    self.state, text = "closed", tail
                    continue
                if self.state == "undecided":
                    self.held = text  # all of it: reasoning if a `</think>` comes
                    return reasoning, answer
                keep = _partial_suffix(text, CLOSE)
                reasoning += text[: len(text) - keep]
                self.held = text[len(text) - keep :]
                return reasoning, answer
            elif self.state == "closed":
                text = text.lstrip()
                if text:
                    self.state = "answering"
            else:
                if self.plain and CLOSE in text:
                    # A model known to be plain closed a think block after all: what is
                    # left of it is reasoning, the rest the answer, and the next reply is
                    # held back until it is known.
                    head, _, text = text.partition(CLOSE)
                    reasoning += head
                    self.saw_bare_close = self.late_close = True
                    text = text.lstrip()
                    continue
                keep = _partial_suffix(text, CLOSE) if self.plain else 0
                answer += text[: len(text) - keep]
                self.held = text[len(text) - keep :]
                self.saw_answer = self.saw_answer or bool(answer.strip())
                return reasoning, answer
        return reasoning, answer

    def flush(self) -> tuple[str, str]:
        """Whatever was held back, once the stream has ended."""
        held, self.held = self.held, ""
        if self.state == "thinking":
            return held, ""
        if self.state == "undecided":
            self.state = "answering"  # no `</think>` came: it was all answer
        self.saw_answer = self.saw_answer or bool(held.strip())
        return "", held


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a whole reply, by the same rules as the streamed splitter."""
    splitter = ThinkSplitter()
    thought, answer = splitter.feed(text)
    more_thought, more_answer = splitter.flush()
    thought, answer = thought + more_thought, answer + more_answer
    if not thought and splitter.state == "answering" and not splitter.saw_bare_close:
        return "", text  # no tag: the text as it was, spaces and all
    return thought.strip(), answer


def _partial_suffix(text: str, tag: str) -> int:
    """How many characters at the end of text could begin tag."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
