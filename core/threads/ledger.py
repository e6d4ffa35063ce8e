"""At most once: the ledger around every write call.

A checkpoint records a position in our code, and that is not enough on its own: a tool that
was running when the process died would run again on resume. Each write call is recorded in
the store before it runs and after it finishes, so a step that runs again returns the
recorded result of a `done` call, and never runs a `started` one a second time: that one may
or may not have changed the file, and the person and the model are told so.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.messages import ToolMessage

from core.approval.approval import tool_message
from core.threads.messages import content_text
from store.base import LedgerRow, Store

# Test hook, read only here: `started` or `done` makes every write step print HOLD_MARKER and
# sleep right after that ledger row is written, so a test can SIGKILL it there.
TEST_HOLD_ENV = "FSAGENT_TEST_HOLD_WRITE"
HOLD_MARKER = "[test hook] holding the write after its ledger row is"


async def run_write_once(
    store: Store,
    thread: str,
    message_id: str,
    call: Mapping[str, Any],
    args: Any,
    run: Callable[[], Awaitable[ToolMessage]],
    keep: Callable[[], Awaitable[None]] | None = None,
) -> ToolMessage:
    """Run a write call unless the ledger says it ran (or may have) already. `keep` runs
    first, before the claim, only for a call that has not started: it keeps what the write
    will replace (core.changes.undo_capture), so the record is stored before the file changes."""
    row = await store.ledger_row(thread, message_id, call["id"])
    if row is None and keep is not None:
        await keep()
    if row is None and not await store.ledger_claim(
        thread, message_id, call["id"], call["name"], args
    ):
        # Another process claimed it between our look and our claim.
        row = await store.ledger_row(thread, message_id, call["id"])
    if row is not None:
        return recorded_answer(row, call)
    await hold_for_test("started")
    message = await run()
    failed = message.status == "error"
    await store.ledger_done(thread, message_id, call["id"], content_text(message.content), failed)
    await hold_for_test("done")
    return message


def recorded_answer(row: LedgerRow, call: Mapping[str, Any]) -> ToolMessage:
    """What a call the ledger has seen answers, without running it again."""
    if row.status == "done":
        return tool_message(call["id"], row.result or "", error=row.failed)
    return tool_message(call["id"], outcome_unknown_text(call), error=True)


def outcome_unknown_text(call: Mapping[str, Any]) -> str:
    return (
        f"Outcome unknown: {call['name']} was started, but fsagent stopped before it finished, "
        f"so it was not run again. It may or may not have changed {touched_paths(call)}; "
        "check before doing anything else, and tell the person."
    )


def touched_paths(call: Mapping[str, Any]) -> str:
    args = call.get("args") or {}
    paths = [str(args[key]) for key in ("path", "source", "destination") if args.get(key)]
    return " and ".join(paths) or "the files it names"


async def hold_for_test(row: str) -> None:
    """The crash tests' hook (FSAGENT_TEST_HOLD_WRITE); nothing happens unless it is set."""
    if os.environ.get(TEST_HOLD_ENV) == row:
        print(f"{HOLD_MARKER} {row!r}", flush=True)
        await asyncio.sleep(3600)
