"""Tools run off the event loop, each within a time budget, and stop when cancelled.

FastMCP calls a plain function on the event loop, so one slow call (a huge tree, a slow disk)
would keep the server from answering anything else, pings included. Each tool is registered as
an async wrapper that runs the function in a worker thread, so the loop keeps answering other
requests, and MCP cancellation (`notifications/cancelled`) reaches the work through its budget.

A call's work checks its budget as it goes (see `budget.py`) and stops itself with a clear
error at the deadline. If it does not get back within a short grace after that (a syscall that
blocks), the call is answered with a timeout anyway and the thread is left to finish alone.

At most MAX_RUNNING calls work at once, and a call holds its slot until its thread has really
returned, abandoned or not: an abandoned call that still works is still using a core and
memory. A call that finds every slot held waits for one within its own budget; when the slots
are held by abandoned calls, or none frees in time, it is answered `busy:` at once, never left
to time out on work that did not start.

A call the client cancels (`cancels.py`: the transport answers it, never the SDK) stops the
same way as one out of time: its thread is told through its budget and left to stop, holding
its slot until it has.

A slot is given back whatever ends its call. A cancel (or the budget) can end the wait for the
thread before the thread has begun the work: anyio checks for cancellation before it hands the
function to a worker, and a worker skips a function whose caller is gone. That thread never
returns from work it never began, so the slot was never given back: a storm of cancels as calls
start left every slot taken for good (issue 40). So the slot says whether its work began
(`Slot.begin`, in the thread) or never will (`Slot.never_begins`, on the loop), one or the
other, under a lock: the loop gives back the slot of work that never began, the thread that of
work it ran. With --verbose, each change of the count is logged (`tool slots: N of 4 taken`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers import race_hook
from mcp_servers.budget import CallBudget, CallStopped
from mcp_servers.cancels import Cancels, current_request_id

logger = logging.getLogger("fsagent.filesystem")

DEFAULT_CALL_TIMEOUT = 30.0  # seconds a call may take, unless --call-timeout says otherwise
GRACE_SECONDS = 2.0  # how long after its deadline a call gets to stop itself
MAX_RUNNING = 4  # tool calls running at once; more wait their turn (memory stays bounded)


class Working:
    """How many calls' work is running on a worker thread now, in this process: the server's
    exit waits for their threads (filesystem.py) and says so when there are any; anyio's own
    idle workers, which end with the loop, are not calls."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def change(self, by: int) -> None:
        with self.lock:
            self.count += by


WORKING = Working()


@dataclass
class Slot:
    """One call's hold on a slot: given back when its thread returns, or by the loop when its
    thread never began the work."""

    released: bool = False
    abandoned: bool = False
    began: bool = False
    dropped: bool = False  # the loop gave it back before the work began: never to begin
    lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self) -> bool:
        """In the worker thread, before the work: False when the loop has given the slot
        back already (the call was cancelled or timed out first), so the work must not run."""
        with self.lock:
            if self.dropped:
                return False
            self.began = True
            return True

    def never_begins(self) -> bool:
        """On the loop, the call ended: True when its work had not begun, and now never
        will (the caller gives the slot back); False when its thread runs it."""
        with self.lock:
            if self.began:
                return False
            self.dropped = True
            return True


