"""The person's terminal: reading their lines (a TTY or a pipe), writing what happened, and
recording transcript events."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Terminal:
    """Reads the person's lines (a TTY or a pipe) and writes what happened."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    piped: bool = field(default_factory=lambda: not sys.stdin.isatty())
    streaming: bool = False  # in the middle of a line of model text
    thinking: bool = False  # in the middle of the model's reasoning
    color: bool = field(
        default_factory=lambda: sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    # Where `event()` records what happened, for --transcript; None records nothing.
    transcript: TextIO | None = None
    redactions: list[tuple[str, str]] = field(default_factory=list)

    def event(self, kind: str, **fields: Any) -> None:
        """One transcript event: `prompt`, `route`, `tool_call`, `approval_request`,
        `decision`, `tool_result`, `answer`, `warning` or `error`. Fields hold what a
        regression compares, so no timestamps and no ids."""
        if self.transcript is None:
            return
        line = json.dumps({"event": kind, **fields}, ensure_ascii=False, sort_keys=True)
        for path, name in self.redactions:
            line = line.replace(json.dumps(path)[1:-1], name)
        self.transcript.write(line + "\n")
        self.transcript.flush()

    def say(self, text: str = "") -> None:
        self.end_stream()
        print(text, file=self.out, flush=True)

    def stream(self, text: str) -> None:
        if self.thinking:
            self.end_stream()
        if not self.streaming:
            self.out.write("agent> ")
            self.streaming = True
        self.out.write(text)
        self.out.flush()

    def stream_reasoning(self, text: str) -> None:
        """The model's thinking as it streams: on its own lines, dimmed on a terminal."""
        if not self.thinking:
            self.end_stream()
            self.out.write(self.dim("thinking> "))
            self.streaming = self.thinking = True
        self.out.write(self.dim(text))
        self.out.flush()

    def dim(self, text: str) -> str:
        # Each piece closes its own style, so the terminal is never left dimmed.
        return f"\x1b[2m{text}\x1b[0m" if self.color and text else text

    def end_stream(self) -> None:
        if self.streaming:
            self.out.write("\n")
            self.streaming = self.thinking = False

    def ask(self, prompt: str) -> str | None:
        """One line from the person; None at end of input. A pipe's line is echoed so a
        transcript shows both what was asked and what was answered."""
        self.end_stream()
        if not self.piped:
            try:
                return input(prompt)
            except EOFError:
                self.out.write("\n")
                return None
        line = self.stdin.readline()
        if not line:
            return None
        line = line.rstrip("\r\n")
        print(f"{prompt}{line}", file=self.out, flush=True)
        return line
