"""The terminal a person at a TTY gets: lines read with line editing and history
(terminal.line_editor), a status line while the agent works, and the model's answers
rendered as Markdown (terminal.live).

Built by cli/screen.py only when both stdin and stdout are terminals and nothing asks for plain
text (`--plain`, TERM=dumb; NO_COLOR only takes the colour away), so prompt_toolkit and rich
are never imported for `--help`, a pipe or a regression run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prompt_toolkit import print_formatted_text
from prompt_toolkit.formatted_text import ANSI
from rich.console import Console

from core.text import visible
from terminal.console import Terminal, colour_wanted
from terminal.interrupts import Interrupted
from terminal.line_editor import LineEditor, history_path, open_history
from terminal.live import LiveArea
from terminal.typeahead import before_question


@dataclass
class TtyTerminal(Terminal):
    commands: Mapping[str, str] = field(default_factory=dict)  # `/name` -> help, to complete

    def __post_init__(self) -> None:
        self.piped = False
        self.color = colour_wanted()  # the diff's colours; NO_COLOR leaves the rest
        history, self.history_problem = open_history(history_path())
        self.editor = LineEditor(self.commands, history)
        self.console = Console(file=self.out, highlight=False, emoji=False, markup=False)
        self.live = LiveArea(self.console)
        self.working_depth = 0
        self.reading = False  # a prompt is being read: lines go above it
        self.reasoning = ""  # the model's thinking not yet printed: the end of its last line

    # -- lines out -------------------------------------------------------------------------------

    def write_line(self, shown: str) -> None:
        if self.working_depth:
            self.live.print(shown)
        elif self.reading:
            # A line while the person types (the model's line after an early prompt,
            # terminal.early_prompt): printed above the prompt, which is drawn again below.
            print_formatted_text(ANSI(shown), file=self.out)
        else:
            super().write_line(shown)

    def stream(self, text: str) -> None:
        if not self.working_depth:
            super().stream(text)  # model text outside a run: never, but never lost either
            return
        self.end_reasoning()
        self.streaming = True
        # Made visible before rich renders the Markdown: rich passes an ESC through.
        self.live.add_answer(visible(text))

    def stream_unsure(self, text: str) -> None:
        """Model text that may yet be reasoning, shown dimmed in the live area for now (so a
        first reply streams at once), and taken back when it is known."""
        if not self.working_depth:
            return
        self.end_reasoning()
        self.live.add_unsure(visible(text))

    def take_back_unsure(self) -> None:
        self.live.drop_unsure()

    def stream_reasoning(self, text: str) -> None:
        """The model's thinking, dimmed above the live area, a whole line at a time."""
        if not self.working_depth:
            super().stream_reasoning(text)
            return
        if not self.thinking:
            self.end_stream()
            self.thinking = True
            text = "thinking> " + text
        text = visible(text)
        *lines, self.reasoning = (self.reasoning + text).split("\n")
        for line in lines:
            self.live.print(self.dim(line))
        self.live.status.start("thinking")

    def end_reasoning(self) -> None:
        if self.thinking and self.working_depth:
            if self.reasoning:
                self.live.print(self.dim(self.reasoning))
            self.reasoning = ""
            self.thinking = False

    def end_stream(self) -> None:
        self.end_reasoning()
        if self.working_depth and self.streaming:
            self.live.end_answer()
            self.streaming = False
        super().end_stream()

    def answer(self, text: str) -> None:
        if not self.working_depth:
            super().answer(text)
            return
        self.end_stream()
        self.live.add_answer(visible(text))
        self.live.end_answer()

    @contextmanager
    def working(self, activity: str) -> Iterator[None]:
        self.working_depth += 1
        if self.working_depth == 1:
            self.live.start(activity)
        else:
            self.live.status.start(activity)
        try:
            yield
        finally:
            self.working_depth -= 1
            if not self.working_depth:
                self.streaming = False
                self.live.stop()

    def activity(self, text: str) -> None:
        self.live.status.start(visible(text, keep=""))  # a tool's name is the model's

    # -- lines in --------------------------------------------------------------------------------

    async def prompt(self, text: str) -> str | None:
        if self.history_problem:
            self.say(f"note: {self.history_problem}")
            self.history_problem = None
        return await self._read(self.editor.request, visible(text))

    async def ask(self, question: str) -> str | None:
        # Dropped as the answer's prompt starts, right before it is drawn: the typed-ahead
        # keys are those in the terminal and those the last prompt read past its Enter.
        return await self._read(self.editor.answer, visible(question), self.drop_typed_ahead)

    async def follow_up(self, question: str) -> str | None:
        return await self._read(self.editor.answer, visible(question))

    def drop_typed_ahead(self) -> None:
        before_question(self.stdin, self.say, held=self.editor.drop_held)

    async def _read(
        self,
        read: Callable[[str, Callable[[], None] | None], Awaitable[str]],
        text: str,
        before: Callable[[], None] | None = None,
    ) -> str | None:
        self.end_stream()
        self.reading = True
        try:
            return await read(text, before)
        except KeyboardInterrupt:
            raise Interrupted from None
        except EOFError:
            return None
        finally:
            self.reading = False
