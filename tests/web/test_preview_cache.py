"""The inbox works a diff out once per state (issue 43, web/preview_cache.py), through the
app as the command line wires it (real store, real MCP server, the LM Studio stand-in): a
second listing, a thread's view and the preview endpoint work out nothing again, a new thread
is the only one worked out, and a file changed since gives a new preview_id and its own diff,
never the one kept for the old state, even when it changes while its diff is worked out."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from race_pause import Pauses

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, Served, bound, by_request, serving
from web import payloads
from web.preview_cache import PAUSE_ENV, Drawn, PreviewCache, made

OLD = "".join(f"old line {n}\n" for n in range(2000))
NEW = "".join(f"new line {n}\n" for n in range(2000))
OTHER = "".join(f"other line {n}\n" for n in range(2000))
# A cut rewrite whose added lines each hold a look-alike (р, U+0440) and a trailing space.
PLAIN = "".join(f"index {n} = https://pypi.org/simple\n" for n in range(300))
MARKED = "".join(f"index {n} = https://руpi.org/simple \n" for n in range(300))


def rewrite_script() -> Any:
    big = tool_call("write_file", {"path": "big.txt", "content": NEW}, id="c_big")
    small = tool_call("write_file", {"path": "small.txt", "content": "two\n"}, id="c_small")
    fresh = tool_call("write_file", {"path": "new.txt", "content": NEW}, id="c_new")
    marked = tool_call("write_file", {"path": "conf.txt", "content": MARKED}, id="c_conf")
    return by_request({
        "marked": [reply(tool_calls=[marked]), text("Marked.")],
        "create": [reply(tool_calls=[fresh]), text("Created.")],
        "rewrite": [reply(tool_calls=[big]), text("Rewritten.")],
        "small": [reply(tool_calls=[small]), text("Changed.")],
    })  # fmt: skip


def computed(served: Served) -> int:
    return served.app.state.previews.computed


async def listed(served: Served) -> dict[str, dict[str, Any]]:
    """Each waiting thread's calls by thread, from GET /api/admin/approvals."""
    response = await served.client.get("/api/admin/approvals", headers=ADMIN)
    assert response.status_code == 200, response.text
    return {item["thread"]: item["calls"][0] for item in response.json()["approvals"]}


async def page(served: Served, thread: str, call_id: str) -> dict[str, Any]:
    response = await served.client.post(
        f"/api/admin/approvals/{thread}/preview",
        json={"call_id": call_id, "offset": 0},
        headers={**ADMIN, **JSON},
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_diff_is_worked_out_once_and_shared_by_the_listing_the_thread_and_the_pages(
    workspace: Workspace,
):
    (workspace.root / "big.txt").write_text(OLD)
    (workspace.root / "small.txt").write_text("one\n")

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url, max_tokens=30000) as served:
            await served.say("t", "rewrite")
        # A new server: nothing kept. The thread waits in the store.
        async with serving(workspace, base_url, max_tokens=30000) as served:
            first = (await listed(served))["t"]
            assert computed(served) == 1
            assert "+new line 0" in first["preview_first"]
            assert first["diff_totals"] == {"added": 2000, "removed": 2000}
            again = (await listed(served))["t"]
            assert again == first and computed(served) == 1  # the second listing: nothing
            thread = (await served.client.get("/api/threads/t")).json()
            [pending] = thread["pending"]
            assert pending["preview"] == first["preview"]
            assert pending["preview_id"] == first["preview_id"]
            whole = await page(served, "t", "c_big")
            assert whole["preview_id"] == first["preview_id"] and whole["total"] == 4003
            assert whole["lines"][3] == "-old line 0" and whole["words"]["3"] == [[0, 3]]
            assert computed(served) == 1  # the thread's view and the pages: nothing either
            # A new thread arrives: only it is worked out, at its pause, and listed as kept.
            said = await served.say("u", "small")
            assert "approval" in [kind for kind, _ in said]
            assert computed(served) == 2
            both = await listed(served)
            assert set(both) == {"t", "u"} and computed(served) == 2
            assert "+two" in both["u"]["preview"] and both["t"] == first
            decided = await served.decide("t", bound(first))
            assert decided.status_code == 200, decided.text

    with FakeLLM(rewrite_script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))
    assert (workspace.root / "big.txt").read_text() == NEW


