"""Issue 41 in the page, in headless Chromium against a real `fsagent serve`: a 412 says what
happened. When a call the page drew was decided elsewhere and the model asked again with other
arguments under the same id, a refresh draws it again (issue 43: its entry changed); a yes
sent before that refresh lands (held here) carries the old call's preview id: refused as
another call's ("nothing changed here"), not as a changed file, the new call drawn, and
nothing written that the page did not show."""

from __future__ import annotations

import asyncio

import httpx
from chromium import BrowserThread

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import LISTING, TOKEN, ServeProcess, approve_over_http, by_request, held_refreshes


def test_a_yes_sent_with_another_calls_preview_is_told_apart_from_a_change(
    workspace: Workspace, browser: BrowserThread
):
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    first = tool_call("write_file", {"path": "notes.md", "content": "first\n"}, "c_w")
    second = tool_call("write_file", {"path": "notes.md", "content": "second\n"}, "c_w")
    script = by_request(
        {"write the notes": [reply(tool_calls=[first]), reply(tool_calls=[second]), text("Done.")]}
    )

    async def review(url: str) -> None:
        said = await asyncio.to_thread(
            httpx.post,
            f"{url}/api/threads/t/messages",
            json={"text": "write the notes"},
            timeout=60,
        )
        assert said.status_code == 200, said.text
        page = await browser.tab()
        page.set_default_timeout(120_000)  # two shared cores, other tests beside it
        release = asyncio.Event()
        try:
            await page.route(LISTING, held_refreshes("t", release))
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            call = thread.locator('.call[data-call="c_w"]')
            await call.locator("span.add", has_text="+first").wait_for()

            # Decided elsewhere; the model asks again under the same call id.
            decided = await asyncio.to_thread(approve_over_http, url, "t")
            assert decided.status_code == 200, decided.text
            assert decided.json()["run"] == "pending"
            assert notes.read_text() == "first\n"

            await call.locator("input[value=approve]").check()
            await thread.locator("button.submit").click()
            notice = thread.locator(".changed")
            await notice.wait_for()
            shown = await notice.inner_text()
            assert "another call's preview; nothing changed here" in shown
            assert "changed since you looked" not in shown
            assert "this preview id belongs to another call" in shown  # the server's line
            await call.locator("span.add", has_text="+second").wait_for()
            assert notes.read_text() == "first\n"  # the new call did not run
            release.set()  # the held refresh lands: the new call is the one drawn already

            await call.locator("input[value=approve]").check()
            await thread.locator("button.submit").click()
            await thread.locator(".answer", has_text="Done.").wait_for()
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        try:
            browser.call(review(served.url))
        finally:
            served.kill()
    assert notes.read_text() == "second\n"
