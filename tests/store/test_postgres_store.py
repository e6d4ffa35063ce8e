"""The Postgres store on a real server (the run's throwaway one, tests/pg_server.py): clear
errors that never show a password, two processes as two machines on one database, a write
run at most once by workers resuming the same steps, `migrate-db` there and back, and a
database that is not ours left untouched. The durable-thread tests of tests/core run on
Postgres too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from launcher import LAUNCHER

from conftest import REPO, Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pg_server import Server
from store.migrations import MIGRATIONS, SCHEMA_VERSION

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: commands that only read must not ask
CLAIM_WORKER = Path(__file__).with_name("claim_worker.py")


@pytest.fixture
def store_kind() -> str:
    return "postgres"


def rows(url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(url, connect_timeout=10) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def password(url: str) -> str:
    secret = urlsplit(url).password
    assert secret
    return secret


def write_hello() -> dict:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello"}, id="call_1")
    return reply(tool_calls=[call])


def machine(folder: Path, url: str | None = None) -> Workspace:
    """A workspace of its own (on a shared database: another machine, as far as fsagent
    knows), with a SQLite file of its own when no URL is given."""
    (folder / "root").mkdir(parents=True)
    (folder / "outside").mkdir()
    return Workspace(folder / "root", folder / "outside", folder / "threads.db", url)


def advisory_locks(url: str) -> int:
    [(count,)] = rows(
        url,
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
        "WHERE l.locktype = 'advisory' AND d.datname = current_database()",
    )
    return int(count)


def wait_until(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- errors --------------------------------------------------------------------------------------


def test_each_failure_is_one_line_exit_2_and_the_password_never_shows(
    workspace: Workspace, postgres: Server
):
    database = urlsplit(workspace.location).path.lstrip("/")
    cases = {
        "cannot connect": postgres.url(database).replace(f":{postgres.port}/", ":9/"),
        "bad credentials": postgres.url(database, password="not-the-password"),
        "no rights": postgres.url(database, user="reader"),
        "no database": postgres.url("no_such_database"),
    }
    results = {
        case: [
            workspace.run(NO_LLM, "hello\n", "--db", url),
            workspace.run(NO_LLM, "", "threads", "--db", url),
        ]
        for case, url in cases.items()
    }

    for case, (chat, listing) in results.items():
        secret = password(cases[case])
        for result in (chat, listing) if case != "no rights" else (chat,):
            assert result.returncode == 2, (case, result.stdout, result.stderr)
            line = one_line(result)
            assert "Traceback" not in result.stderr
            assert secret not in result.stdout + result.stderr, case
            assert ":***@127.0.0.1:" in line, line
    assert "cannot connect to Postgres at" in one_line(results["cannot connect"][0])
    assert "Connection refused" in one_line(results["cannot connect"][0])
    assert "cannot log in to Postgres at" in one_line(results["bad credentials"][0])
    assert "password authentication failed" in one_line(results["bad credentials"][1])
    assert "cannot create fsagent's tables in" in one_line(results["no rights"][0])
    assert "permission denied for schema public" in one_line(results["no rights"][0])
    assert 'database "no_such_database" does not exist' in one_line(results["no database"][0])
    # The reader may read: an empty database lists no threads, and nothing was created.
    no_rights_listing = results["no rights"][1]
    assert no_rights_listing.returncode == 0, no_rights_listing.stderr
    assert "it has no fsagent tables yet" in no_rights_listing.stdout
    assert not workspace.store_created()


def test_a_database_of_something_else_or_a_newer_fsagent_is_left_untouched(
    workspace: Workspace, tmp_path: Path
):
    url = workspace.location
    rows(url, "CREATE TABLE checkpoints (invoice INTEGER)")  # not LangGraph's
    refused = workspace.run(NO_LLM, "hello\n")
    tables_after = {name for (name,) in rows(url, "SELECT tablename FROM pg_tables")}
    rows(url, "DROP TABLE checkpoints")

    with FakeLLM([text("Hello!")], auto_route="general") as llm:
        made = workspace.run(llm.base_url, "hi\n")
    rows(url, "INSERT INTO fsagent_migrations VALUES (%s, 'from_the_future', '2030')", 99)
    newer = workspace.run(NO_LLM, "", "threads")

    assert refused.returncode == 2
    assert "has a table named checkpoints that is not LangGraph's" in one_line(refused)
    assert "left untouched" in refused.stderr
    assert tables_after & {"checkpoints"} and not {t for t in tables_after if "fsagent" in t}
    assert made.returncode == 0, made.stderr
    assert newer.returncode == 2
    assert "was written by a newer fsagent (schema 99" in one_line(newer)
    assert [n for (n,) in rows(url, "SELECT number FROM fsagent_migrations ORDER BY 1")] == [
        *range(1, SCHEMA_VERSION + 1),
        99,
    ]


def test_processes_opening_a_new_database_at_once_migrate_it_once(workspace: Workspace):
    code = (
        "import asyncio, sys; from store import open_store\n"
        "async def main():\n"
        "    async with open_store(sys.argv[1]) as store:\n"
        "        print(await store.schema_version())\n"
        "asyncio.run(main())\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, workspace.location],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]

    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
        assert out.strip() == str(SCHEMA_VERSION)
    applied = rows(workspace.location, "SELECT number, name FROM fsagent_migrations ORDER BY 1")
    assert applied == [(m.number, m.name) for m in MIGRATIONS]


def test_database_url_selects_postgres_and_fsagent_db_comes_first(
    workspace: Workspace, tmp_path: Path
):
    def threads(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        # Forked by the worker's launcher: the variables are read afresh by each process.
        return LAUNCHER.run(
            ["threads"], input="", timeout=120, cwd=tmp_path, env={**agent_env(), **env}
        )

    url = workspace.location
    from_url = threads({"DATABASE_URL": url})
    file_first = threads({"DATABASE_URL": url, "FSAGENT_DB": str(tmp_path / "mine.db")})
    other_kind = threads({"DATABASE_URL": "mysql://user:pw@host/db"})

    masked = url.replace(password(url), "***")
    assert from_url.stdout.strip() == f"No threads in {masked} (it has no fsagent tables yet)."
    assert password(url) not in from_url.stdout + from_url.stderr
    assert file_first.stdout.strip() == (
        f"No threads in {tmp_path / 'mine.db'} (the file does not exist yet)."
    )
    # A DATABASE_URL of another kind is another program's: the default file is used.
    default = Path(os.environ["XDG_DATA_HOME"]) / "fsagent" / "threads.db"
    assert other_kind.stdout.strip() == f"No threads in {default} (the file does not exist yet)."


# --- two machines on one database ----------------------------------------------------------------


def test_two_machines_share_threads_leases_and_approvals(postgres_url: str, tmp_path: Path):
    a, b = machine(tmp_path / "a", postgres_url), machine(tmp_path / "b", postgres_url)
    script = [write_hello(), text("Hi from u."), text("Created hello.txt."), text("Hi on v.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        on_a = a.start(llm.base_url)
        on_a.send("create hello.txt")
        on_a.wait_for("Approval needed")
        refused = b.run(llm.base_url, "hello\n")
        side_by_side = b.run(llm.base_url, "hello\n", thread="u")
        paused = on_a.finish()  # end of input at the approval: nothing runs, the thread waits
        pending = b.run(NO_LLM, "", "approvals")
        approved = b.run(llm.base_url, "", "approve", "t", "--yes", "--other-root")
        again = a.run(llm.base_url, "", "approve", "t", "--yes")

        holder = a.start(llm.base_url, thread="v")
        holder.wait_for("Approval: ")  # the banner's last line: the thread is held
        busy = b.run(llm.base_url, "hello\n", thread="v")
        holder.kill()
        wait_until(lambda: advisory_locks(postgres_url) == 0)
        # Machine b has the same files at another path: it says so to act in its own root.
        taken_over = b.run(llm.base_url, "hello\n", "--other-root", thread="v")

    host = socket.gethostname()
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"fsagent: thread 't' is open in another fsagent process (pid {on_a.process.pid} on "
        f"{host}); finish there first, or pass another --thread"
    )
    assert side_by_side.returncode == 0, side_by_side.stderr
    assert "agent> Hi from u." in side_by_side.stdout
    assert paused == 3
    assert "call_1: write_file(path='hello.txt', content='hello')" in pending.stdout
    assert approved.returncode == 0, approved.stderr
    assert "agent> Created hello.txt." in approved.stdout
    # The write ran once, where it was approved.
    assert (b.root / "hello.txt").read_text() == "hello"
    assert not (a.root / "hello.txt").exists()
    assert again.returncode == 1 and "is not waiting for approval (idle)" in again.stderr
    assert rows(postgres_url, "SELECT call_id, status FROM fsagent_ledger") == [("call_1", "done")]
    assert busy.returncode == 1
    assert f"(pid {holder.process.pid} on {host})" in busy.stderr
    assert taken_over.returncode == 0, taken_over.stderr
    assert "agent> Hi on v." in taken_over.stdout
    assert rows(postgres_url, "SELECT pid FROM fsagent_threads WHERE pid IS NOT NULL") == []


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_workers_resuming_the_same_steps_run_each_write_once(workspace: Workspace, tmp_path: Path):
    count, out = 60, tmp_path / "writes.log"
    workers = [
        subprocess.Popen(
            [sys.executable, str(CLAIM_WORKER), workspace.location, str(out), str(count), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stderr is not None
        assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
    for worker in workers:  # both have the store open; now both at once
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=120) for worker in workers]

    for worker, (_, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
    lines = out.read_text().splitlines()
    ran = [line.split()[0] for line in lines]
    assert sorted(ran) == sorted(f"call_{n}" for n in range(count))  # each once, none twice
    # Both raced for the same calls, and both won some.
    assert {line.split()[1] for line in lines} == {"w1", "w2"}


# --- migrate-db ----------------------------------------------------------------------------------


def test_migrate_db_copies_every_thread_there_and_back_and_a_copy_resumes(
    workspace: Workspace, tmp_path: Path
):
    sqlite, postgres, back = machine(tmp_path / "sqlite"), workspace, machine(tmp_path / "back")
    secret = password(postgres.location)

    two_writes = reply(
        tool_calls=[
            tool_call("write_file", {"path": "a.txt", "content": "a"}, id="call_a"),
            tool_call("write_file", {"path": "b.txt", "content": "b"}, id="call_b"),
        ]
    )
    script = [
        two_writes,
        text("Wrote a, not b."),
        write_hello(),
        text("Created hello.txt on the Postgres copy."),
        text("Created hello.txt on the SQLite copy."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        done = sqlite.run(llm.base_url, "write a and b\ny\nn: not b\n", thread="done")
        waiting = sqlite.run(llm.base_url, "create hello.txt\n", thread="waiting")
        there = sqlite.run(NO_LLM, "", "migrate-db", str(sqlite.db), postgres.location)
        back_again = sqlite.run(NO_LLM, "", "migrate-db", postgres.location, str(back.db))
        again = sqlite.run(NO_LLM, "", "migrate-db", str(sqlite.db), postgres.location)

        views = {
            name: [
                ws.run(NO_LLM, "", *command, thread=None)
                for command in (("threads",), ("approvals",), ("audit", "--json"))
            ]
            + [
                ws.run(NO_LLM, "", "threads", "show", thread, thread=None)
                for thread in ("done", "waiting")
            ]  # fmt: skip
            for name, ws in (("sqlite", sqlite), ("postgres", postgres), ("back", back))
        }
        on_postgres = postgres.run(
            llm.base_url, "", "approve", "waiting", "--yes", "--other-root", thread=None
        )
        on_back = back.run(
            llm.base_url, "", "approve", "waiting", "--yes", "--other-root", thread=None
        )
        still_waiting = sqlite.run(NO_LLM, "", "approvals", thread=None)
        resumed_requests = llm.requests_with_tools()[-2:]

    assert done.returncode == 0, done.stderr
    assert waiting.returncode == 3, waiting.stderr
    assert there.returncode == 0, there.stderr
    assert secret not in there.stdout + there.stderr
    masked = postgres.location.replace(secret, "***")
    assert there.stdout.splitlines()[0] == f"Copied 2 threads from {sqlite.db} to {masked}:"
    assert "ledger rows, 2 audit rows" in there.stdout
    assert back_again.returncode == 0, back_again.stderr
    # Every checkpoint came along, both ways.
    counts = [line for line in there.stdout.splitlines() if "checkpoints" in line]
    assert counts == [line for line in back_again.stdout.splitlines() if "checkpoints" in line]
    assert again.returncode == 2
    assert "already has thread(s) done, waiting; nothing was copied" in one_line(again)

    # The copies read exactly as the original: threads, approvals, audit, conversations.
    for original, copy in ((views["sqlite"], views["postgres"]), (views["sqlite"], views["back"])):
        for before, after in zip(original, copy, strict=True):
            assert after.returncode == 0, after.stderr
            # The listing's last line names its own store; the rest reads the same.
            assert unlisted(after.stdout) == unlisted(before.stdout)
    assert "call_1: write_file(path='hello.txt'" in views["postgres"][1].stdout
    assert json.loads(views["postgres"][2].stdout)[1]["reason"] == "not b"

    # A paused thread resumes from either copy; its write runs there, once.
    for result, copy, answer in (
        (on_postgres, postgres, "on the Postgres copy"),
        (on_back, back, "on the SQLite copy"),
    ):
        assert result.returncode == 0, result.stderr
        assert f"agent> Created hello.txt {answer}." in result.stdout
        assert (copy.root / "hello.txt").read_text() == "hello"
    for request in resumed_requests:
        [answer] = [m for m in request["messages"] if m.get("tool_call_id") == "call_1"]
        assert '"new_sha256"' in answer["content"]
    assert not (sqlite.root / "hello.txt").exists()
    assert "call_1: write_file(path='hello.txt'" in still_waiting.stdout


def unlisted(stdout: str) -> str:
    """A command's output without `fsagent threads`' last line, `N threads in STORE`."""
    lines = stdout.splitlines()
    if lines and " threads in " in lines[-1] and lines[0].startswith("NAME"):
        lines = lines[:-1]
    return "\n".join(lines)
