"""The inbox as a stream of changes (`GET /api/admin/inbox`): an `inbox` event with what
waits now whenever that changes, so the page follows the server without a Refresh.

A change here (a run starting or ending, `Runs.changed`) is seen at once; one made elsewhere
(the terminal, another server on the same store) within POLL_SECONDS, by reading the threads
again. A comment line keeps a quiet stream alive; the stream ends when the server stops.

    event: inbox   data: {"waiting": N, "threads": [{"thread", "kind", "since", "calls"}]}
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from core.threads.threads import ThreadView
from web.events import encode
from web.runs import KEEP_ALIVE, Runs

POLL_SECONDS = float(os.environ.get("FSAGENT_INBOX_POLL") or 5)


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
        now = state(await waiting())
        if now != last:
            last = now
            number += 1
            yield encode(("inbox", now), number)
            quiet = 0.0
        elif quiet >= runs.keep_alive_seconds:
            yield KEEP_ALIVE
            quiet = 0.0
        wait = min(POLL_SECONDS, runs.keep_alive_seconds)
        if await runs.wait_for_change(wait):
            continue
        quiet += wait
