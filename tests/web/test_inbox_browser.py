"""The inbox page in a real browser: Debian's headless Chromium driven by Playwright (never
`playwright install`: `make test` installs the chromium package), against a real `fsagent
serve` process. A person chats a request that pauses, enters the token, sees the pending
calls' diffs, rejects one with a reason, approves the other and reads the answer; then the
files on disk are checked."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from conftest import Workspace, tool_messages, tree_snapshot
from fake_llm import FakeLLM, reply, text, tool_call
from serving import TOKEN, ServeProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NO_LLM = "http://127.0.0.1:9/v1"
T = TypeVar("T")


class BrowserThread:
    """One headless Chromium on a thread of its own, driven by Playwright's async API.

    Playwright's sync API keeps its event loop marked as running in the thread that uses it,
    so with a session-wide browser every later `asyncio.run` in the same test process would
    fail. Here the browser's loop runs on its own thread; a test hands it a coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.playwright: Any = None
        self.browser: Any = self.call(self._launch())

    def call(self, work: Coroutine[Any, Any, T], timeout: float = 180) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    async def _launch(self) -> Any:
        from playwright.async_api import async_playwright

        self.playwright = await async_playwright().start()
        return await self.playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )

    async def _close(self) -> None:
        await self.browser.close()
        await self.playwright.stop()

    def close(self) -> None:
        try:
            self.call(self._close(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[BrowserThread]:
    """One headless Chromium for the whole session. Missing, it fails the test, loudly: a
    browser test that skips in silence would pass a page nobody has seen work."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing, so the inbox page cannot be tested in a browser: run "
            "`make test` (it installs Debian's chromium) or `apt-get install chromium`"
        )
    launched = BrowserThread()
    yield launched
    launched.close()


def test_review_a_batch_in_the_inbox_page(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    (workspace.root / "b.txt").write_text("old line\nkept\n")
    before_outside = tree_snapshot(workspace.outside)
    calls = [
        tool_call("write_file", {"path": "a.txt", "content": "a new file\n"}, id="call_a"),
        tool_call("write_file", {"path": "b.txt", "content": "new line\nkept\n"}, id="call_b"),
    ]
    answer = "b.txt now starts with 'new line'; a.txt was not created."
    script = [reply(tool_calls=calls), text(answer)]

    async def click_through(url: str, llm: FakeLLM) -> None:
        page = await browser.browser.new_page()
        try:
            # The chat view: the request streams until it is queued for review.
            await page.goto(f"{url}/#chat")
            await page.fill("#chat-thread", "t")
            await page.fill("#chat-text", "write a.txt, and change b.txt's first line")
            await page.click("#chat-send")
            await page.locator("#chat-log .notice", has_text="waiting for approval").wait_for()
            assert "Queued for review" in await page.inner_text("#chat-log")
            assert len(llm.requests_with_tools()) == 1  # one model call, then paused

            # The inbox asks for the token once; it is kept in the tab, never in the URL.
            await page.click("#nav-inbox")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            await thread.wait_for()
            assert TOKEN not in page.url
            assert await page.evaluate("sessionStorage.getItem('fsagent.adminToken')") == TOKEN

            call_a = thread.locator('.call[data-call="call_a"]')
            call_b = thread.locator('.call[data-call="call_b"]')
            await call_a.locator("details.args-box summary").click()
            shown_args = await call_a.locator("dl.args pre.arg").all_inner_texts()
            assert shown_args == ["a.txt", "a new file\n"]  # the content as text, not JSON
            assert "a new file" in await call_a.locator("pre.diff").inner_text()
            removed = call_b.locator("pre.diff span.del")
            added = call_b.locator("pre.diff span.add")
            assert await removed.inner_text() == "-old line"
            assert await added.inner_text() == "+new line"
            colours = {
                await line.evaluate("e => getComputedStyle(e).backgroundColor")
                for line in (removed, added)
            }
            assert len(colours) == 2 and "rgba(0, 0, 0, 0)" not in colours  # coloured, apart

            # Nothing decided: the page refuses to submit half a batch.
            await thread.locator("button.submit").click()
            result = thread.locator(".result")
            assert "decide write_file (call_a) first" in await result.inner_text()

            await call_a.locator("input[value=reject]").check()
            await call_a.locator("input.reason").fill("not a.txt, thanks")
            await call_b.locator("input[value=approve]").check()
            await page.screenshot(path=str(tmp_path / "inbox-review.png"), full_page=True)
            await thread.locator("button.submit").click()
            await thread.locator(".answer").wait_for()
            assert await thread.locator(".answer").inner_text() == answer
            shown = await result.inner_text()
            assert "rejected write_file a.txt (call_a): not a.txt, thanks" in shown
            assert "✓ write_file b.txt: done" in shown
            await page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)
        finally:
            await page.close()

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        browser.call(click_through(served.url, llm))
        assert len(llm.requests_with_tools()) == 2
        answered = tool_messages(llm.requests_with_tools()[1])
        assert "Their reason: not a.txt, thanks." in answered[0]["content"]
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0

    for shot in ("inbox-review.png", "inbox.png"):
        assert (tmp_path / shot).stat().st_size > 10_000
    assert (workspace.root / "b.txt").read_text() == "new line\nkept\n"
    assert not (workspace.root / "a.txt").exists()
    assert tree_snapshot(workspace.outside) == before_outside
    audit = workspace.run(NO_LLM, "", "audit", "--json", thread="t")
    rows = json.loads(audit.stdout)
    assert [(r["call_id"], r["decision"], r["by"]) for r in rows] == [
        ("call_a", "reject", "admin"),
        ("call_b", "approve", "admin"),
    ]
