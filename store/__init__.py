"""Where threads are kept: one interface (`store.base.Store`) for everything the thread file
holds, and the one place that knows which database a location names. No SQL lives outside
this package."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import StoreError, ThreadBusy

if TYPE_CHECKING:
    from store.base import Store

__all__ = ["StoreError", "ThreadBusy", "open_store"]


@asynccontextmanager
async def open_store(location: Path) -> AsyncIterator[Store]:
    """The store at `location`: a SQLite file, created with our tables when new."""
    # Each database's driver is imported only when a location names it.
    from store.sqlite import open_sqlite_store

    async with open_sqlite_store(location) as store:
        yield store
