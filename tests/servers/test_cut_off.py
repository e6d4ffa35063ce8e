"""A run cut off while another server's call ran (core/threads/threads.closing_answer): the
ledger knows it started, so the model is told its outcome is unknown, never that it did not
run. A real SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.threads.threads import closing_answer
from store import open_store


def test_a_cut_off_call_to_another_server_is_not_said_to_have_not_run(tmp_path: Path) -> None:
    call = {"id": "c1", "name": "git__git_commit", "args": {"repo_path": ".", "message": "m"}}

    async def go() -> tuple[str, str]:
        async with open_store(tmp_path / "threads.db") as store:
            never = await closing_answer(store, "t", "ai-1", call, "fsagent stopped")
            assert await store.ledger_claim("t", "ai-1", "c1", call["name"], call["args"])
            started = await closing_answer(store, "t", "ai-1", call, "fsagent stopped")
            return str(never.content), str(started.content)

    never, started = asyncio.run(go())
    assert never.startswith("Cancelled: git__git_commit did not run")
    assert started.startswith("Outcome unknown: git__git_commit was started")
