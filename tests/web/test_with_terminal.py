"""One core, two front-ends: a thread open at a terminal is refused by the server (409, naming
the terminal's process), a thread the terminal left paused is approved over HTTP, and one the
server paused is approved at the terminal. The real CLI in subprocesses, the app in-process,
one SQLite file between them."""

from __future__ import annotations

import asyncio

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from serving import JSON, serving


def write_hello() -> dict:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello\n"}, id="call_1")
    return reply(tool_calls=[call])


def test_a_thread_open_at_the_terminal_gets_409_naming_it(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        terminal = workspace.start(llm.base_url)
        terminal.send("create hello.txt")
        terminal.wait_for("Approval needed")
        pid = terminal.process.pid

        async def scenario() -> None:
            async with serving(workspace, llm.base_url) as served:
                decided = await served.decide("t", {"approved": True})
                assert decided.status_code == 409, decided.text
                assert f"open in another fsagent process (pid {pid})" in decided.json()["error"]
                said = await served.client.post(
                    "/api/threads/t/messages", json={"text": "hi"}, headers=JSON
                )
                assert said.status_code == 409
                assert f"(pid {pid})" in said.json()["error"]
                # Reading it is fine: the terminal has it, nobody changes it here.
                shown = (await served.client.get("/api/threads/t")).json()
                assert shown["status"] == "waiting for approval"

        asyncio.run(scenario())
        assert len(llm.requests_with_tools()) == 1
        assert not (workspace.root / "hello.txt").exists()
        terminal.send("y")
        terminal.wait_for("agent> Created hello.txt.")
        assert terminal.finish() == 0
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_paused_at_the_terminal_approved_over_http(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "create hello.txt\n")
        assert paused.returncode == 3, paused.stderr  # end of input at the approval

        async def scenario() -> None:
            async with serving(workspace, llm.base_url) as served:
                decided = await served.approve_simply("t")
                shown = decided.json()
                assert (shown["status"], shown["thread_id"], shown["run"]) == (
                    "approved",
                    "t",
                    "done",
                )
                assert shown["answer"] == "Created hello.txt."
                [row] = await served.store.audit_rows("t")
                assert row.by == "admin"

        asyncio.run(scenario())
        assert len(llm.requests_with_tools()) == 2
        [result] = tool_messages(llm.requests_with_tools()[1])
        assert '"new_sha256"' in result["content"]
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_paused_over_http_approved_at_the_terminal(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:

        async def scenario() -> None:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "create hello.txt")
                assert events[-1][1]["status"] == "pending"
                # The server gave the thread back when the run paused: while it still serves,
                # a terminal opens the thread and answers.
                opened = await asyncio.to_thread(workspace.run, llm.base_url, "y\n")
                assert opened.returncode == 0, opened.stderr
                assert "paused: waiting for your approval of write_file(path='hello.txt'" in (
                    opened.stdout
                )
                assert "agent> Created hello.txt." in opened.stdout
                shown = (await served.client.get("/api/threads/t")).json()
                assert shown["status"] == "idle"
                assert shown["messages"][-1]["text"] == "Created hello.txt."
                assert (await served.decide("t", {"approved": True})).status_code == 404

        asyncio.run(scenario())
        assert len(llm.requests_with_tools()) == 2
    assert (workspace.root / "hello.txt").read_text() == "hello\n"
