"""Each call's time budget and its cancellation, checked by the work itself.

A tool runs in a worker thread (see `tool_runner.py`), and a thread cannot be stopped from the
outside. So the work checks in: walks check once per entry, reads, hashes, copies and greps
once per block, and a write checks once more just before its change becomes visible. A check
past the deadline, or after the client cancelled the call, raises, so the call ends with a
clear error and the thread is free again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from mcp.server.fastmcp.exceptions import ToolError

T = TypeVar("T")


class CallStopped(ToolError):
    """The call stopped before it finished: out of time, or cancelled by the client."""


class CallBudget:
    """The deadline of one tool call and whether its client cancelled it."""

    def __init__(self, tool: str, seconds: float) -> None:
        self.tool = tool
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.cancelled = threading.Event()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise CallStopped(f"cancelled: {self.tool} was cancelled by the client and stopped")
        if time.monotonic() > self.deadline:
            raise CallStopped(
                f"timeout: {self.tool} stopped at its {self.seconds:g} s budget before it "
                "finished; narrow the path, glob or pattern, or work on smaller files"
            )

    def cancel(self) -> None:
        self.cancelled.set()

    def run(self, work: Callable[..., T], arguments: dict[str, Any]) -> T:
        """Run `work` in this thread with this budget as the current one."""
        token = current.set(self)
        try:
            return work(**arguments)
        finally:
            current.reset(token)


current: ContextVar[CallBudget | None] = ContextVar("fsagent_call_budget", default=None)


@contextmanager
def unbounded() -> Iterator[None]:
    """Run a clean-up to its end, even past the deadline (it undoes a call's partial work)."""
    token = current.set(None)
    try:
        yield
    finally:
        current.reset(token)


def check_budget() -> None:
    """Raise CallStopped if the running call is out of time or cancelled (no-op outside one)."""
    budget = current.get()
    if budget is not None:
        budget.check()
