"""The person's terminal: reading their lines (a TTY or a pipe), writing what happened, and
recording transcript events.

`Terminal` is the plain one: piped input, `--plain`, TERM=dumb, or an output that is not a
terminal. It writes the model's printable text byte for byte and no escape code unless
`color` is on (the diff of a review, on a terminal, without NO_COLOR). Whatever it writes,
and whatever it records in the transcript, first goes through `core.text.visible`: nothing
from a file, a tool result, the model or a thread name reaches the screen raw (an ESC, a
bidi control).
`terminal.tty.TtyTerminal` is the one a person at a terminal gets: line editing, history, a
status line and Markdown answers (NO_COLOR takes only the colour away: no-color.org asks that
no colour be added, nothing more).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from core.text import json_visible, visible
from terminal.interrupts import CtrlC, Interrupted
from terminal.typeahead import before_question

# What a session's screen can be: "tty" line editing, status line and Markdown; "color" plain
# text with a coloured diff (piped input shown on a terminal); "plain" no escape code at all.
ScreenKind = Literal["tty", "color", "plain"]


def screen_kind(
    *,
    plain: bool = False,
    environ: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> ScreenKind:
    """Decided once, at start: --plain, TERM=dumb and an output that is not a terminal all
    mean no escape code at all. NO_COLOR is not one of them (see `colour_wanted`)."""
    environ = os.environ if environ is None else environ
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if plain or environ.get("TERM") == "dumb" or not _isatty(stdout):
        return "plain"
    return "tty" if _isatty(stdin) else "color"


def colour_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a screen that may style its text may colour it: not with NO_COLOR set to
    anything but "" (no-color.org: it "prevents the addition of ANSI color", and only that;
    line editing, the status line, bold and dim stay). prompt_toolkit and rich read it too."""
    environ = os.environ if environ is None else environ
    return not environ.get("NO_COLOR")


# A prompt longer than this is a paste: echoed as its size, not line by line.
PASTE_LINES = 20
PASTE_BYTES = 4096


def pasted(text: str) -> str | None:
    """`pasted N lines (M KB)` for a paste too long to echo; None for a prompt."""
    size = len(text.encode("utf-8", "surrogateescape"))
    lines = text.count("\n") + 1
    if lines <= PASTE_LINES and size <= PASTE_BYTES:
        return None
    return f"pasted {lines} line{'s' * (lines != 1)} ({max(1, round(size / 1024))} KB)"


def put(text: object = "", file: TextIO | None = None) -> None:
    """`print` for the commands that print outside a session: the text made visible."""
    print(visible(str(text)), file=file or sys.stdout, flush=True)


def _styled_line(line: str, style: str) -> str:
    text = line.lstrip(" ")
    return f"{line[: len(line) - len(text)]}\x1b[{style}m{text}\x1b[0m" if text else line


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        return False


