"""Issue 19 over the admin API: an admin's reject is final even when the rules changed while
the thread waited (a new `fsagent serve` loads the new rules), and an admin's approval is
bound to the preview the API served: a file changed since is not written over. Through
httpx's ASGI transport against the app as `fsagent serve` wires it, with the real MCP server,
a real SQLite file and the LM Studio stand-in."""

from __future__ import annotations

import asyncio

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, serving

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
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    call = tool_call("write_file", {"path": "notes.md", "content": "version 2\n"}, id="call_w")

    async def scenario() -> None:
        with FakeLLM([reply(tool_calls=[call]), text("Told.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "update the notes")
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [waiting] = listed.json()["approvals"]
                assert "-version 1" in waiting["calls"][0]["preview"]
                notes.write_text("the person's own edit\n")
                decided = await served.decide("t", {"approved": True})
                assert decided.status_code == 200, decided.text
                [answer] = tool_messages(llm.requests_with_tools()[1])
                assert "precondition failed: 'notes.md' changed since" in answer["content"]

    asyncio.run(scenario())
    assert notes.read_text() == "the person's own edit\n"