def as_json(value: dict[str, Any]) -> dict[str, Any]:
    """`value` as the API sends it (a line index, as a key, becomes a string)."""
    return dict(json.loads(json.dumps(value)))


def test_a_kept_diff_is_marked_as_the_session_marks_a_preview_worked_out_the_usual_way(
    workspace: Workspace,
):
    (workspace.root / "conf.txt").write_text(PLAIN)

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url, max_tokens=30000) as served:
            await served.say("t", "marked")
            kept = (await listed(served))["t"]
            whole = await page(served, "t", "c_conf")
            session = await served.app.state.service.session("t")
            call = {key: kept[key] for key in ("id", "name", "args")}
            usual = await session.preview(call)
            assert kept["preview"] == usual.lines
            assert kept["preview_id"] == usual.preview_id
            assert kept["preview_flags"] == usual.flag_data()  # its 40 lines: removed ones
            diff = as_json(await payloads.drawn_diff(session, call, usual))
            assert {key: kept[key] for key in diff} == diff
            first_flags = [f for found in diff["preview_first_flags"].values() for f in found]
            assert {"look-alike", "space"} <= {f["kind"] for f in first_flags}
            usual_whole = await session.whole_preview(call)
            facts = as_json(payloads.page_facts(usual_whole, 0, len(whole["lines"])))
            assert whole["lines"] == usual_whole.lines[: len(whole["lines"])]
            assert {key: whole[key] for key in facts} == facts and facts["flags"] != {}

    with FakeLLM(rewrite_script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))


def test_a_changed_file_gets_a_new_preview_id_and_its_own_diff(workspace: Workspace):
    big = workspace.root / "big.txt"
    big.write_text(OLD)

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url, max_tokens=30000) as served:
            await served.say("t", "rewrite")
            before = (await listed(served))["t"]
            assert "-old line 0" in before["preview_first"]
            big.write_text(OTHER)
            after = (await listed(served))["t"]
            assert after["preview_id"] != before["preview_id"]
            assert "-other line 0" in after["preview_first"]
            assert not any("old line" in line for line in after["preview_first"])
            assert computed(served) == 2
            whole = await page(served, "t", "c_big")
            assert whole["preview_id"] == after["preview_id"]
            assert whole["lines"][3] == "-other line 0"
            # A yes to the diff kept for the old state is refused: nothing runs.
            stale = await served.decide("t", bound(before))
            assert stale.status_code == 412, stale.text
            assert big.read_text() == OTHER
            # Back to the old state: its id, and its diff, kept, are right again.
            big.write_text(OLD)
            back = (await listed(served))["t"]
            assert back == before and computed(served) == 2
            decided = await served.decide("t", bound(back))
            assert decided.status_code == 200, decided.text

    with FakeLLM(rewrite_script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))
    assert big.read_text() == NEW


def write(path: Path, content: str) -> Callable[[], None]:
    return lambda: path.write_text(content) and None


async def changed_at(
    served: Served,
    pauses: Pauses,
    thread: str,
    step: str,
    change: Callable[[], None],
    back: Callable[[], None],
) -> dict[str, Any]:
    """A listing during which the file changes at `step`; should the diff go on to a later
    pause after all, it changes `back` there (A-B-A: the plan read again shows the first
    state)."""
    listing = asyncio.create_task(listed(served))
    while await asyncio.to_thread(pauses.next_line) != f"paused preview {step}":
        pauses.go()
    change()
    pauses.go()
    later = asyncio.create_task(asyncio.to_thread(pauses.next_line))
    await asyncio.wait({listing, later}, return_when=asyncio.FIRST_COMPLETED)
    if later.done():
        back()
        pauses.go()
    else:
        os.write(pauses.paused, b"listed\n")  # no later pause: the reader is let go
        await later
    return (await listing)[thread]


