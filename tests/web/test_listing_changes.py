"""The inbox's listing answers a page with what changed since it drew (issue 43,
web/listing.py), through the app as the command line wires it (real store, real MCP server,
the LM Studio stand-in): nothing changed is a 304 (or, without the listing's ETag, no entry
at all); a new thread is the only entry sent, and its diff the only one worked out; a file
changed under a waiting call sends that thread again with its new preview_id; a decided
thread is said gone."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import httpx

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, Served, approve_shown, by_request, serving


def script() -> Any:
    def write(path: str, content: str, call_id: str) -> list[Any]:
        call = tool_call("write_file", {"path": path, "content": content}, id=call_id)
        return [reply(tool_calls=[call]), text("Done.")]

    return by_request({
        "change a": write("a.txt", "new a\n", "c_a"),
        "change b": write("b.txt", "new b\n", "c_b"),
        "change c": write("c.txt", "new c\n", "c_c"),
    })  # fmt: skip


async def listing(
    served: Served, known: dict[str, str] | None = None, tag: str | None = None
) -> httpx.Response:
    """GET /api/admin/approvals as the page asks it: the etags it holds, the ETag it drew."""
    params = None
    if known is not None:
        pairs = [f"{quote(name, safe='')}:{etag}" for name, etag in known.items()]
        params = {"known": ",".join(pairs)}
    headers = {**ADMIN, **({"If-None-Match": tag} if tag else {})}
    return await served.client.get("/api/admin/approvals", params=params, headers=headers)


def held(answer: dict[str, Any]) -> dict[str, str]:
    """What a page holds after drawing a full answer: each thread's etag."""
    return {t["thread"]: t["etag"] for t in answer["threads"]}


def computed(served: Served) -> int:
    return int(served.app.state.previews.computed)


def test_a_refresh_gets_only_the_threads_that_changed_and_is_told_which_are_gone(
    workspace: Workspace,
):
    for name in "abc":
        (workspace.root / f"{name}.txt").write_text(f"old {name}\n")

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url) as served:
            await served.say("a", "change a")
            await served.say("b", "change b")
            full = await listing(served)
            assert full.status_code == 200, full.text
            first = full.json()
            assert [t["thread"] for t in first["approvals"]] == ["a", "b"]
            assert [t["thread"] for t in first["threads"]] == ["a", "b"] and first["gone"] == []
            assert [i["etag"] for i in first["approvals"]] == [t["etag"] for t in first["threads"]]
            tag = full.headers["etag"]
            known = held(first)
            worked_out = computed(served)

            # Nothing changed: 304 to the listing's ETag, and no entry to the etags alone.
            same = await listing(served, known, tag)
            assert same.status_code == 304 and same.content == b""
            assert same.headers["etag"] == tag
            bare = await listing(served, known)
            assert bare.status_code == 200
            assert bare.json() == {"threads": first["threads"], "approvals": [], "gone": []}
            assert computed(served) == worked_out  # looked at, nothing diffed again

            # One new thread: only it is sent; its diff was worked out in its run, once.
            await served.say("c", "change c")
            assert computed(served) == worked_out + 1
            arrived = await listing(served, known, tag)
            assert arrived.status_code == 200 and arrived.headers["etag"] != tag
            answer = arrived.json()
            assert [item["thread"] for item in answer["approvals"]] == ["c"]
            assert "+new c" in answer["approvals"][0]["calls"][0]["preview"]
            assert [t["thread"] for t in answer["threads"]] == ["a", "b", "c"]
            assert answer["gone"] == []
            assert computed(served) == worked_out + 1
            known, tag = held(answer), arrived.headers["etag"]

            # b's file changes under its waiting call: b alone again, with the new state's
            # preview_id and diff (a kept diff of the old state is never sent as current).
            old_b = next(i for i in first["approvals"] if i["thread"] == "b")["calls"][0]
            (workspace.root / "b.txt").write_text("someone else's b\n")
            changed = await listing(served, known, tag)
            assert changed.status_code == 200
            [b] = changed.json()["approvals"]
            assert b["thread"] == "b" and b["etag"] != known["b"]
            assert b["calls"][0]["preview_id"] != old_b["preview_id"]
            assert "-someone else's b" in b["calls"][0]["preview"]
            known, tag = held(changed.json()), changed.headers["etag"]

            # a is decided: said gone, nothing else sent.
            decided = await served.decide("a", approve_shown(first, "a"))
            assert decided.status_code == 200, decided.text
            left = await listing(served, known, tag)
            assert left.status_code == 200
            assert left.json()["gone"] == ["a"] and left.json()["approvals"] == []
            assert [t["thread"] for t in left.json()["threads"]] == ["b", "c"]

            # A page that holds nothing (an empty `known`) gets everything.
            fresh = await listing(served, {})
            assert [item["thread"] for item in fresh.json()["approvals"]] == ["b", "c"]

            # What the server counted is in Server-Timing, the standard header for it.
            assert f"previews-computed;desc={computed(served)}" in left.headers["server-timing"]

            bad = await served.client.get(
                "/api/admin/approvals", params={"known": "b"}, headers=ADMIN
            )
            assert bad.status_code == 400
            assert "is not NAME:ETAG" in bad.json()["error"]

    with FakeLLM(script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))
    assert (workspace.root / "a.txt").read_text() == "new a\n"
