"""The SQLite store: a thread file written by the last release opens, migrates and resumes;
a file from a newer release is refused untouched; migrations and ledger claims happen once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from release_files import RELEASE_0_1_0, restore

from conftest import Workspace
from fake_llm import FakeLLM, text
from store import open_store
from store.migrations import MIGRATIONS, SCHEMA_VERSION

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: commands that only read must not ask


def tables(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    found = {name: conn.execute(f"SELECT * FROM {name}").fetchall() for name in names}
    conn.close()
    return found


def test_a_release_0_1_0_file_opens_migrates_and_resumes(workspace: Workspace):
    restore(RELEASE_0_1_0, workspace.db)
    before = tables(workspace.db)

    listed = workspace.run(NO_LLM, "", "threads")
    audit = workspace.run(NO_LLM, "", "audit", "--json", thread=None)
    shown = workspace.run(NO_LLM, "", "threads", "show", "done")
    with FakeLLM([text("Wrote the todo list and the stamp.")]) as llm:
        approved = workspace.run(llm.base_url, "", "approve", "waiting", "--yes")

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[-1] == f"3 threads in {workspace.db}"
    assert [line.split()[0] for line in lines[1:-1] if not line.startswith(" ")] == [
        "done",
        "granted",
        "waiting",
    ]
    assert "call_a: write_file(path='todo.md', content='- water the plants\\n')" in listed.stdout

    assert audit.returncode == 0, audit.stderr
    rows = json.loads(audit.stdout)
    assert [(r["thread"], r["tool"], r["decision"], r["by"]) for r in rows] == [
        ("done", "patch_file", "approve", "piped"),
        ("done", "write_file", "reject", "piped"),
        ("granted", "make_dir", "grant", "piped"),
    ]
    assert rows[1]["reason"] == "not now"

    assert shown.returncode == 0, shown.stderr
    assert "you> add second to notes" in shown.stdout
    assert "agent> Understood, I did not create draft.txt." in shown.stdout

    assert approved.returncode == 0, approved.stderr
    assert "agent> Wrote the todo list and the stamp." in approved.stdout
    assert (workspace.root / "todo.md").read_text() == "- water the plants\n"
    assert (workspace.root / "stamp").exists()

    after = tables(workspace.db)
    # The release's rows are all still there; the migrations recorded themselves.
    for name in ("fsagent_threads", "fsagent_audit"):
        assert {row[:3] for row in before[name]} <= {row[:3] for row in after[name]}
    assert [row[:2] for row in after["fsagent_migrations"]] == [
        (m.number, m.name) for m in MIGRATIONS
    ]
    assert len(after["fsagent_ledger"]) == len(before["fsagent_ledger"]) + 2


def test_a_file_from_a_newer_release_is_refused_untouched(workspace: Workspace):
    restore(RELEASE_0_1_0, workspace.db)
    asyncio.run(_open_and_close(workspace.db))  # migrated to this version
    conn = sqlite3.connect(workspace.db)
    conn.execute(
        "INSERT INTO fsagent_migrations VALUES (?, 'from_the_future', '2030-01-01')",
        (SCHEMA_VERSION + 1,),
    )
    conn.commit()
    conn.close()
    before = workspace.db.read_bytes()

    result = workspace.run(NO_LLM, "", "threads")

    assert result.returncode == 2
    assert f"was written by a newer fsagent (schema {SCHEMA_VERSION + 1}" in result.stderr
    assert "Traceback" not in result.stderr
    assert workspace.db.read_bytes() == before


async def _open_and_close(db: Path) -> int:
    async with open_store(db) as store:
        return await store.schema_version()


def test_a_new_file_gets_every_migration_once(tmp_path: Path):
    db = tmp_path / "threads.db"
    assert asyncio.run(_open_and_close(db)) == SCHEMA_VERSION
    assert asyncio.run(_open_and_close(db)) == SCHEMA_VERSION
    assert len(tables(db)["fsagent_migrations"]) == SCHEMA_VERSION


def test_a_ledger_row_is_claimed_once(tmp_path: Path):
    async def claims() -> tuple[bool, bool, str | None]:
        async with open_store(tmp_path / "threads.db") as store:
            first = await store.ledger_claim("t", "ai-1", "call_1", "write_file", {"path": "a"})
            second = await store.ledger_claim("t", "ai-1", "call_1", "write_file", {"path": "a"})
            row = await store.ledger_row("t", "ai-1", "call_1")
            return first, second, row.status if row else None

    assert asyncio.run(claims()) == (True, False, "started")