def test_a_file_changed_while_its_diff_is_worked_out_is_not_kept(
    workspace: Workspace, tmp_path: Path, monkeypatch: Any
):
    """The state read (the plan), then the diff: a file changed between the two, or after
    the diff and before the plan is read again, is shown as before, and never kept under the
    id of a state its diff is not of."""
    big = workspace.root / "big.txt"
    big.write_text(OLD)
    pauses = Pauses(tmp_path / "pauses")

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url, max_tokens=30000) as served:
            await served.say("t", "rewrite")  # no hook yet: kept at its pause
        monkeypatch.setenv(PAUSE_ENV, str(pauses.folder))
        async with serving(workspace, base_url, max_tokens=30000) as served:
            # Changed after the diff, before the plan is read again.
            now = await changed_at(
                served, pauses, "t", "diffed", write(big, OTHER), write(big, OLD)
            )
            assert "-old line 0" in now["preview_first"]  # shown as it was read, once
            assert len(served.app.state.previews) == 0
            big.write_text(OLD)
            # Changed after the plan, before the dry run: the diff is of another state.
            during = await changed_at(
                served, pauses, "t", "planned", write(big, OTHER), write(big, OLD)
            )
            assert "-other line 0" in during["preview_first"]  # worked out as before
            assert len(served.app.state.previews) == 0
            monkeypatch.delenv(PAUSE_ENV)
            big.write_text(OLD)
            kept = (await listed(served))["t"]
            assert "-old line 0" in kept["preview_first"]  # never the other state's diff
            assert not any("other line" in line for line in kept["preview_first"])
            assert len(served.app.state.previews) == 1
            big.write_text(OTHER)
            fresh = (await listed(served))["t"]
            assert "-other line 0" in fresh["preview_first"]
            assert fresh["preview_id"] == during["preview_id"] != kept["preview_id"]

    with FakeLLM(rewrite_script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))


def test_a_file_that_appears_while_a_new_files_diff_is_worked_out_is_not_kept(
    workspace: Workspace, tmp_path: Path, monkeypatch: Any
):
    """The plan finds no file; one appears before the dry run (and is gone again before the
    plan is read again): that diff is not the new file's, and is never kept as it."""
    new = workspace.root / "new.txt"
    pauses = Pauses(tmp_path / "pauses")

    async def check(base_url: str) -> None:
        async with serving(workspace, base_url, max_tokens=30000) as served:
            await served.say("n", "create")
        monkeypatch.setenv(PAUSE_ENV, str(pauses.folder))
        async with serving(workspace, base_url, max_tokens=30000) as served:
            during = await changed_at(
                served, pauses, "n", "planned", write(new, OLD), lambda: new.unlink()
            )
            assert "-old line 0" in during["preview_first"]  # worked out as before
            assert len(served.app.state.previews) == 0
            new.unlink(missing_ok=True)
            monkeypatch.delenv(PAUSE_ENV)
            shown = (await listed(served))["n"]
            assert shown["preview"][0].startswith("new file new.txt, 2,000 lines")
            assert not any("old line" in line for line in shown["preview"])
            assert len(served.app.state.previews) == 1

    with FakeLLM(rewrite_script(), auto_route="filesystem") as llm:
        asyncio.run(check(llm.base_url))
    assert not new.exists()


def drawn(lines: int) -> Drawn:
    plan = [{"argument": "path", "path": "a", "state": {"exists": False}}]
    call = {"id": f"c{lines}", "name": "write_file", "args": {"path": "a"}}
    return made("t", call, plan, (["@@ -0,0 +1 @@"], []), [f"+{n}" for n in range(lines)])


def test_the_cache_holds_at_most_its_limit_dropping_the_least_recently_used():
    cache = PreviewCache(limit=drawn(100).size() * 2 + drawn(1).size())
    cache.put(("a", 0, None), drawn(100))
    cache.put(("b", 0, None), drawn(100))
    assert cache.get(("a", 0, None)) is not None  # a is used: b is the oldest now
    cache.put(("c", 0, None), drawn(100))
    assert cache.get(("b", 0, None)) is None
    assert cache.get(("a", 0, None)) is not None and cache.get(("c", 0, None)) is not None
    assert cache.held <= cache.limit and len(cache) == 2
    cache.put(("huge", 0, None), drawn(10_000))  # bigger than the whole room: not kept
    assert cache.get(("huge", 0, None)) is None and len(cache) == 2
