"""The admin API's guards, each of which once survived a mutation pass over the whole suite
(issue 19): a token that is only a prefix of the admin token, a body over the cap sent in
chunks without a Content-Length, and a denial in the simple form without a note. Through
httpx's ASGI transport against the app as `fsagent serve` wires it (it hands the app the body
chunk by chunk, as a server does), the real MCP server on temp folders, a real SQLite file and
the LM Studio stand-in. Each asserts what a reviewer would check: the file on disk, the audit
row, what the model was told."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from serving import JSON, TOKEN, serving
from web.bodies import MAX_BODY_BYTES


def write_hello() -> dict[str, Any]:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello\n"}, id="call_1")
    return reply(tool_calls=[call])


def test_a_prefix_of_the_admin_token_is_refused(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                for guess in (TOKEN[:1], TOKEN[:6], TOKEN[:-1], TOKEN + "x"):
                    headers = {"Authorization": f"Bearer {guess}", **JSON}
                    refused = await served.client.post(
                        "/api/admin/approvals/t", json={"approved": True}, headers=headers
                    )
                    assert refused.status_code == 401, (guess, refused.text)
                    listed = await served.client.get("/api/admin/approvals", headers=headers)
                    assert listed.status_code == 401, guess
                assert len(llm.requests_with_tools()) == 1  # nothing resumed
                assert await served.store.audit_rows("t") == []

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()


async def chunked(body: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    """The body in pieces, with no Content-Length: the cap must count them all."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_chunked_body_over_the_cap_is_refused_and_approves_nothing(workspace: Workspace):
    # A valid approval, 2.4 MB long: read whole, it would approve the write.
    body = json.dumps({"approved": True, "note": "x" * 2_400_000}).encode()
    assert len(body) > 2 * MAX_BODY_BYTES

    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Created.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                refused = await served.client.post(
                    "/api/admin/approvals/t",
                    content=chunked(body),
                    headers={"Authorization": f"Bearer {TOKEN}", **JSON},
                )
                assert refused.status_code == 413, refused.text
                assert "content-length" not in refused.request.headers
                assert len(llm.requests_with_tools()) == 1
                assert await served.store.audit_rows("t") == []

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()


def test_a_simple_denial_without_a_note_is_a_rejection(workspace: Workspace):
    async def scenario() -> None:
        with FakeLLM([write_hello(), text("Left it.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                decided = await served.decide("t", {"approved": False})
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Left it."
                [answer] = tool_messages(llm.requests_with_tools()[1])
                assert "rejected write_file" in answer["content"]
                [row] = await served.store.audit_rows("t")
                assert (row.tool, row.decision, row.by) == ("write_file", "reject", "admin")

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()