@dataclass
class Terminal:
    """Reads the person's lines (a TTY or a pipe) and writes what happened."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    piped: bool = field(default_factory=lambda: not sys.stdin.isatty())
    streaming: bool = False  # in the middle of a line of model text
    thinking: bool = False  # in the middle of the model's reasoning
    color: bool = field(default_factory=lambda: screen_kind() != "plain" and colour_wanted())
    # Where `event()` records what happened, for --transcript; None records nothing.
    transcript: TextIO | None = None
    redactions: list[tuple[str, str]] = field(default_factory=list)
    ctrl_c: CtrlC = field(default_factory=CtrlC)

    def event(self, kind: str, **fields: Any) -> None:
        """One transcript event: `prompt`, `route`, `tool_call`, `approval_request`,
        `decision`, `tool_result`, `answer`, `warning` or `error`. Fields hold what a
        regression compares, so no timestamps and no ids."""
        if self.transcript is None:
            return
        line = json.dumps({"event": kind, **fields}, ensure_ascii=False, sort_keys=True)
        for path, name in self.redactions:
            line = line.replace(json.dumps(path)[1:-1], name)
        self.transcript.write(json_visible(line) + "\n")
        self.transcript.flush()

    def say(self, text: str = "", *, style: str | None = None) -> None:
        """Lines made visible; on a screen with colour, each in `style` (an SGR code)."""
        self.end_stream()
        self.write_line(self.styled(visible(text), style))

    def write_line(self, shown: str) -> None:
        """A line already made visible (and styled)."""
        print(shown, file=self.out, flush=True)

    def stream(self, text: str) -> None:
        """A piece of the model's text, written as it came (made visible)."""
        if self.thinking:
            self.end_stream()
        if not self.streaming:
            self.out.write("agent> ")
            self.streaming = True
        self.out.write(visible(text))
        self.out.flush()

    @property
    def watched(self) -> bool:
        """Whether a person reads the output as it comes (a terminal), so a reply is worth
        showing before it is whole; a pipe or a file loses nothing by waiting for it."""
        return _isatty(self.out)

    def stream_unsure(self, text: str) -> None:
        """Model text that may yet be reasoning. Written lines cannot be taken back, so it
        waits here: it comes again once it is known (as reasoning or as the answer)."""

    def take_back_unsure(self) -> None:
        """The unsure text is known for what it is (nothing of it was written here)."""

    def stream_reasoning(self, text: str) -> None:
        """The model's thinking as it streams: on its own lines, dimmed on a terminal."""
        if not self.thinking:
            self.end_stream()
            self.out.write(self.dim("thinking> "))
            self.streaming = self.thinking = True
        self.out.write(self.dim(visible(text)))
        self.out.flush()

    def styled(self, shown: str, style: str | None) -> str:
        # Each line closes its own style, so the terminal is never left coloured and no
        # colour runs on past a line's end. `shown` is visible already: it has no ESC of its
        # own, so the style ends where this line does.
        # A line's indent stays out of it.
        if not style or not self.color:
            return shown
        return "\n".join(_styled_line(line, style) for line in shown.split("\n"))

    def dim(self, shown: str) -> str:
        return self.styled(shown, "2")

    def end_stream(self) -> None:
        if self.streaming:
            self.out.write("\n")
            self.streaming = self.thinking = False

    def answer(self, text: str) -> None:
        """A whole message of ours (the step limit's), not streamed by the model."""
        self.say(f"agent> {text}")

    # -- what is going on: shown only on a TTY -------------------------------------------------

    @contextmanager
    def working(self, activity: str) -> Iterator[None]:
        """While a run or a preview goes on; a TTY shows a status line."""
        yield

    def activity(self, text: str) -> None:
        """What the run is doing now (`thinking`, `running grep`)."""

    # -- lines in --------------------------------------------------------------------------------

    async def prompt(self, text: str) -> str | None:
        """The person's next request; None at end of input. Interrupted on Ctrl-C. What was
        typed ahead stays: a request is not a decision."""
        return await self.read_line(text)

    async def ask(self, question: str) -> str | None:
        """The answer to a question that decides something (an approval, an undo, the
        model's question): only keys typed once it is asked count (terminal.typeahead)."""
        return await self.read_line(question, fresh=True)

    async def follow_up(self, question: str) -> str | None:
        """A line that completes an answer just given (a reason after `n`, a respond's
        text): what was typed on after that answer is kept, since it decides nothing."""
        return await self.read_line(question)

    def drop_typed_ahead(self) -> None:
        """Before a deciding question at a terminal: the keys typed before it dropped, and
        said (a pipe's lines are its answers, in order: nothing is dropped)."""
        before_question(self.stdin, self.say)

    async def read_line(self, question: str, fresh: bool = False) -> str | None:
        """One line from the person; None at end of input; Interrupted on Ctrl-C. A pipe's
        line is echoed so a transcript shows both what was asked and what was answered."""
        self.end_stream()
        if fresh:
            self.drop_typed_ahead()
        try:
            with self.ctrl_c.blocking_read():
                return self._read_line(visible(question))
        except KeyboardInterrupt:
            self.out.write("\n")
            raise Interrupted from None

    def _read_line(self, question: str) -> str | None:
        if not self.piped:
            try:
                return input(question)
            except EOFError:
                self.out.write("\n")
                return None
        line = self.stdin.readline()
        if not line:
            return None
        line = line.rstrip("\r\n")
        print(f"{question}{pasted(line) or line}", file=self.out, flush=True)
        return line
