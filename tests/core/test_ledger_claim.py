"""At most once across workers: of two workers running the same write step, the one whose
ledger claim loses does not run the write, and answers with the winner's recorded result.
Before (issue 19) a mutant that ignored the claim's answer was caught only by a timing race,
in one run of two; here the race is made deterministic.

Two stores opened on one real SQLite file (or Postgres database), as two processes would
have them. The losing
worker looks (no row yet), then, before it claims, the other worker claims, runs and
finishes the same call: `run_write_once`'s `keep` step is exactly that gap (it runs after the
look and before the claim). The write itself appends to a real file, the count on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from core.approval.approval import tool_message
from core.threads.ledger import run_write_once
from store import open_store

CALL = {"id": "call_w", "name": "write_file", "args": {"path": "log.txt", "content": "x\n"}}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_worker_whose_claim_loses_does_not_run_the_write(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
):
    counter = tmp_path / "runs.txt"
    db = (
        str(tmp_path / "threads.db")
        if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )

    async def write(worker: str) -> ToolMessage:
        with counter.open("a") as runs:
            runs.write(f"{worker}\n")
        return tool_message(CALL["id"], f'{{"ran_by": "{worker}"}}')

    async def scenario() -> tuple[ToolMessage, ToolMessage]:
        async with open_store(db) as first, open_store(db) as second:
            won: list[ToolMessage] = []

            async def the_other_worker_goes_first() -> None:
                won.append(
                    await run_write_once(
                        first, "t", "msg_1", CALL, CALL["args"], lambda: write("first")
                    )
                )

            lost = await run_write_once(
                second,
                "t",
                "msg_1",
                CALL,
                CALL["args"],
                lambda: write("second"),
                keep=the_other_worker_goes_first,
            )
            return won[0], lost

    won, lost = asyncio.run(scenario())
    assert counter.read_text() == "first\n"  # the write ran once, by the claim's winner
    assert won.content == lost.content == '{"ran_by": "first"}'
    assert lost.status != "error"
