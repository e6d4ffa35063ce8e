"""Durable threads end to end: the real CLI in processes of its own (SIGKILLed where a crash
is meant; forked from the worker's launcher, tests/launcher.py), the real MCP server, the
scripted LM Studio, and one real thread store: every test runs on a SQLite file and again on
a database of a real Postgres server."""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Workspace, tool_messages
from core.threads.ledger import HOLD_MARKER, TEST_HOLD_ENV
from fake_llm import FakeLLM, reply, text, tool_call
from old_graph import leave_paused
from store.location import shown as shown_location

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: commands that only read must not ask


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


def write_hello() -> dict:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello"}, id="call_1")
    return reply(tool_calls=[call])


def append_line(call_id: str = "call_1") -> dict:
    args = {"path": "log.txt", "content": "line\n", "mode": "append"}
    return tool_call("write_file", args, id=call_id)


def wait_until(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def unanswered_calls(request: dict) -> list[str]:
    """Tool calls in a model request that no tool message answers: a malformed request."""
    asked = [
        call["id"] for message in request["messages"] for call in message.get("tool_calls") or []
    ]
    answered = {message["tool_call_id"] for message in tool_messages(request)}
    return [call_id for call_id in asked if call_id not in answered]


def test_killed_at_approval_then_approved_from_another_shell(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("create hello.txt")
        agent.wait_for("Approval needed")
        agent.kill()

        listed = workspace.invoke(NO_LLM, "", "threads")
        pending = workspace.invoke(NO_LLM, "", "approvals")
        approved = workspace.run(llm.base_url, "", "approve", "t", "--yes")
        shown = workspace.invoke(NO_LLM, "", "threads", "show", "t")
        again = workspace.run(llm.base_url, "", "approve", "t", "--yes")

    assert listed.returncode == 0, listed.stderr
    assert "waiting for approval" in listed.stdout
    assert "call_1: write_file(path='hello.txt', content='hello')" in listed.stdout
    assert pending.returncode == 0, pending.stderr
    assert "call_1: write_file(path='hello.txt'" in pending.stdout

    assert approved.returncode == 0, approved.stderr
    assert "✓ approved: call_1" in approved.stdout
    assert "agent> Created hello.txt." in approved.stdout
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert len(llm.requests_with_tools()) == 2

    assert "agent> Created hello.txt." in shown.stdout
    assert "idle" in shown.stdout.splitlines()[0]
    assert again.returncode == 1
    assert "thread 't' is not waiting for approval (idle)" in again.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"


def test_a_write_killed_while_running_is_not_run_again(workspace: Workspace):
    script = [reply(tool_calls=[append_line()]), text("I could not confirm the change.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, env={TEST_HOLD_ENV: "started"})
        agent.send("add a line to log.txt")
        agent.send("y")
        agent.wait_for(f"{HOLD_MARKER} 'started'")
        agent.kill()

        listed = workspace.invoke(NO_LLM, "", "threads")
        resumed = workspace.run(llm.base_url, "")

    assert "interrupted (at tools" in listed.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert "The last run was cut off at tools; finishing it now." in resumed.stdout
    assert "Outcome unknown: write_file was started" in resumed.stdout
    [answer] = tool_messages(llm.requests_with_tools()[-1])
    assert "Outcome unknown" in answer["content"] and "log.txt" in answer["content"]
    # The hook held the write before the tool ran, and the resume did not run it.
    assert not (workspace.root / "log.txt").exists()
    assert "agent> I could not confirm the change." in resumed.stdout


def test_a_write_killed_before_its_checkpoint_reuses_its_result(workspace: Workspace):
    # Local models reuse call ids: the second turn's `call_1` is a new call and must run.
    script = [
        reply(tool_calls=[append_line()]),
        text("Appended."),
        reply(tool_calls=[append_line()]),
        text("Appended again."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, env={TEST_HOLD_ENV: "done"})
        agent.send("add a line to log.txt")
        agent.send("y")
        agent.wait_for(f"{HOLD_MARKER} 'done'")
        agent.kill()
        assert (workspace.root / "log.txt").read_text() == "line\n"

        resumed = workspace.run(llm.base_url, "add another line\ny\n")
        first_answer = tool_messages(llm.requests_with_tools()[1])

    assert resumed.returncode == 0, resumed.stderr
    [answer] = first_answer
    assert '"new_sha256"' in answer["content"] and "log.txt" in answer["content"]
    assert "agent> Appended." in resumed.stdout
    assert "agent> Appended again." in resumed.stdout
    # Once for each approved call: the resume did not append a second time.
    assert (workspace.root / "log.txt").read_text() == "line\nline\n"


def test_a_thread_paused_by_another_version_is_refused_until_reset(workspace: Workspace):
    for thread, step, version in (("renamed", "review_writes", 1), ("old", "approve", 0)):
        leave_paused(workspace.location, thread, step, version)

    with FakeLLM([text("Fine, what next?")], auto_route="general") as llm:
        opened = workspace.run(llm.base_url, "hello\n", thread="renamed")
        decided = workspace.run(llm.base_url, "", "approve", "old", "--yes")
        reset = workspace.invoke(NO_LLM, "", "threads", "reset", "renamed")
        reopened = workspace.run(llm.base_url, "hello\n", thread="renamed")

    assert opened.returncode == 2
    assert "thread 'renamed' cannot be resumed: it is paused at step 'review_writes'" in (
        opened.stderr
    )
    assert "approval of write_file(path='old.txt'" in opened.stderr
    assert "fsagent threads reset renamed" in opened.stderr
    assert decided.returncode == 2
    assert "an approval of another format (version 0)" in decided.stderr
    assert reset.returncode == 0, reset.stderr
    assert "cancelled call_old: write_file" in reset.stdout

    assert reopened.returncode == 0, reopened.stderr
    assert "agent> Fine, what next?" in reopened.stdout
    [request] = llm.requests_with_tools()
    assert unanswered_calls(request) == []
    [answer] = tool_messages(request)
    assert "Cancelled: write_file did not run" in answer["content"]
    assert not (workspace.root / "old.txt").exists()


def test_ctrl_c_while_the_model_streams_leaves_the_thread_ready(workspace: Workspace):
    (workspace.root / "a.txt").write_text("alpha\n")
    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "a.txt"}, id="call_r")]),
        # Its first words, then nothing until released: the model is still generating.
        reply("a long answer that never ends " * 3, hold=True),
        text("Second answer."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("read a.txt")
        wait_until(llm.holding.is_set)  # the answer is streaming: its first words are sent
        agent.interrupt()
        agent.wait_for("⨯ interrupted")
        agent.send("and now?")
        agent.wait_for("agent> Second answer.")
        assert agent.finish() == 0

    last = llm.requests_with_tools()[-1]
    assert unanswered_calls(last) == []
    users = [m["content"] for m in last["messages"] if m["role"] == "user"]
    assert users == ["read a.txt", "and now?"]


def test_ctrl_c_inside_a_write_answers_every_call_truthfully(workspace: Workspace):
    (workspace.root / "a.txt").write_text("alpha\n")
    calls = [append_line("call_w"), tool_call("read_file", {"path": "a.txt"}, id="call_r")]
    script = [reply(tool_calls=calls), text("Noted.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, env={TEST_HOLD_ENV: "started"})
        agent.send("append and read")
        agent.send("y")
        agent.wait_for(f"{HOLD_MARKER} 'started'")
        agent.interrupt()
        agent.wait_for("⨯ interrupted")
        agent.send("what happened?")
        agent.wait_for("agent> Noted.")
        assert agent.finish() == 0
        shown = workspace.invoke(NO_LLM, "", "threads", "show", "t")

    last = llm.requests_with_tools()[-1]
    assert unanswered_calls(last) == []
    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(last)}
    assert answers["call_w"].startswith("Outcome unknown: write_file was started")
    assert answers["call_r"].startswith("Not completed: read_file")
    assert "← ✗ Outcome unknown" in shown.stdout and "← ✗ Not completed" in shown.stdout
    assert not (workspace.root / "log.txt").exists()


def test_one_process_per_thread_and_threads_side_by_side(workspace: Workspace):
    with FakeLLM([text("Hi from u."), text("Hi again.")], auto_route="general") as llm:
        first = workspace.start(llm.base_url)
        first.wait_for("Approval: ")  # the banner's last line: the thread is held
        second = workspace.run(llm.base_url, "hello\n")
        other = workspace.run(llm.base_url, "hello\n", thread="u")
        first.kill()  # its lock stays in the file, held by a pid that is gone
        after_crash = workspace.run(llm.base_url, "hello\n")

    # A shared database names the holder's machine too.
    holder = f"pid {first.process.pid}"
    if workspace.database_url:
        holder += f" on {socket.gethostname()}"
    assert second.returncode == 1
    assert second.stderr.strip() == (
        f"fsagent: thread 't' is open in another fsagent process ({holder}); "
        "finish there first, or pass another --thread"
    )
    assert other.returncode == 0, other.stderr
    assert "agent> Hi from u." in other.stdout
    assert after_crash.returncode == 0, after_crash.stderr
    assert "agent> Hi again." in after_crash.stdout


def test_deny_and_partial_approval_decide_the_whole_batch(workspace: Workspace):
    two_writes = reply(
        tool_calls=[
            tool_call("write_file", {"path": "a.txt", "content": "a"}, id="call_a"),
            tool_call("write_file", {"path": "b.txt", "content": "b"}, id="call_b"),
        ]
    )
    script = [two_writes, text("Only a."), write_hello(), text("Not done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "write a and b\n")
        wrong_call = workspace.run(llm.base_url, "", "approve", "t", "--call", "call_z")
        partly = workspace.run(llm.base_url, "", "approve", "t", "--call", "call_a", "--yes")
        partly_request = llm.requests_with_tools()[-1]
        workspace.run(llm.base_url, "create hello.txt\n", thread="d")
        denied = workspace.run(llm.base_url, "", "deny", "d", "--reason", "not today")
        denied_request = llm.requests_with_tools()[-1]

    assert wrong_call.returncode == 1
    assert "no pending call call_z; the pending calls are call_a, call_b" in wrong_call.stderr
    assert partly.returncode == 0, partly.stderr
    assert (workspace.root / "a.txt").read_text() == "a"
    assert not (workspace.root / "b.txt").exists()
    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(partly_request)}
    assert "approved only other calls" in answers["call_b"]
    assert denied.returncode == 0, denied.stderr
    assert "✗ rejected: call_1" in denied.stdout
    assert not (workspace.root / "hello.txt").exists()
    [rejection] = tool_messages(denied_request)
    assert "not today" in rejection["content"]


def test_thread_commands_on_normal_and_wrong_input(workspace: Workspace):
    empty = workspace.invoke(NO_LLM, "", "threads")
    no_approvals = workspace.invoke(NO_LLM, "", "approvals")
    assert not workspace.store_created()  # reading does not create the store
    with FakeLLM([text("Hello!"), write_hello()], auto_route="general") as llm:
        workspace.run(llm.base_url, "hi\n")
        workspace.run(llm.base_url, "create hello.txt\n", thread="w")
    listed = workspace.invoke(NO_LLM, "", "threads")
    unknown = [
        workspace.invoke(NO_LLM, "", *command)
        for command in (
            ("threads", "show", "nope"),
            ("threads", "rm", "nope"),
            ("threads", "reset", "nope"),
            ("approve", "nope"),
            ("deny", "nope"),
        )
    ]
    idle_reset = workspace.invoke(NO_LLM, "", "threads", "reset", "t")
    waiting_reset = workspace.invoke(NO_LLM, "", "threads", "reset", "w")
    removed = workspace.invoke(NO_LLM, "", "threads", "rm", "t")
    after = workspace.invoke(NO_LLM, "", "threads")
    shown = workspace.invoke(NO_LLM, "", "threads", "show", "w")

    assert "No threads" in empty.stdout
    assert no_approvals.stdout.strip() == "No pending approvals."
    rows = listed.stdout.splitlines()
    assert rows[1].split()[:2] == ["t", "2"] and rows[1].endswith("idle")
    assert rows[2].split()[:2] == ["w", "2"] and rows[2].endswith("waiting for approval")
    assert rows[3].strip() == "call_1: write_file(path='hello.txt', content='hello')"
    for result in unknown:
        assert result.returncode == 1
        assert "no thread named 'nope'" in result.stderr
        assert "Traceback" not in result.stderr
    assert idle_reset.returncode == 0 and "nothing to reset" in idle_reset.stdout
    assert waiting_reset.returncode == 0, waiting_reset.stderr
    assert "cancelled call_1: write_file" in waiting_reset.stdout
    assert removed.returncode == 0 and "Deleted thread 't'." in removed.stdout
    [row, store] = after.stdout.splitlines()[1:]
    assert row.startswith("w ") and row.endswith("idle")
    assert store == f"1 thread in {shown_location(workspace.location)}"  # no password shown
    assert "← ✗ Cancelled: write_file did not run" in shown.stdout
    assert not (workspace.root / "hello.txt").exists()


@pytest.mark.parametrize("store_kind", ["sqlite"])  # Postgres: tests/store/test_postgres_store.py
def test_a_file_that_is_not_ours_is_refused_and_left_untouched(workspace: Workspace, tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database\n" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()

    for path in (garbage, foreign):
        before = path.read_bytes()
        for args in (("--db", str(path)), ("--db", str(path), "threads")):
            result = workspace.run(NO_LLM, "hello\n", *args)
            assert result.returncode == 2, (args, result.stderr)
            assert "not an fsagent threads file" in result.stderr
            assert "left untouched" in result.stderr
            assert "Traceback" not in result.stderr
        assert path.read_bytes() == before
        assert not Path(f"{path}-wal").exists()


def test_an_approval_paused_by_the_previous_release_still_resumes(workspace: Workspace):
    # Version 1 of the payload had no `respond`; its resume value means the same.
    leave_paused(workspace.location, "t", "approve", 1)

    with FakeLLM([text("Created old.txt.")], auto_route="filesystem") as llm:
        listed = workspace.invoke(NO_LLM, "", "approvals")
        approved = workspace.run(llm.base_url, "", "approve", "t", "--yes")

    assert "call_old: write_file(path='old.txt'" in listed.stdout
    assert approved.returncode == 0, approved.stderr
    assert (workspace.root / "old.txt").read_text() == "old"
    assert "agent> Created old.txt." in approved.stdout
    assert len(llm.requests_with_tools()) == 1
