"""A thread remembers the roots it was started with (issue 19), over HTTP too: `fsagent serve`
on other roots refuses to decide it (409, naming both), and a thread it starts records its
own. The real CLI in a subprocess, the app in-process, one SQLite file between them."""

from __future__ import annotations

import asyncio

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, serving


def test_serve_on_other_roots_refuses_to_decide_a_thread_started_elsewhere(workspace: Workspace):
    other = workspace.outside / "elsewhere"
    other.mkdir()
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello\n"}, id="call_1")
    with FakeLLM([reply(tool_calls=[call]), text("Done.")], auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "create hello.txt\n")
        assert paused.returncode == 3, paused.stderr

        async def scenario() -> None:
            async with serving(workspace, llm.base_url, roots=(other,)) as served:
                decided = await served.decide("t", {"approved": True})
                assert decided.status_code == 409, decided.text
                said = decided.json()["error"]
                assert str(workspace.root) in said and str(other.resolve()) in said
                # Not offered to this server's reviewers either: it cannot act on it.
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                assert [a["thread"] for a in listed.json()["approvals"]] == []

        asyncio.run(scenario())
        assert len(llm.requests_with_tools()) == 1  # the model was not asked again
    assert not (workspace.root / "hello.txt").exists()
    assert not (other / "hello.txt").exists()


def test_a_thread_started_over_http_records_its_roots(workspace: Workspace):
    with FakeLLM([text("Hello.")], auto_route="general") as llm:

        async def scenario() -> None:
            async with serving(workspace, llm.base_url) as served:
                await served.say("h", "hi")
                recorded = await served.store.thread_settings("h")
                assert recorded is not None
                assert recorded["roots"] == [str(workspace.root.resolve())]

        asyncio.run(scenario())


def test_serve_with_other_root_decides_a_thread_started_elsewhere_in_its_own_roots(
    workspace: Workspace,
):
    other = (workspace.outside / "elsewhere").resolve()
    other.mkdir()
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello\n"}, id="call_1")
    with FakeLLM([reply(tool_calls=[call]), text("Done.")], auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "create hello.txt\n")
        assert paused.returncode == 3, paused.stderr

        async def scenario() -> None:
            async with serving(workspace, llm.base_url, roots=(other,), other_root=True) as served:
                decided = await served.approve_simply("t")
                assert decided.status_code == 200, decided.text

        asyncio.run(scenario())
    assert (other / "hello.txt").read_text() == "hello\n"
    assert not (workspace.root / "hello.txt").exists()
