"""Issue 43 in the page, in headless Chromium against a real `fsagent serve`: a refresh fetches
only what changed (web/listing.py). A new thread's arrival fetches that thread's entry alone
(every listing answer is read through Playwright's response events), and a decision being made
in another thread (an edit typed, its arguments opened, a reason typed) is left as it was; a
file changed under a waiting call draws that thread again with the new diff, and says so,
while the others still keep what the reviewer did."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from chromium import BrowserThread

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import LISTING, TOKEN, ServeProcess, by_request


def script() -> Any:
    def write(path: str, content: str, call_id: str) -> list[Any]:
        call = tool_call("write_file", {"path": path, "content": content}, id=call_id)
        return [reply(tool_calls=[call]), text("Done.")]

    return by_request({
        "change a": write("a.txt", "new a\n", "c_a"),
        "change b": write("b.txt", "new b\n", "c_b"),
        "change c": write("c.txt", "new c\n", "c_c"),
    })  # fmt: skip


def say(url: str, thread: str, words: str) -> None:
    said = httpx.post(f"{url}/api/threads/{thread}/messages", json={"text": words}, timeout=60)
    assert said.status_code == 200, said.text


def test_a_new_thread_fetches_only_itself_and_a_decision_being_made_elsewhere_stays(
    workspace: Workspace, browser: BrowserThread
):
    for name in "abc":
        (workspace.root / f"{name}.txt").write_text(f"old {name}\n")
    edited = {"path": "a.txt", "content": "my own words\n"}

    async def review(url: str) -> None:
        page = await browser.tab()
        page.set_default_timeout(120_000)  # two shared cores, other tests beside it
        answers: list[Any] = []

        def listing(response: Any) -> None:
            if LISTING.search(response.url):
                answers.append(response)

        page.on("response", listing)

        async def listed_since(mark: int) -> list[tuple[int, int, list[str]]]:
            """(status, bytes, threads whose entries were sent) of each listing answer."""
            found = []
            for answer in answers[mark:]:
                body = b"" if answer.status == 304 else await answer.body()
                sent = json.loads(body)["approvals"] if body else []
                found.append((answer.status, len(body), [item["thread"] for item in sent]))
            return found

        try:
            await asyncio.to_thread(say, url, "a", "change a")
            await asyncio.to_thread(say, url, "b", "change b")
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            await page.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            await page.locator("#live-state", has_text="live").wait_for()
            # The first load sends both (the stream's first word may ask again: nothing sent).
            [(whole, threads)] = [(size, sent) for _, size, sent in await listed_since(0) if sent]
            assert sorted(threads) == ["a", "b"]

            # A decision half made in a, a reason typed in b.
            a = page.locator('article.thread[data-thread="a"]')
            b = page.locator('article.thread[data-thread="b"]')
            await a.locator("details.args-box summary").click()
            await a.locator("input[value=edit]").check()
            await a.locator("textarea.edit-args").fill(json.dumps(edited))
            await b.locator("input[value=reject]").check()
            await b.locator("input.reason").fill("not b, thanks")

            # c arrives: the page is told by the stream and fetches c alone.
            mark = len(answers)
            await asyncio.to_thread(say, url, "c", "change c")
            c = page.locator('article.thread[data-thread="c"]')
            await c.locator("span.add", has_text="+new c").wait_for()
            await page.locator("#inbox-status", has_text="3 thread(s) waiting").wait_for()
            arrived = await listed_since(mark)
            assert [threads for _, _, threads in arrived if threads] == [["c"]]
            assert all(status in (200, 304) for status, _, _ in arrived)
            assert sum(size for _, size, _ in arrived) < whole  # one entry, not all three

            async def untouched() -> None:
                assert await a.locator("details.args-box").get_attribute("open") is not None
                assert await a.locator("input[value=edit]").is_checked()
                assert json.loads(await a.locator("textarea.edit-args").input_value()) == edited
                assert await b.locator("input[value=reject]").is_checked()
                assert await b.locator("input.reason").input_value() == "not b, thanks"

            await untouched()

            # b's file changes under its call: a refresh draws b again, with the new state's
            # diff and a word that it changed; a and c are not sent, and a keeps its edit.
            (workspace.root / "b.txt").write_text("someone else's b\n")
            mark = len(answers)
            await page.click("#refresh")
            await b.locator("span.del", has_text="-someone else's b").wait_for()
            notice = await b.locator(".changed").inner_text()
            assert "This changed while it was on the page" in notice
            assert not await b.locator("input[value=reject]").is_checked()  # decide again
            changed = await listed_since(mark)
            assert [threads for _, _, threads in changed if threads] == [["b"]]
            assert await a.locator("input[value=edit]").is_checked()
            assert json.loads(await a.locator("textarea.edit-args").input_value()) == edited

            # Nothing changed: a 304, and nothing drawn again.
            async with page.expect_response(lambda r: LISTING.search(r.url)) as said:
                await page.click("#refresh")
            assert (await said.value).status == 304
            assert json.loads(await a.locator("textarea.edit-args").input_value()) == edited
        finally:
            page.remove_listener("response", listing)  # the tab goes on to the next test
            await browser.done(page)

    with FakeLLM(script(), auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        try:
            browser.call(review(served.url))
        finally:
            served.kill()
    for name in "abc":
        assert (workspace.root / f"{name}.txt").read_text() != f"new {name}\n"  # nothing ran


@pytest.mark.parametrize("named", [True, False], ids=["with-etag", "without-etag"])
def test_a_refresh_that_crossed_a_look_again_never_leaves_a_state_that_is_gone(
    workspace: Workspace, browser: BrowserThread, named: bool
):
    """A refresh on its way (held here) while the reviewer's yes is refused (412: the file
    changed) and the thread drawn again from the new state; the file then goes back, and the
    held refresh lands saying the thread is as the page named it before: a 304 to the
    listing's ETag it named, or (sent without it, as when the page held less than the whole
    listing) an answer that does not send the thread. The page holds another state now: it
    asks again, and draws the state that is there, never keeping the one that is gone."""
    x = workspace.root / "x.txt"
    x.write_text("old x\n")
    call = tool_call("write_file", {"path": "x.txt", "content": "new x\n"}, id="c_x")
    llm_script = by_request({"change x": [reply(tool_calls=[call]), text("Done.")]})

    async def review(url: str) -> None:
        await asyncio.to_thread(say, url, "x", "change x")
        page = await browser.tab()
        page.set_default_timeout(120_000)
        fetched, release = asyncio.Event(), asyncio.Event()

        async def hold_refresh(route: Any) -> None:
            headers = route.request.headers
            if "known=x%3A" in route.request.url and not release.is_set():
                fetched.set()
                await release.wait()  # then asked of the server as it is by then
                if not named:
                    headers = {k: v for k, v in headers.items() if k.lower() != "if-none-match"}
            await route.continue_(headers=headers)

        try:
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="x"]')
            await thread.locator("span.del", has_text="-old x").wait_for()
            await page.route(LISTING, hold_refresh)
            await page.click("#refresh")
            await fetched.wait()

            x.write_text("someone else's x\n")
            await thread.locator("input[value=approve]").check()
            await thread.locator("button.submit").click()
            await thread.locator(".changed", has_text="changed since you looked").wait_for()
            await thread.locator("span.del", has_text="-someone else's x").wait_for()

            x.write_text("old x\n")  # back to the state the held refresh names
            release.set()
            await thread.locator(".changed", has_text="while it was on the page").wait_for()
            await thread.locator("span.del", has_text="-old x").wait_for()
            assert await thread.locator("span.del", has_text="someone else's").count() == 0
        finally:
            await browser.done(page)

    with FakeLLM(llm_script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        try:
            browser.call(review(served.url))
        finally:
            served.kill()
    assert x.read_text() == "old x\n"  # the refused yes ran nothing
