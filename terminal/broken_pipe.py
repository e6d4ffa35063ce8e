"""Output into a pipe whose reader has gone (`fsagent threads | head -1`): quiet, as Unix tools are.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError wherever it happens,
even in the middle of a resumed run (`fsagent approve NAME | head -2`), which would cut off a
decision already taken. Standard output is wrapped once, at start: the first broken write
points the descriptor at /dev/null (as Python's documentation on SIGPIPE advises) and the
command carries on, its output dropped, to finish what it was doing.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class QuietPipe:
    """Standard output that drops what it cannot write once its reader is gone."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()
            self._stream.flush()  # what was held goes to /dev/null now

    def _silence(self) -> None:
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def quiet_on_broken_pipe() -> None:
    """Wrap standard output; later writes to a closed pipe are dropped, never raised."""
    # A terminal never breaks like a pipe, and its line editor wants the real stream.
    if not isinstance(sys.stdout, QuietPipe) and not sys.stdout.isatty():
        sys.stdout = QuietPipe(sys.stdout)  # typeshed types sys.stdout as TextIO | Any
