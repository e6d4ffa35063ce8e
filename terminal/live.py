"""The bottom of a person's terminal while a run goes on, drawn with rich: a status line (a
spinner, what is happening, for how long, and tokens per second while the answer streams)
under the last lines of the answer, which is rendered as Markdown as it comes.

Lines of the answer that can no longer change are printed for good above the live area. Text
that may yet turn out to be reasoning (core.context.reasoning) stays in the live area, dimmed,
until it is known, and is then taken back. The live area itself is transient: when the run
ends it is erased, and the scrollback holds only what was printed, never a spinner.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment, SegmentLines
from rich.spinner import Spinner
from rich.text import Text

ANSWER_PREFIX = "agent> "
LIVE_LINES = 6  # lines of the answer kept live: the ones a new token may still change
MIN_RENDER_SECONDS = 0.08  # between two renders of a streaming answer


class Status:
    """What the status line says: an activity and since when, and the answer's pace."""

    def __init__(self) -> None:
        self.activity = ""
        self.since = time.monotonic()
        self.tokens = 0
        self.first_token = self.last_token = 0.0
        self.spinner = Spinner("dots", style="cyan")

    def start(self, activity: str) -> None:
        if activity != self.activity:
            self.activity = activity
            self.since = time.monotonic()

    def token(self) -> None:
        """A piece of the answer came (servers stream about one token a piece)."""
        now = time.monotonic()
        if not self.tokens:
            self.first_token = now
        self.tokens += 1
        self.last_token = now

    def rate(self) -> float | None:
        seconds = self.last_token - self.first_token
        return (self.tokens - 1) / seconds if self.tokens > 1 and seconds > 0 else None

    def text(self, now: float) -> str:
        parts = [self.activity, f"{now - self.since:.1f}s"]
        rate = self.rate()
        if rate is not None and self.activity == "answering":
            parts.insert(1, f"{rate:.1f} tok/s")
        return " · ".join(parts)

    def __rich__(self) -> RenderableType:
        self.spinner.update(text=Text(self.text(time.monotonic()), style="dim"))
        return self.spinner


class MarkdownAnswer:
    """The model's answer as Markdown, turned into lines under the `agent> ` prefix."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""
        self.printed = 0  # lines printed for good
        self.rendered_at = 0.0
        self.render_seconds = 0.0

    def lines(self) -> list[list[Segment]]:
        width = max(20, self.console.width - len(ANSWER_PREFIX))
        started = time.monotonic()
        markdown = Markdown(self.text, code_theme="ansi_dark", hyperlinks=False)
        options = self.console.options.update(width=width)
        rendered = [trim(line) for line in self.console.render_lines(markdown, options)]
        while rendered and not rendered[-1]:
            rendered.pop()
        self.rendered_at = time.monotonic()
        self.render_seconds = self.rendered_at - started
        return under_prefix(rendered)

    def due(self) -> bool:
        """Re-render no more often than it costs: a long answer takes longer to render."""
        wait = max(MIN_RENDER_SECONDS, 4 * self.render_seconds)
        return time.monotonic() - self.rendered_at >= wait


def under_prefix(lines: list[list[Segment]]) -> list[list[Segment]]:
    """Rendered lines as the answer shows them: `agent> ` before the first, its width of
    spaces before the rest."""
    return [
        [Segment(ANSWER_PREFIX if n == 0 else " " * len(ANSWER_PREFIX)), *line]
        for n, line in enumerate(lines)
    ]


def trim(line: Iterable[Segment]) -> list[Segment]:
    """A rendered line without the padding rich adds after it (plain trailing spaces)."""
    segments = list(line)
    while segments and not segments[-1].style and not segments[-1].text.strip():
        segments.pop()
    if segments and not segments[-1].style:
        last = segments.pop()
        segments.append(Segment(last.text.rstrip(), last.style, last.control))
    return segments


class LiveArea:
    """The status line and the unsettled end of the answer, while a run goes on."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status = Status()
        self.answer: MarkdownAnswer | None = None
        self.tail: list[list[Segment]] = []
        self.unsure = ""  # text that may be reasoning: live only, until it is known
        self.unsure_lines: list[list[Segment]] = []
        self.unsure_drawn = 0  # how much of it unsure_lines show
        self.live = Live(
            console=console,
            transient=True,
            refresh_per_second=12,
            redirect_stdout=False,
            redirect_stderr=False,
            get_renderable=self._renderable,
        )

    def _renderable(self) -> RenderableType:
        if self.unsure_drawn != len(self.unsure):  # also on rich's own refresh: it catches up
            self._draw_unsure()
        return Group(
            SegmentLines(self.tail, new_lines=True),
            SegmentLines(self.unsure_lines, new_lines=True),
            self.status,
        )

    def start(self, activity: str) -> None:
        self.status.start(activity)
        self.live.start(refresh=True)

    def stop(self) -> None:
        self.end_answer()
        if self.unsure:  # cut off before it was known: what was shown stays, as it was
            self.print(ANSWER_PREFIX + self.unsure)
            self.drop_unsure()
        self.live.stop()

    def print(self, text: str) -> None:
        """A line above the live area, for good."""
        self.console.print(Text.from_ansi(text), soft_wrap=True)

    def add_answer(self, text: str) -> None:
        if self.answer is None:
            self.answer = MarkdownAnswer(self.console)
            self.status.tokens = 0
            self.status.start("answering")
        self.answer.text += text
        self.status.token()
        if self.answer.due():
            self._show(self.answer.lines(), final=False)

    def add_unsure(self, text: str) -> None:
        """More text that may be reasoning: its last lines, dimmed, under the `agent> `
        prefix."""
        if not self.unsure:
            self.status.tokens = 0
            self.status.start("answering")
        self.unsure += text
        self.status.token()  # rich's own refresh (12 a second) draws it

    def drop_unsure(self) -> None:
        """The unsure text is known for what it is: it comes again as reasoning or answer."""
        self.unsure, self.unsure_lines, self.unsure_drawn = "", [], 0
        self.live.refresh()

    def _draw_unsure(self) -> None:
        # Only the end can be on screen: render the last lines, not the whole text.
        width = max(20, self.console.width - len(ANSWER_PREFIX))
        unsure = self.unsure
        tail = unsure[-LIVE_LINES * width :].split("\n")[-LIVE_LINES:]
        options = self.console.options.update(width=width)
        rendered = self.console.render_lines(Text("\n".join(tail), style="dim"), options)
        self.unsure_lines = under_prefix([trim(line) for line in rendered[-LIVE_LINES:]])
        self.unsure_drawn = len(unsure)

    def end_answer(self) -> None:
        if self.answer is None:
            return
        self._show(self.answer.lines(), final=True)
        self.answer = None
        self.status.start("thinking")

    def _show(self, lines: list[list[Segment]], final: bool) -> None:
        """Print the lines no token can change any more; keep the rest live."""
        assert self.answer is not None
        settled = len(lines) if final else max(0, len(lines) - LIVE_LINES)
        if settled > self.answer.printed:
            fresh = lines[self.answer.printed : settled]
            self.console.print(SegmentLines(fresh, new_lines=True), end="")
            self.answer.printed = settled
        self.tail = lines[self.answer.printed :] if not final else []
        self.live.refresh()
