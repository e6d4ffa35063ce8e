"""The web tests' shared fixture: one browser for the whole session (see tests/chromium.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chromium import CHROMIUM, BrowserThread


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
