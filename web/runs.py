"""The runs this server has going: at most one per thread, each holding its thread only while
it runs.

The terminal holds a thread's lock for its whole session; the server takes it (store.hold)
when a turn or a resume starts and gives it back when that run ends, so a terminal can open
a thread that is idle or waiting here, and a thread open at a terminal is refused here (409,
naming that process). Inside this process a second request for a thread that is running is
refused too: one run per thread, as the core expects.

Each run is a task of its own that puts its frames on a queue; the response reads them. So a
run is cut off the way Ctrl-C cuts one at the terminal, whoever stops it: the client going
away, or SIGTERM (`cut_off_all`). The task then closes the run (`close_cut_off_run`: every
call left without an answer gets one, from the ledger where a write started), reports that,
and gives the thread back idle and consistent.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from core.error_lines import describe_error
from core.session import ThreadSession
from core.threads.threads import INTERRUPTED
from store.base import Store
from store.errors import ThreadBusy
from web.auth import Refused
from web.events import CUT_OFF, Frame, encode, result_frame, status_of

_END: Frame = ("", {})
CLOSE_ATTEMPTS = 5
SETTLE_SECONDS = 30  # a decision's checks read the thread; past this, say it runs
# Shortened by the tests (FSAGENT_SSE_KEEPALIVE) to see one without waiting.
KEEP_ALIVE_SECONDS = float(os.environ.get("FSAGENT_SSE_KEEPALIVE") or 15)
KEEP_ALIVE = b": keep-alive\n\n"


@dataclass
class Run:
    thread: str
    frames: asyncio.Queue[Frame] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    started: bool = False
    cut_off_by: str | None = None  # why it was cut off, once it was

    def cut_off(self, why: str) -> None:
        if self.task is None or self.task.done() or self.cut_off_by is not None:
            return
        self.cut_off_by = why
        # A task cancelled before its first step would never run its cleanup; one that has
        # not started sees `cut_off_by` when it does.
        if self.started:
            self.task.cancel()

    async def stream(self) -> AsyncIterator[bytes]:
        """The frames as server-sent events, numbered (`id:`), until `done`; a comment line
        while nothing comes for KEEP_ALIVE_SECONDS (the model thinking, a slow tool), so a
        proxy or the browser does not take the quiet for a dead connection. A client that
        goes away cuts the run off."""
        number = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(KEEP_ALIVE_SECONDS):
                        frame = await self.frames.get()
                except TimeoutError:
                    yield KEEP_ALIVE
                    continue
                if frame is _END:
                    break
                number += 1
                yield encode(frame, number)
        finally:
            self.cut_off("the client went away")

    async def collect(self) -> list[Frame]:
        """Every frame, once the run has ended."""
        collected = []
        try:
            while (frame := await self.frames.get()) is not _END:
                collected.append(frame)
        finally:
            self.cut_off("the client went away")
        return collected


async def close_for_good(session: ThreadSession, why: str) -> list[Any]:
    """Close a cut-off run until the thread reads idle. A checkpoint langgraph was still
    writing when the run was cancelled (its background put) can land after the first close
    and leave the thread due to run a step again, which its next message would re-run."""
    results = []
    for attempt in range(CLOSE_ATTEMPTS):
        results += await session.close_cut_off_run(why)
        view = await session.view()
        if view is not None and view.status != INTERRUPTED:
            break  # (none yet: its first checkpoint may still be landing)
        await asyncio.sleep(0.05 * (attempt + 1))  # let the late write land, then close again
    return results


class Claim:
    """A thread taken for one run: this process's slot and the store's lock."""

    def __init__(self, runs: Runs, thread: str, hold: AbstractAsyncContextManager[None]) -> None:
        self.runs = runs
        self.thread = thread
        self.hold = hold

    async def release(self) -> None:
        try:
            await self.hold.__aexit__(None, None, None)
        finally:
            self.runs.active.pop(self.thread, None)
            self.runs.decided.pop(self.thread, None)
            self.runs.settle(self.thread)


class Runs:
    def __init__(self, store: Store, *, verbose: bool = False) -> None:
        self.store = store
        self.verbose = verbose
        self.active: dict[str, Run | None] = {}  # None: claimed, its run not started yet
        # Threads whose batch was decided here, while its run goes on: "admin at T".
        self.decided: dict[str, str] = {}
        # Threads a decision request holds while it checks the body: set once it is accepted
        # (`decided`) or refused, so a racing second request can say which.
        self.settled: dict[str, asyncio.Event] = {}
        self.keep_alive_seconds = KEEP_ALIVE_SECONDS
        self._change = asyncio.Event()  # set when a run starts or ends, for the inbox stream
        # Counts the changes: a reader takes it before it reads and hands it back to
        # `wait_for_change`, so a change made while it read is not waited for (issue 32).
        self.generation = 0
        self.stopping: str | None = None

    def decide(self, thread: str, by: str) -> None:
        self.decided[thread] = by
        self.settle(thread)

    def settle(self, thread: str) -> None:
        event = self.settled.pop(thread, None)
        if event is not None:
            event.set()

    async def decision_settled(self, thread: str) -> str | None:
        """Who decided `thread` here ("admin at T"), once the decision holding it settles;
        None when none was (a refused body, or another kind of run)."""
        event = self.settled.get(thread)
        if event is not None:
            try:
                async with asyncio.timeout(SETTLE_SECONDS):
                    await event.wait()
            except TimeoutError:
                return None
        return self.decided.get(thread)

    def changed(self) -> None:
        self.generation += 1
        self._change.set()
        self._change = asyncio.Event()

    async def wait_for_change(self, seconds: float, seen: int | None = None) -> bool:
        """Whether a run started or ended within `seconds`, or since `generation` was `seen`
        (then at once: that change came while the caller read, and its event is gone)."""
        if seen is not None and seen != self.generation:
            return True
        try:
            async with asyncio.timeout(seconds):
                await self._change.wait()
        except TimeoutError:
            return False
        return True

    async def claim(self, thread: str, *, deciding: bool = False) -> Claim:
        """Take `thread` for a run; Refused (409) when it runs here or is open elsewhere."""
        if self.stopping:
            raise Refused(503, f"the server is stopping ({self.stopping}); try again later")
        if thread in self.active:
            raise Refused(
                409,
                f"thread '{thread}' is running in this server (pid {os.getpid()}); wait for "
                "its run to finish",
            )
        self.active[thread] = None  # before any await: a second request sees it at once
        if deciding:
            self.settled[thread] = asyncio.Event()
        hold = self.store.hold(thread)
        try:
            await hold.__aenter__()
        except ThreadBusy as busy:
            self.active.pop(thread, None)
            self.settle(thread)
            raise Refused(409, str(busy)) from None
        except BaseException:
            self.active.pop(thread, None)
            self.settle(thread)
            raise
        return Claim(self, thread, hold)

    def start(self, claim: Claim, session: ThreadSession, frames: AsyncIterator[Frame]) -> Run:
        run = Run(claim.thread)
        self.active[claim.thread] = run
        run.task = asyncio.create_task(self._run(run, claim, session, frames))
        self.changed()
        return run

    async def _run(
        self, run: Run, claim: Claim, session: ThreadSession, frames: AsyncIterator[Frame]
    ) -> None:
        sent: list[Frame] = []

        def put(kind: str, data: dict[str, Any]) -> None:
            sent.append((kind, data))
            run.frames.put_nowait((kind, data))

        run.started = True
        status = None
        try:
            if run.cut_off_by:
                raise asyncio.CancelledError
            async for kind, data in frames:
                put(kind, data)
        except asyncio.CancelledError:
            status = CUT_OFF
            why = f"the run was cut off ({run.cut_off_by or 'cancelled'})"
            try:
                for result in await close_for_good(session, why):
                    put(*result_frame(result))
            except Exception as error:  # the thread stays interrupted; opening it finishes it
                put("error", {"text": f"closing the cut-off run failed: {error}"})
            put("error", {"text": f"{why}: what finished is kept; the thread takes a new message"})
        except Exception as error:  # raised after a fatal Failed (--verbose), or a bug
            if self.verbose:
                traceback.print_exc(file=sys.stderr)
            put("error", {"text": describe_error(error, session.base_url)})
        finally:
            try:
                await claim.release()
            finally:
                put("done", {"thread": run.thread, "status": status or status_of(sent)})
                run.frames.put_nowait(_END)
                self.changed()

    def cut_off_all(self, why: str) -> None:
        """Cut off every run (SIGTERM): each closes its thread and ends its response."""
        self.stopping = self.stopping or why
        self.changed()  # the inbox streams end
        for run in list(self.active.values()):
            if run is not None:
                run.cut_off(why)

    async def shutdown(self, why: str) -> None:
        """Cut off what still runs and wait until every thread is given back."""
        self.cut_off_all(why)
        tasks = [run.task for run in self.active.values() if run is not None and run.task]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
