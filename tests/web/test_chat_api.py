"""The chat API and who may use it: the events of a turn, a paused thread refusing new input,
other web pages refused before anything runs, tokens off loopback, health, and the rules,
modes and grants holding over HTTP as at the terminal."""

from __future__ import annotations

import asyncio
import time

from conftest import Workspace, tree_snapshot
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, approve_shown, kinds, serving


def test_a_turn_streams_text_and_tool_events_and_the_thread_shows_it(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "notes.md"}, id="call_r")]),
        text("It says: buy milk."),
    ]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("notes", "what is in notes.md?")
                assert kinds(events)[:3] == ["route", "tool_call", "tool_result"]
                assert events[2][1] == {
                    "id": "call_r",
                    "tool": "read_file",
                    "text": "buy milk\n",
                    "failed": False,
                }
                streamed = "".join(data["text"] for kind, data in events if kind == "text")
                assert streamed == "It says: buy milk."
                assert ("answer", {"text": "It says: buy milk."}) in events
                assert events[-1] == ("done", {"thread": "notes", "status": "done"})

                shown = await served.client.get("/api/threads/notes")
                roles = [m["role"] for m in shown.json()["messages"]]
                assert roles == ["user", "assistant", "tool", "assistant"]
                assert (await served.client.get("/api/threads/other")).status_code == 404

    asyncio.run(scenario())


def test_a_plain_model_closing_a_think_block_later_is_a_notice_and_the_answer_is_whole(
    workspace: Workspace,
):
    # Its first reply came with no think tag, so the next streams as text at once; when a
    # bare </think> comes after all, a notice frame says so, and `answer` is what is stored.
    (workspace.root / "notes.md").write_text("buy milk\n")
    script = [
        reply("Let me look.", tool_calls=[tool_call("read_file", {"path": "notes.md"})]),
        text("It is short. Say so.</think>It says: buy milk."),
    ]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("notes", "what is in notes.md?")
                notices = [data["text"] for kind, data in events if kind == "notice"]
                assert len(notices) == 1 and "closed a think block" in notices[0]
                assert ("answer", {"text": "It says: buy milk."}) in events
                shown = await served.client.get("/api/threads/notes")
                assert shown.json()["messages"][-1]["text"] == "It says: buy milk."

    asyncio.run(scenario())


def test_a_waiting_thread_takes_no_new_message(workspace: Workspace):
    call = tool_call("write_file", {"path": "a.txt", "content": "a\n"}, id="call_1")

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=[call]), text("ok")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "write a")
                refused = await served.client.post(
                    "/api/threads/t/messages", json={"text": "and now?"}, headers=JSON
                )
                assert refused.status_code == 409
                assert "waits for approval of write_file" in refused.json()["error"]
                assert len(llm.requests) == 2  # the router and the one model call
                shown = (await served.client.get("/api/threads/t")).json()
                assert shown["status"] == "waiting for approval"
                assert shown["pending"][0]["preview"][0].startswith("new file a.txt")
                for body in ({"text": ""}, {"text": 3}, {"prompt": "hi"}, ["hi"]):
                    bad = await served.client.post(
                        "/api/threads/u/messages", json=body, headers=JSON
                    )
                    assert bad.status_code == 400, body
                assert len(llm.requests) == 2

    asyncio.run(scenario())
    assert not (workspace.root / "a.txt").exists()


def test_another_page_cannot_drive_the_agent(workspace: Workspace):
    """A text/plain post (a cross-site form sends one without asking), a foreign Origin, a
    cross-site fetch, or a Host that is not ours (DNS rebinding) reaches neither the model
    nor the files."""
    before = tree_snapshot(workspace.root)
    write = tool_call("write_file", {"path": "pwned.txt", "content": "x"}, id="call_1")
    body = b'{"text": "write pwned.txt"}'
    refusals = [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ({}, 415),
        ({**JSON, "Origin": "http://evil.example"}, 403),
        ({**JSON, "Origin": "null"}, 403),
        ({**JSON, "Origin": "http://127.0.0.1:9999"}, 403),
        ({**JSON, "Sec-Fetch-Site": "cross-site"}, 403),
        ({**JSON, "Sec-Fetch-Site": "same-site"}, 403),
        ({**JSON, "Host": "evil.example"}, 400),
        ({**JSON, "Host": "evil.example:8765"}, 400),
        ({**JSON, "Host": "127.0.0.1:9999"}, 400),
    ]

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=[write]), text("done")], auto_route="general") as llm:
            async with serving(workspace, llm.base_url) as served:
                for headers, status in refusals:
                    response = await served.client.post(
                        "/api/threads/t/messages", content=body, headers=headers
                    )
                    assert response.status_code == status, (headers, response.text)
                    approved = await served.client.post(
                        "/api/admin/approvals/t", content=b'{"approved": true}',
                        headers={**ADMIN, **headers},
                    )  # fmt: skip
                    assert approved.status_code == status, (headers, approved.text)
                rebound = await served.client.get("/api/threads", headers={"Host": "evil.example"})
                assert rebound.status_code == 400
                # No CORS unless asked for: a preflight gets no permission, a read no header.
                preflight = await served.client.options(
                    "/api/threads/t/messages",
                    headers={
                        "Origin": "http://evil.example",
                        "Access-Control-Request-Method": "POST",
                        "Access-Control-Request-Headers": "content-type",
                    },
                )
                assert "access-control-allow-origin" not in preflight.headers
                read = await served.client.get(
                    "/api/threads", headers={"Origin": "http://evil.example"}
                )
                assert "access-control-allow-origin" not in read.headers
                page = await served.client.get("/", headers={"Host": "evil.example"})
                assert page.status_code == 400

                # The same request from our own page (or curl, which sends no Origin) runs.
                ours = {**JSON, "Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-origin"}
                own = await served.client.post(
                    "/api/threads/t/messages", content=body, headers=ours
                )
                assert own.status_code == 200
                assert len(llm.requests_with_tools()) == 1

    asyncio.run(scenario())
    assert not (workspace.root / "pwned.txt").exists()
    assert tree_snapshot(workspace.root) == {**before}


