"""The inbox as a stream of changes (`GET /api/admin/inbox`): an `inbox` event with what
waits now whenever that changes, so the page follows the server without a Refresh.

A change here (a run starting or ending, `Runs.changed`) is seen at once, even one made while
the stream reads the list: the stream takes the change count before it reads and reads again
at once when the count moved meanwhile (issue 32: such a change waited for the next poll, up
to 5 s). One made elsewhere (the terminal, another server on the same store) is seen within
POLL_SECONDS, by reading the threads again. A comment line keeps a quiet stream alive; the
stream ends when the server stops.

FSAGENT_TEST_INBOX_PAUSE (tests only) names a folder with two FIFOs, `paused` and `go`: after
each read of the list the stream writes `paused inbox read` to `paused` and waits for `go`, so
a test can make a change at exactly that point (tests/web/test_inbox_review_browser.py).

    event: inbox   data: {"waiting": N, "threads": [{"thread", "kind", "since", "calls"}]}
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from core.threads.threads import ThreadView
from mcp_servers import race_hook
from web.events import encode
from web.runs import KEEP_ALIVE, Runs

POLL_SECONDS = float(os.environ.get("FSAGENT_INBOX_POLL") or 5)
PAUSE_ENV = "FSAGENT_TEST_INBOX_PAUSE"
# The MCP server's pause between a check and an act, the same two FIFOs and the same lines
# (tests/race_pause.py drives both), opened at the first pause and held.
_hook: race_hook.Hook | None = None


async def paused_after_read() -> None:
    """The test's pause between reading the list and waiting for a change; unset, nothing."""
    global _hook
    folder = os.environ.get(PAUSE_ENV)
    if folder:
        _hook = _hook or race_hook.Hook(folder)
        await asyncio.to_thread(_hook.pause, "inbox", "read")  # the server serves on meanwhile


def state(views: list[ThreadView]) -> dict[str, Any]:
    threads = [
        {
            "thread": view.name,
            "kind": view.kind or "approval",
            "since": view.last_activity,
            "calls": [call.get("id") for call in view.waiting],
        }
        for view in views
    ]
    return {"waiting": len(threads), "threads": threads}


async def inbox_events(
    runs: Runs, waiting: Callable[[], Awaitable[list[ThreadView]]]
) -> AsyncIterator[bytes]:
    last: dict[str, Any] | None = None
    number = 0
    quiet = 0.0
    while not runs.stopping:
        seen = runs.generation  # before the read: a change made during it moves the count
        now = state(await waiting())
        await paused_after_read()
        if now != last:
            last = now
            number += 1
            yield encode(("inbox", now), number)
            quiet = 0.0
        elif quiet >= runs.keep_alive_seconds:
            yield KEEP_ALIVE
            quiet = 0.0
        wait = min(POLL_SECONDS, runs.keep_alive_seconds)
        if await runs.wait_for_change(wait, seen):
            continue
        quiet += wait
