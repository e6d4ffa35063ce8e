"""The tab the browser tests take in turn (tests/chromium.py `tab` and `done`): handed to the
next test only emptied of what the last one left, so that a test never sees another's state,
even when its server got the same port (the same origin) as an earlier test's."""

from __future__ import annotations

import contextlib
from typing import Any

from chromium import VIEWPORT, BrowserThread
from playwright.async_api import Error as PlaywrightError

from conftest import Workspace
from fake_llm import FakeLLM
from serving import TOKEN, ServeProcess

SEEN = "fsagent.seenApprovals"  # web/static/app.js: what the reviewer has looked at


async def signed_in(page: Any, url: str) -> None:
    await page.goto(f"{url}/")
    await page.fill("#token-input", TOKEN)
    await page.click("#use-token")
    await page.locator("#inbox-status", has_text="Nothing waits").wait_for()


def test_a_tab_is_handed_on_empty_and_one_that_cannot_be_emptied_is_closed(
    workspace: Workspace, browser: BrowserThread
):
    llm = FakeLLM([]).start()
    served = ServeProcess(workspace, llm.base_url)
    url = served.url
    other_origin = url.replace("127.0.0.1", "localhost")

    async def scenario() -> None:
        # A test signs in, leaves something seen and a route that refuses everything, with a
        # viewport of its own.
        first = await browser.tab(viewport={"width": 900, "height": 500})
        assert first.viewport_size == {"width": 900, "height": 500}
        await signed_in(first, url)
        await first.evaluate(f"localStorage.setItem('{SEEN}', '[\"t/call\"]')")
        await first.evaluate("document.cookie = 'left=by-the-first-test'")
        await first.route("**/*", lambda route: route.abort())
        await browser.done(first)

        # The next test on the same origin gets the same tab, as a new one would be: at
        # about:blank, asked for the token again, nothing seen, no route, the usual size.
        second = await browser.tab()
        assert second is first and second.url == "about:blank"
        assert second.viewport_size == VIEWPORT
        await second.goto(f"{url}/")
        await second.locator("#token-input").wait_for()
        assert await second.evaluate("sessionStorage.length + localStorage.length") == 0
        assert await second.evaluate("document.cookie") == ""
        await signed_in(second, url)
        # Two origins loaded: the first one's storage is out of reach, so the tab is closed.
        await second.goto(f"{other_origin}/")
        await browser.done(second)
        assert second.is_closed()

        # Left on an error page (its server gone), a tab is closed too.
        third = await browser.tab()
        assert third is not second
        await signed_in(third, url)
        served.kill()
        # Chromium's error page, whose storage is none of the origin's (Playwright raises too).
        with contextlib.suppress(PlaywrightError):
            await third.reload()
        await browser.done(third)
        assert third.is_closed()
        fourth = await browser.tab()
        assert fourth is not third and fourth.url == "about:blank"
        await browser.done(fourth)

    try:
        browser.call(scenario())
    finally:
        served.kill()
        llm.stop()
