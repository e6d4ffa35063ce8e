"""Issue 19 over the admin API: an admin's reject is final even when the rules changed while
the thread waited (a new `fsagent serve` loads the new rules), and an admin's approval is
bound to the preview the API served: a file changed since is not written over. Through
httpx's ASGI transport against the app as `fsagent serve` wires it, with the real MCP server,
a real SQLite file and the LM Studio stand-in."""

from __future__ import annotations

import asyncio

import httpx

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, ServeProcess, bound, by_request, serving, sse_events
from web.app import opened

ALLOW_DELETES = '[[rule]]\ntool = "delete"\npath = "**"\ndecision = "allow"\n'


def test_an_admin_reject_stays_a_no_after_the_rules_allow_the_call(workspace: Workspace):
    old = workspace.root / "old.log"
    old.write_text("keep me\n")
    delete = reply(tool_calls=[tool_call("delete", {"path": "old.log"}, id="call_d")])

    async def scenario() -> None:
        with FakeLLM([delete, text("Kept it.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "remove old.log")
            (workspace.root / "fsagent.toml").write_text(ALLOW_DELETES)
            async with serving(workspace, llm.base_url) as served:
                decided = await served.decide("t", {"approved": False, "note": "keep it"})
                assert decided.status_code == 200, decided.text
                [answer] = tool_messages(llm.requests_with_tools()[1])
                assert "the person rejected delete" in answer["content"]

    asyncio.run(scenario())
    assert old.read_text() == "keep me\n"


def test_an_admin_approval_is_bound_to_the_preview_it_was_served(workspace: Workspace):
    """The binding the API served, sent back: refused with 412 once the file changed, and
    nothing resumes; the preview served then binds a yes to the file as it is now."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "version 2\n"}, id="call_w")

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=[call]), text("Told.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "update the notes")
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [waiting] = listed.json()["approvals"]
                [seen] = waiting["calls"]
                assert "-version 1" in seen["preview"]
                notes.write_text("the person's own edit\n")
                stale = await served.decide("t", bound(seen))
                assert stale.status_code == 412, stale.text
                assert "not what its preview showed" in stale.json()["error"]
                assert len(llm.requests_with_tools()) == 1  # nothing resumed
                assert notes.read_text() == "the person's own edit\n"
                decided = await served.approve("t")  # the preview served now: the edit's
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Told."

    asyncio.run(scenario())
    assert notes.read_text() == "version 2\n"


def test_the_preview_travels_with_the_decision_past_a_chat_read_and_a_restart(
    workspace: Workspace,
):
    """Issue 28, with the page's own requests against `fsagent serve`: the admin reads the
    diff of notes.md v1; the file becomes v2; someone reads the thread over the chat API;
    the approval the page sent until now (no binding) is 428 and the one bound to v1 is 412,
    so v2 is never overwritten unseen; after a restart an unbound approval is 428 still, and
    the binding of a fresh preview (v2) approves it."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "the model's notes\n"}, "call_w")
    script = by_request({"update the notes": [reply(tool_calls=[call]), text("Updated.")]})
    decide_url = "/api/admin/approvals/t"
    the_page_until_now = {"decisions": {"call_w": {"type": "approve"}}}

    def approvals(url: str) -> dict:
        listed = httpx.get(f"{url}/api/admin/approvals", headers=ADMIN, timeout=60)
        [waiting] = listed.json()["approvals"]
        [shown] = waiting["calls"]
        return shown

    def decide(url: str, body: dict) -> httpx.Response:
        return httpx.post(f"{url}{decide_url}", json=body, headers={**ADMIN, **JSON}, timeout=60)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        said = httpx.post(
            f"{served.url}/api/threads/t/messages", json={"text": "update the notes"}, timeout=60
        )
        assert sse_events(said.text)[-1][1]["status"] == "pending"
        seen = approvals(served.url)
        assert "-version 1" in seen["preview"]

        notes.write_text("version 2\n")  # another process edits the file
        chat = httpx.get(f"{served.url}/api/threads/t", timeout=60)  # no token on loopback
        assert chat.status_code == 200 and "-version 2" in chat.json()["pending"][0]["preview"]

        unbound = decide(served.url, the_page_until_now)
        assert unbound.status_code == 428, unbound.text
        assert unbound.json()["error"].startswith("call_w: write_file was approved without")
        stale = decide(served.url, bound(seen))
        assert stale.status_code == 412, stale.text
        assert "not what its preview showed" in stale.json()["error"]
        assert notes.read_text() == "version 2\n"
        assert len(llm.requests_with_tools()) == 1  # nothing resumed

        fresh = approvals(served.url)
        assert "-version 2" in fresh["preview"] and fresh["preview_id"] != seen["preview_id"]
        served.kill()  # SIGKILL: nothing of this process is left
        served = ServeProcess(workspace, llm.base_url)
        again = decide(served.url, the_page_until_now)
        assert again.status_code == 428, again.text
        approved = decide(served.url, bound(fresh))
        assert approved.status_code == 200, approved.text
        assert approved.json()["answer"] == "Updated."
        served.kill()

    assert notes.read_text() == "the model's notes\n"


def test_a_preview_id_binds_its_own_thread_call_arguments_and_state_only(workspace: Workspace):
    """What a preview_id stands for, and nothing else: the id of an edit's preview (other
    content for the same path), of another thread's same call, or an old id sent with the
    state as it is now, each approves nothing (412), and the file is as it was."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "the model's\n"}, id="call_w")
    script = by_request(
        {
            "update": [reply(tool_calls=[call]), text("Updated.")],
            "also": [reply(tool_calls=[call]), text("Also updated.")],
        }
    )

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "update the notes")
                await served.say("u", "also update the notes")  # the same call id and state
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                seen = {item["thread"]: item["calls"][0] for item in listed.json()["approvals"]}
                edited = await served.client.post(
                    "/api/admin/approvals/t/preview",
                    json={"call_id": "call_w", "args": {"path": "notes.md", "content": "x\n"}},
                    headers={**ADMIN, **JSON},
                )
                assert "+x" in edited.json()["lines"]
                edit_id = edited.json()["preview_id"]
                assert edit_id != seen["t"]["preview_id"]

                def approve(preview_id: str, **more: object) -> dict:
                    decision = {"type": "approve", "preview_id": preview_id, **more}
                    return {"decisions": {"call_w": decision}}

                for thread, body in (
                    ("t", approve(edit_id)),  # the edit's diff, not the call's
                    ("t", approve(seen["u"]["preview_id"])),  # thread u's preview
                ):
                    refused = await served.decide(thread, body)
                    assert refused.status_code == 412, refused.text
                    # Nothing changed: said so, not "it changed since" (issue 41).
                    said = refused.json()["error"]
                    assert "this preview id belongs to another call" in said, said
                    assert "changed since" not in said

                notes.write_text("version 2\n")
                stale = await served.decide("t", approve(seen["t"]["preview_id"]))
                assert stale.status_code == 412, stale.text
                said = stale.json()["error"]
                assert "changed since you looked" in said and "another call" not in said
                assert len(llm.requests_with_tools()) == 2  # nothing resumed
                assert notes.read_text() == "version 2\n"

    asyncio.run(scenario())
    assert notes.read_text() == "version 2\n"


def test_an_http_approval_never_takes_the_state_from_its_body(workspace: Workspace):
    """Issue 41: an `expect` in an approval (or an edit) was trusted when the preview_id was
    its digest, and the file was not read again. A body that carries one is refused (400),
    whatever it says: the state of v2 forged with v1's id, or the state as it is now with an
    id made over it, and nothing resumes; the server reads the state itself."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "the model's\n"}, id="call_w")

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=[call]), text("Told.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "update the notes")
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [seen] = listed.json()["approvals"][0]["calls"]
                notes.write_text("version 2\n")
                session = await opened(served.app.state.service, "t")
                now = await session.preview(seen)  # the state as it is now, and its id
                assert now.expect is not None
                edit = await served.edited("t", "call_w", {"path": "notes.md", "content": "x\n"})
                for decision in (
                    {"type": "approve", "preview_id": seen["preview_id"], "expect": now.expect},
                    {"type": "approve", "preview_id": now.preview_id, "expect": now.expect},
                    {**edit, "expect": now.expect},
                ):
                    forged = await served.decide("t", {"decisions": {"call_w": decision}})
                    assert forged.status_code == 400, forged.text
                    assert "takes no 'expect'" in forged.json()["error"]
                assert len(llm.requests_with_tools()) == 1  # nothing resumed
                assert notes.read_text() == "version 2\n"

    asyncio.run(scenario())
    assert notes.read_text() == "version 2\n"


def test_an_edit_is_bound_to_its_own_preview_as_an_approval_is(workspace: Workspace):
    """Issue 41 in the inbox's requests: "Preview the edit" shows v1 -> the edited text, the
    file becomes v2, the edit sent with that preview's id is 412 ("changed since you
    looked"), v2 intact and nothing resumed; an edit without a preview is 428, one with the
    id of an edit of other arguments or of another thread's call is 412 ("belongs to another
    call"); the edit previewed again, with nothing changed since, writes the edited text."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "the model's\n"}, id="call_w")
    script = by_request(
        {
            "update": [reply(tool_calls=[call]), text("Edited.")],
            "also": [reply(tool_calls=[call]), text("Also.")],
        }
    )
    mine = {"path": "notes.md", "content": "the person's\n"}

    async def scenario() -> None:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "update the notes")
                await served.say("u", "also update the notes")  # the same call id and state
                shown = await served.edit_preview("t", "call_w", mine)
                assert "-version 1" in shown["lines"] and "+the person's" in shown["lines"]
                notes.write_text("version 2\n")

                def edit(preview_id: str | None, args: dict = mine) -> dict:
                    decision = {"type": "edit", "args": args}
                    if preview_id is not None:
                        decision["preview_id"] = preview_id
                    return {"decisions": {"call_w": decision}}

                stale = await served.decide("t", edit(shown["preview_id"]))
                assert stale.status_code == 412, stale.text
                said = stale.json()["error"]
                assert "changed since you looked" in said and "another call" not in said
                unbound = await served.decide("t", edit(None))
                assert unbound.status_code == 428, unbound.text
                assert "was edited without the preview it answers" in unbound.json()["error"]
                other_args = await served.edit_preview("t", "call_w", {**mine, "content": "y\n"})
                other_thread = await served.edit_preview("u", "call_w", mine)
                for foreign in (other_args["preview_id"], other_thread["preview_id"]):
                    refused = await served.decide("t", edit(foreign))
                    assert refused.status_code == 412, refused.text
                    said = refused.json()["error"]
                    assert "this preview id belongs to another call" in said, said
                    assert "changed since" not in said
                assert len(llm.requests_with_tools()) == 2  # nothing resumed
                assert notes.read_text() == "version 2\n"

                fresh = await served.edit_preview("t", "call_w", mine)
                assert "-version 2" in fresh["lines"]
                decided = await served.decide("t", edit(fresh["preview_id"]))
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Edited."

    asyncio.run(scenario())
    assert notes.read_text() == "the person's\n"
