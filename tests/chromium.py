"""Debian's headless Chromium, driven by Playwright (never `playwright install`: `make test`
installs the chromium package), shared by every browser test of the session."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

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
