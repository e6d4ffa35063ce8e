"""What Ctrl-C does, decided by what is going on when it comes.

At a terminal Ctrl-C is SIGINT, except while prompt_toolkit reads a line (the terminal is in
raw mode then, and Ctrl-C is a key that prompt_toolkit turns into KeyboardInterrupt).

- A blocking read of a line (a pipe, or `input()` on a plain terminal): the read is cut off
  with KeyboardInterrupt, which `Terminal.ask` turns into `Interrupted`.
- A run, or a review with its previews: that task is cancelled; its owner closes it.
- Closing a cut-off run: that must finish, or the thread would be left half-answered. The
  Ctrl-C is kept, and the session quits once the closing is done.
- Anything else (the banner being read, a /command): the session's own task is cancelled,
  and `run_session` ends with exit code 130.

KeyboardInterrupt is never raised into the event loop itself: raised inside a task it
escapes the loop, and through the MCP client's task groups it arrives wrapped in an
exception group, which is where the tracebacks at an approval came from.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """Ctrl-C at a prompt: what was asked is left unanswered."""


class CtrlC:
    """The SIGINT handler of a session, and the state it decides by."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.main: asyncio.Task[Any] | None = None
        self.task: asyncio.Task[Any] | None = None  # the run or review Ctrl-C cancels
        self.reading = False  # a blocking read of a line is under way
        self.shielded = False  # a cut-off run is being closed
        self.quit = False  # Ctrl-C came while shielded: quit once that is done
        self.main_cancelled = False
        self._previous: Any = None

    @contextmanager
    def installed(self) -> Iterator[CtrlC]:
        """Handle SIGINT for the session running in the current task."""
        self.loop = asyncio.get_running_loop()
        self.main = asyncio.current_task()
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.reading:
            raise KeyboardInterrupt  # cuts off input() or readline(); ask() catches it
        if self.shielded:
            self.quit = True
            return
        assert self.loop is not None
        if self.task is not None and not self.task.done():
            self.loop.call_soon_threadsafe(self.task.cancel)
        elif self.main is not None and not self.main.done():
            self.main_cancelled = True
            self.loop.call_soon_threadsafe(self.main.cancel)
        else:
            raise KeyboardInterrupt

    @contextmanager
    def blocking_read(self) -> Iterator[None]:
        self.reading = True
        try:
            yield
        finally:
            self.reading = False

    @contextmanager
    def shield(self) -> Iterator[None]:
        """Work a Ctrl-C must not cut off; one that comes meanwhile asks to quit after."""
        self.shielded = True
        try:
            yield
        finally:
            self.shielded = False

    async def cancellable(self, work: Awaitable[T]) -> T:
        """Run `work` as the task Ctrl-C cancels; Interrupted if it did."""
        task = asyncio.ensure_future(work)
        outer, self.task = self.task, task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the caller itself is being cancelled, not just this work
            raise Interrupted from None
        finally:
            self.task = outer