class ToolRunner:
    """Runs tool functions in worker threads, each call with its own budget."""

    def __init__(
        self,
        seconds: float = DEFAULT_CALL_TIMEOUT,
        max_running: int = MAX_RUNNING,
        cancels: Cancels | None = None,
    ):
        self.seconds = seconds
        self.cancels = cancels or Cancels()
        self.max_running = max_running
        self.slots = anyio.Semaphore(max_running)
        self.abandoned = 0  # calls answered already whose thread still works

    def wrap(self, name: str, work: Callable[..., str]) -> Callable[..., Any]:
        """An async tool with `work`'s signature (FastMCP reads it) that runs `work` here."""

        @functools.wraps(work)
        async def run_off_the_loop(**arguments: Any) -> str:
            return await self.run(name, work, arguments)

        return run_off_the_loop

    def busy(self, name: str) -> ToolError:
        stopping = f"; {self.abandoned} of them timed out or cancelled, still stopping"
        return ToolError(
            f"busy: {name} was not started: all {self.max_running} tool slots are taken by "
            f"earlier calls{stopping if self.abandoned else ''}; try again in a few seconds"
        )

    def release(self, name: str, slot: Slot) -> None:
        """On the event loop: the thread of `slot` has returned, or never began."""
        slot.released = True
        if slot.abandoned:
            self.abandoned -= 1
        self.slots.release()
        self.log_slots(name, "given back")

    def give_up(self, name: str, slot: Slot) -> None:
        """On the event loop: the call ended before its thread returned. Work that never
        began gives its slot back now; work that runs keeps it until its thread returns."""
        if slot.never_begins():
            self.release(name, slot)
        elif not slot.released and not slot.abandoned:
            slot.abandoned = True
            self.abandoned += 1
            self.log_slots(name, "left to stop")

    def log_slots(self, name: str, event: str) -> None:
        """The count the tests watch (with --verbose), logged in the loop's order of events:
        how many slots are taken now, and which call's slot changed how."""
        taken = self.max_running - self.slots.value
        logger.info(
            "tool slots: %d of %d taken, %d of them stopping (%s: %s)",
            taken,
            self.max_running,
            self.abandoned,
            name,
            event,
        )

    async def run(self, name: str, work: Callable[..., str], arguments: dict[str, Any]) -> str:
        with self.cancels.watch(current_request_id()):
            return await self.run_in_a_slot(name, work, arguments)
        # The client cancelled it (the transport has answered it already).
        raise CallStopped(f"cancelled: {name} was cancelled by the client")

    async def run_in_a_slot(
        self, name: str, work: Callable[..., str], arguments: dict[str, Any]
    ) -> str:
        budget = CallBudget(name, self.seconds)
        if self.slots.value == 0 and self.abandoned:
            raise self.busy(name)
        slot: Slot | None = None
        with anyio.move_on_after(self.seconds):
            await self.slots.acquire()
            slot = Slot()
        if slot is None:
            raise self.busy(name)
        self.log_slots(name, "taken")

        # The release is handed to the loop and not waited for: a worker thread that waited
        # (anyio.from_thread.run_sync) would hang for good when the loop stops between the
        # hand-off and its run, as at a client's disconnect mid-call, and the interpreter
        # waits on its worker threads at exit, so the server never ended.
        loop = asyncio.get_running_loop()

        def run_then_release() -> str:
            # A test can hold the thread here, before it claims the slot (race_hook.py).
            race_hook.pause_in_thread(name)
            if not slot.begin():  # the loop answered the call and gave the slot back
                logger.info("tool %s was not started: its call ended first", name)
                raise CallStopped(f"cancelled: {name} was stopped before it started")
            WORKING.change(+1)
            try:
                return budget.run(work, arguments)
            finally:
                WORKING.change(-1)
                # A test can hold the thread here, before its hand-off, and let it go with the
                # loop not running, as after a disconnect (race_hook.py); unset, nothing.
                with race_hook.held_before_release(name):
                    with suppress(RuntimeError):  # the loop is closed: the server is stopping
                        loop.call_soon_threadsafe(self.release, name, slot)

        try:
            with anyio.move_on_after(self.seconds + GRACE_SECONDS):
                # A test can hold the call here, its slot taken and its thread not asked for
                # yet, while the loop reads on (race_hook.py): a cancel read now lands where
                # anyio's own check before the thread starts can meet it.
                await race_hook.pause_on_the_loop(name)
                answer = await anyio.to_thread.run_sync(run_then_release, abandon_on_cancel=True)
                return valid_utf8(name, answer)
        except anyio.get_cancelled_exc_class():
            budget.cancel()  # cancelled, or the server stops: the thread stops at its next check
            self.give_up(name, slot)
            logger.info("tool %s cancelled", name)
            raise
        budget.cancel()
        self.give_up(name, slot)
        logger.warning("tool %s did not stop within its budget; left to finish", name)
        raise CallStopped(
            f"timeout: {name} did not answer within its {self.seconds:g} s budget and was "
            "abandoned; it may still complete, so check its effect before retrying"
        )


def valid_utf8(name: str, answer: str) -> str:
    """The answer as it can go out: names are escaped (names.py), so this only guards."""
    try:
        answer.encode("utf-8")
    except UnicodeEncodeError:
        logger.warning("tool %s answered text that is not UTF-8; escaped it", name)
        return answer.encode("utf-8", "backslashreplace").decode("utf-8")
    return answer
