"""Debian's headless Chromium, driven by Playwright (never `playwright install`: `make test`
installs the chromium package), shared by every browser test of the session, and the tab the
tests take in turn (`BrowserThread.tab`, `BrowserThread.done`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
T = TypeVar("T")
# What a new tab has, as Playwright makes one: a tab handed out again gets them back.
VIEWPORT = {"width": 1280, "height": 720}
TIMEOUT_MS = 30_000
BLANK = "about:blank"


def origin(url: str) -> str | None:
    """scheme://host:port of an http(s) URL; None for about:blank, an error page, ..."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


class Unusable(Exception):
    """A tab that cannot be emptied of what its test left, so it is closed, not handed out."""


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
        self.kept: Any = None  # the tab the next test gets (see `tab`)
        self.origins: dict[Any, set[str]] = {}  # every origin each tab has loaded

    def call(self, work: Coroutine[Any, Any, T], timeout: float = 180) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    async def _launch(self) -> Any:
        from playwright.async_api import async_playwright

        self.playwright = await async_playwright().start()
        return await self.playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )

    async def tab(self, viewport: dict[str, int] | None = None) -> Any:
        """A tab for one test, at about:blank, as a new tab is; give it back with `done`.

        A new tab cost ~0.4 CPU s before it loaded anything, most of it a renderer process
        spawned for it and gone when it closed; the same tab navigated again keeps its
        renderer (docs/development.md). So one tab is handed from test to test, emptied in
        between: what the inbox keeps across loads is per origin (the token in sessionStorage,
        what was seen in localStorage), and `done` clears both for the one origin the tab
        loaded, drops the test's routes and cookies, and leaves it at about:blank. A tab it
        cannot empty so (closed, or it loaded two origins, or it is not on its origin now)
        is closed instead, and the next test gets a new one."""
        page, self.kept = self.kept, None
        if page is None:
            page = await self.browser.new_page()
            seen: set[str] = set()
            self.origins[page] = seen
            page.on("framenavigated", lambda frame: seen.add(origin(frame.url) or BLANK))
        self.origins[page].clear()
        await page.set_viewport_size(viewport or VIEWPORT)
        page.set_default_timeout(TIMEOUT_MS)
        page.set_default_navigation_timeout(TIMEOUT_MS)
        return page

    async def done(self, page: Any) -> None:
        """The test is done with `page` (from `tab`): emptied and kept for the next, or
        closed (see `tab`)."""
        loaded = self.origins.get(page, set()) - {BLANK}
        try:
            if page.is_closed() or len(loaded) > 1:
                raise Unusable
            if loaded:
                # Throws on an error page or about:blank, whose storage is not the origin's.
                await page.evaluate("() => { sessionStorage.clear(); localStorage.clear(); }")
            await page.unroute_all(behavior="ignoreErrors")
            await page.goto(BLANK)
            await page.context.clear_cookies()
        except Exception:
            self.origins.pop(page, None)
            if not page.is_closed():
                await page.close()
            return
        self.kept = page

    async def _close(self) -> None:
        await self.browser.close()
        await self.playwright.stop()

    def close(self) -> None:
        try:
            self.call(self._close(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