def test_off_loopback_every_endpoint_needs_the_token(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([text("hello")], auto_route="general") as llm:
            async with serving(
                workspace,
                llm.base_url,
                host="0.0.0.0",
                allowed_hosts=("agent.example",),
                base="http://agent.example:8765",
            ) as served:
                client = served.client
                for path in ("/api/threads", "/api/threads/t", "/healthz"):
                    assert (await client.get(path)).status_code == 401, path
                said = await client.post(
                    "/api/threads/t/messages", json={"text": "hi"}, headers=JSON
                )
                assert said.status_code == 401
                assert llm.requests == []
                page = await client.get("/")  # the page holds no data; it asks for the token
                assert page.status_code == 200
                assert page.headers["x-frame-options"] == "DENY"

                said = await client.post(
                    "/api/threads/t/messages", json={"text": "hi"}, headers={**ADMIN, **JSON}
                )
                assert said.status_code == 200
                assert (await client.get("/api/threads", headers=ADMIN)).status_code == 200
                other_host = await client.get(
                    "/api/threads", headers={**ADMIN, "Host": "127.0.0.2:8765"}
                )
                assert other_host.status_code == 400

    asyncio.run(scenario())


def test_healthz_reports_lm_studio_and_the_mcp_server(workspace: Workspace):
    async def scenario() -> None:
        llm = FakeLLM([], auto_route="general").start()
        try:
            async with serving(workspace, llm.base_url) as served:
                healthy = await served.client.get("/healthz")
                assert healthy.status_code == 200
                assert healthy.json() == {
                    "ok": True,
                    "lm_studio": {"ok": True, "problem": None},
                    "mcp_server": {"ok": True, "problem": None},
                }
                llm.stop()
                down = await served.client.get("/healthz")
                assert down.status_code == 503
                assert down.json()["lm_studio"]["ok"] is False
                assert "cannot reach the model server" in down.json()["lm_studio"]["problem"]
                assert down.json()["mcp_server"]["ok"] is True
        finally:
            llm.stop()

    asyncio.run(scenario())


def test_rules_modes_and_grants_hold_over_http(workspace: Workspace):
    (workspace.root / "fsagent.toml").write_text(
        '[[rule]]\ntool = "*"\npath = "secret/**"\ndecision = "deny"\n'
    )
    (workspace.root / "secret").mkdir()
    calls = [
        tool_call("write_file", {"path": "open.txt", "content": "o\n"}, id="call_o"),
        tool_call("write_file", {"path": "secret/s.txt", "content": "s\n"}, id="call_s"),
    ]
    script = [reply(tool_calls=calls), text("One written, one refused.")]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url, approve="yes") as served:
                events = await served.say("t", "write both")
                decisions = [data for kind, data in events if kind == "decision"]
                assert [(d["id"], d["decision"], d["by"]) for d in decisions] == [
                    ("call_o", "approve", "mode"),
                    ("call_s", "reject", "rule"),
                ]
                assert "approval" not in kinds(events)
                assert events[-1][1]["status"] == "done"
                rows = await served.store.audit_rows("t")
                assert [(r.call_id, r.by) for r in rows] == [("call_o", "mode"), ("call_s", "rule")]

    asyncio.run(scenario())
    assert (workspace.root / "open.txt").read_text() == "o\n"
    assert not (workspace.root / "secret" / "s.txt").exists()


def test_a_grant_given_by_the_admin_approves_the_next_call_in_that_folder(workspace: Workspace):
    first = tool_call("write_file", {"path": "a.txt", "content": "a\n"}, id="call_1")
    second = tool_call("write_file", {"path": "b.txt", "content": "b\n"}, id="call_2")
    script = [reply(tool_calls=[first]), text("a done."), reply(tool_calls=[second]), text("b.")]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "write a")
                body = approve_shown(
                    (await served.client.get("/api/admin/approvals", headers=ADMIN)).json(), "t"
                )
                body["decisions"]["call_1"]["grant"] = True
                assert (await served.decide("t", body)).json()["run"] == "done"
                events = await served.say("t", "write b")
                [decision] = [data for kind, data in events if kind == "decision"]
                assert (decision["decision"], decision["by"]) == ("approve", "grant")
                rows = await served.store.audit_rows("t")
                assert [(r.decision, r.by) for r in rows] == [
                    ("grant", "admin"),
                    ("approve", "grant"),
                ]

    asyncio.run(scenario())
    assert (workspace.root / "b.txt").read_text() == "b\n"


def test_a_second_request_for_a_running_thread_is_refused(workspace: Workspace):
    # Its first words, then held until released: the run is still going when the second
    # request comes, for as long as the test needs.
    script = [reply(content="Thinking about it for a while.", hold=True)]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="general") as llm:
            async with serving(workspace, llm.base_url) as served:
                first = asyncio.create_task(served.say("t", "think"))
                deadline = time.monotonic() + 30
                while not llm.requests_with_tools():
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
                second = await served.client.post(
                    "/api/threads/t/messages", json={"text": "again"}, headers=JSON
                )
                assert second.status_code == 409
                assert "is running in this server" in second.json()["error"]
                llm.release()
                events = await first
                assert events[-1] == ("done", {"thread": "t", "status": "done"})
                assert len(llm.requests_with_tools()) == 1

    asyncio.run(scenario())
