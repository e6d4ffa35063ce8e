"""The admin API, as the seed service was tested: a risky call pauses and is listed; approve
resumes, runs it and records it; reject declines with the note verbatim; 401 without or with a
wrong token; 404 with nothing pending; 403 with no token configured. Through httpx's ASGI
transport against the app as `fsagent serve` wires it: the real MCP server on temp folders,
a real SQLite file and the LM Studio stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import Workspace, tool_messages, tree_snapshot
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, TOKEN, kinds, serving, sse_events


def write(path: str, content: str, call_id: str) -> dict[str, Any]:
    return tool_call("write_file", {"path": path, "content": content}, id=call_id)


def write_hello() -> dict[str, Any]:
    return reply(tool_calls=[write("hello.txt", "hello\n", "call_1")])


def test_a_risky_call_pauses_after_one_model_call_and_is_listed(workspace: Workspace):
    before = tree_snapshot(workspace.outside)

    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "create hello.txt")
                assert len(llm.requests_with_tools()) == 1  # exactly one model call, then paused

                assert kinds(events) == ["route", "tool_call", "notice", "approval", "done"]
                assert "queued for review" in events[2][1]["text"].lower()
                approval = events[3][1]
                assert approval["status"] == "pending"
                [call] = approval["calls"]
                assert call["id"] == "call_1" and call["name"] == "write_file"
                assert call["args"] == {"path": "hello.txt", "content": "hello\n"}
                assert call["preview"] == ["new file hello.txt, 1 line, 6 bytes:", "+hello"]
                assert events[-1] == ("done", {"thread": "t", "status": "pending"})

                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                assert listed.status_code == 200
                [waiting] = listed.json()["approvals"]
                assert waiting["thread"] == "t"
                assert waiting["request"] == "create hello.txt"
                assert [c["id"] for c in waiting["calls"]] == ["call_1"]
                assert waiting["calls"][0]["preview"][1] == "+hello"

                threads = (await served.client.get("/api/threads")).json()["threads"]
                assert [(t["name"], t["status"]) for t in threads] == [
                    ("t", "waiting for approval")
                ]
                assert len(llm.requests_with_tools()) == 1  # listing never asks the model

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()
    assert tree_snapshot(workspace.outside) == before


def test_approve_resumes_runs_the_call_and_records_the_admin(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                # A yes that names no preview binds to nothing: 428, one line, nothing runs.
                unbound = await served.decide("t", {"approved": True})
                assert unbound.status_code == 428, unbound.text
                assert unbound.json()["error"].startswith(
                    "call_1: write_file was approved without the preview it approves"
                )
                assert not (workspace.root / "hello.txt").exists()
                assert len(llm.requests_with_tools()) == 1
                decided = await served.approve_simply("t")
                assert decided.status_code == 200, decided.text
                shown = decided.json()
                assert {k: shown[k] for k in ("status", "thread_id", "answer", "run")} == {
                    "status": "approved",  # the seed's contract: the decision; the run's end
                    "thread_id": "t",
                    "answer": "Created hello.txt.",
                    "run": "done",
                }
                assert [(r["path"], r["failed"]) for r in shown["results"]] == [
                    ("hello.txt", False)
                ]
                decided_at = shown["decided_at"]
                assert shown["decided_by"] == "admin" and decided_at.startswith("20")
                assert len(llm.requests_with_tools()) == 2
                [result] = tool_messages(llm.requests_with_tools()[1])
                assert '"new_sha256"' in result["content"]

                [row] = await served.store.audit_rows("t")
                assert (row.tool, row.decision, row.by) == ("write_file", "approve", "admin")

                shown = (await served.client.get("/api/threads/t")).json()
                assert shown["status"] == "idle" and shown["pending"] == []
                # Who decided, and when: the audit's row (the chat view tells it).
                [said] = shown["decisions"]
                assert (said["call_id"], said["decision"], said["by"]) == (
                    row.call_id,
                    "approve",
                    "admin",
                )
                assert said["time"] == row.time
                assert shown["messages"][-1] == {
                    "role": "assistant",
                    "text": "Created hello.txt.",
                    "tool_calls": [],
                }
                again = await served.decide("t", {"approved": True})
                assert again.status_code == 404  # nothing pending now

    asyncio.run(scenario())
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_reject_declines_with_the_note_verbatim(workspace: Workspace):
    note = "Not in my home folder, please: use notes/ instead."

    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Understood.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                decided = await served.decide("t", {"approved": False, "note": note})
                shown = decided.json()
                assert (shown["status"], shown["thread_id"], shown["answer"]) == (
                    "rejected",
                    "t",
                    "Understood.",
                )
                assert shown["run"] == "done"
                [result] = shown["results"]  # the rejection is the call's result
                assert (result["path"], result["failed"]) == ("hello.txt", True)
                [answer] = tool_messages(llm.requests_with_tools()[1])
                assert "rejected write_file" in answer["content"]
                assert f"Their reason: {note}." in answer["content"]
                [row] = await served.store.audit_rows("t")
                assert (row.decision, row.reason, row.by) == ("reject", note, "admin")

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()


def test_respond_answers_in_the_calls_place(workspace: Workspace):
    answer = "Don't create it: the list lives in notes/todo.md."

    async def scenario() -> None:
        with FakeLLM(
            [write_hello(), text("I'll use notes/todo.md.")], auto_route="filesystem"
        ) as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                body = {"decisions": {"call_1": {"type": "respond", "message": answer}}}
                decided = await served.decide("t", body)
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "I'll use notes/todo.md."
                [result] = tool_messages(llm.requests_with_tools()[1])
                assert "The person answered instead of running write_file" in result["content"]
                assert answer in result["content"]
                [row] = await served.store.audit_rows("t")
                assert (row.decision, row.reason, row.by) == ("respond", answer, "admin")

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()


def test_a_question_is_listed_and_answered_over_http(workspace: Workspace):
    args = {"question": "Which list?", "choices": ["todo.md", "notes/todo.md"]}
    ask = reply(tool_calls=[tool_call("ask_person", args, id="call_q")])

    async def scenario() -> None:
        with FakeLLM([ask, text("Adding it to notes/todo.md.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "add milk to my list")
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [waiting] = listed.json()["approvals"]
                assert waiting["kind"] == "question"
                [call] = waiting["calls"]
                assert (call["question"], call["choices"]) == (args["question"], args["choices"])

                decisions = {"decisions": {"call_q": {"type": "approve"}}}
                assert (await served.decide("t", decisions)).status_code == 400
                not_a_choice = {"answers": {"call_q": "the fridge"}}
                assert (await served.decide("t", not_a_choice)).status_code == 400
                assert len(llm.requests_with_tools()) == 1  # nothing resumed yet

                decided = await served.decide("t", {"answers": {"call_q": "notes/todo.md"}})
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Adding it to notes/todo.md."
                [result] = tool_messages(llm.requests_with_tools()[1])
                assert result["content"] == "The person answered: notes/todo.md"
                [row] = await served.store.audit_rows("t")
                assert (row.tool, row.decision, row.reason, row.by) == (
                    "ask_person",
                    "answer",
                    "notes/todo.md",
                    "admin",
                )

    asyncio.run(scenario())


def test_tokens_fail_closed_and_nothing_pending_is_404(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                client = served.client
                nothing = await served.decide("t", {"approved": True})
                assert nothing.status_code == 404  # no such thread: nothing pending
                assert nothing.json() == {"error": "thread 't' has nothing pending"}

                await served.say("t", "create hello.txt")
                wrong = {"Authorization": "Bearer not-the-token", **JSON}
                for headers in ({**JSON}, wrong, {"Authorization": "Basic abc", **JSON}):
                    refused = await client.post(
                        "/api/admin/approvals/t", json={"approved": True}, headers=headers
                    )
                    assert refused.status_code == 401, refused.text
                    assert refused.headers["www-authenticate"] == "Bearer"
                    listed = await client.get("/api/admin/approvals", headers=headers)
                    assert listed.status_code == 401
                leaked = await client.get(f"/api/admin/approvals?token={TOKEN}")
                assert leaked.status_code == 401  # a token is never taken from a URL
                assert len(llm.requests_with_tools()) == 1
                assert not (workspace.root / "hello.txt").exists()

                # An idle thread has nothing pending either (keyed on its checkpoint).
                assert (await served.approve_simply("t")).status_code == 200
                assert (await served.decide("t", {"approved": True})).status_code == 404

    asyncio.run(scenario())
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_no_token_configured_turns_every_admin_endpoint_off(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url, token=None) as served:
                await served.say("t", "create hello.txt")
                for headers in ({}, ADMIN, {"Authorization": "Bearer "}):
                    listed = await served.client.get("/api/admin/approvals", headers=headers)
                    assert listed.status_code == 403
                    assert "FSAGENT_ADMIN_TOKEN" in listed.json()["error"]
                    decided = await served.client.post(
                        "/api/admin/approvals/t",
                        json={"approved": True},
                        headers={**headers, **JSON},
                    )
                    assert decided.status_code == 403
                assert len(llm.requests_with_tools()) == 1

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()


def test_per_call_decisions_reject_one_edit_another_and_stream_the_run(workspace: Workspace):
    (workspace.root / "b.txt").write_text("old\n")
    calls = [write("a.txt", "from the model\n", "call_a"), write("b.txt", "new\n", "call_b")]
    script = [reply(tool_calls=calls), text("a.txt was edited by you; b.txt left as it was.")]

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "write a and b")
                previews = {c["id"]: c["preview"] for c in events[-2][1]["calls"]}
                assert previews["call_b"][-2:] == ["-old", "+new"]  # a diff of the change

                mine = {"path": "a.txt", "content": "mine\n"}
                body = {
                    "decisions": {
                        "call_a": await served.edited("t", "call_a", mine),
                        "call_b": {"type": "reject", "message": "keep b as it is"},
                    }
                }
                response = await served.client.post(
                    "/api/admin/approvals/t",
                    json=body,
                    headers={**ADMIN, **JSON, "Accept": "text/event-stream"},
                )
                assert response.headers["content-type"].startswith("text/event-stream")
                run = sse_events(response.text)
                decisions = [data for kind, data in run if kind == "decision"]
                assert [(d["id"], d["decision"], d["by"]) for d in decisions] == [
                    ("call_a", "edit", "admin"),
                    ("call_b", "reject", "admin"),
                ]
                assert run[-1] == ("done", {"thread": "t", "status": "done"})
                answered = tool_messages(llm.requests_with_tools()[1])
                assert "edited this write_file call" in answered[0]["content"]
                assert "Their reason: keep b as it is." in answered[1]["content"]
                rows = await served.store.audit_rows("t")
                assert [(r.call_id, r.decision, r.by) for r in rows] == [
                    ("call_a", "edit", "admin"),
                    ("call_b", "reject", "admin"),
                ]
                assert rows[0].args == {"path": "a.txt", "content": "mine\n"}

    asyncio.run(scenario())
    assert (workspace.root / "a.txt").read_text() == "mine\n"
    assert (workspace.root / "b.txt").read_text() == "old\n"


BAD_BODIES = [
    ({"approved": "yes"}, '"approved" must be true or false'),
    ({"approved": True, "by": "person"}, "unknown field 'by'"),
    ({"approved": True, "preview_ids": ["pv1-x"]}, '"preview_ids" must be an object'),
    ({}, '"approved" must be true or false'),
    ([{"approved": True}], "must be a JSON object"),
    ({"decisions": {}}, '"decisions" must be an object'),
    ({"decisions": {"call_1": {"type": "approve"}}}, "no decision for call_2"),
    (
        {
            "decisions": {
                "call_1": {"type": "approve"},
                "call_2": {"type": "approve"},
                "call_9": {"type": "approve"},
            }
        },
        "no pending call 'call_9'",
    ),  # fmt: skip
    (
        {"decisions": {"call_1": {"type": "yes"}, "call_2": {"type": "approve"}}},
        "type 'yes' is not a decision",
    ),
    (
        {"decisions": {"call_1": {"type": "approve"}, "call_2": {"type": "edit", "args": {}}}},
        "delete can only be approved or rejected",
    ),
    (
        {
            "decisions": {
                "call_1": {"type": "edit", "args": {"path": 3}},
                "call_2": {"type": "approve"},
            }
        },
        "the edited arguments cannot run",
    ),  # fmt: skip
    (
        {
            "decisions": {
                "call_1": {"type": "approve", "by": "person"},
                "call_2": {"type": "approve"},
            }
        },
        "approve takes no 'by'",
    ),  # fmt: skip
    ({"approved": True, "decisions": {}}, "not both"),
]


def test_a_malformed_body_or_a_bad_name_runs_nothing(workspace: Workspace):
    (workspace.root / "keep.txt").write_text("keep\n")
    calls = [
        write("hello.txt", "hello\n", "call_1"),
        tool_call("delete", {"path": "keep.txt"}, id="call_2"),
    ]

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=calls), text("Done.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "write hello, delete keep")
                for body, why in BAD_BODIES:
                    response = await served.decide("t", body)
                    assert response.status_code == 400, (body, response.text)
                    assert why in response.json()["error"], (body, response.json())
                not_json = await served.client.post(
                    "/api/admin/approvals/t", content=b"{approved: true", headers={**ADMIN, **JSON}
                )
                assert not_json.status_code == 400
                assert "not JSON" in not_json.json()["error"]
                too_big = await served.client.post(
                    "/api/admin/approvals/t",
                    json={"approved": False, "note": "x" * (2 * 1024 * 1024)},
                    headers={**ADMIN, **JSON},
                )
                assert too_big.status_code == 413

                for name in ("a..b", "x" * 65, ".hidden", "sp ace", "new%0Aline"):
                    decided = await served.decide(name, {"approved": True})
                    assert decided.status_code == 400, (name, decided.text)
                    assert "is not a thread name" in decided.json()["error"]
                    said = await served.client.post(
                        f"/api/threads/{name}/messages", json={"text": "hi"}, headers=JSON
                    )
                    assert said.status_code == 400, (name, said.text)

                assert len(llm.requests_with_tools()) == 1
                assert await served.store.audit_rows() == []
                [waiting] = (await served.client.get("/api/admin/approvals", headers=ADMIN)).json()[
                    "approvals"
                ]
                assert [c["id"] for c in waiting["calls"]] == ["call_1", "call_2"]
                names = [
                    t["name"] for t in (await served.client.get("/api/threads")).json()["threads"]
                ]
                assert names == ["t"]

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()
    assert (workspace.root / "keep.txt").read_text() == "keep\n"
