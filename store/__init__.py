"""Where threads are kept: one interface (`store.base.Store`) for everything a thread store
holds, and the one place that knows which database a location names: a `postgresql://` (or
`postgres://`) URL is a Postgres database, anything else a SQLite file. No SQL lives outside
this package.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import Missing, StoreError, ThreadBusy, failure_of
from store.location import is_postgres, shown

if TYPE_CHECKING:
    from store.base import Store

__all__ = [
    "Missing", "StoreError", "ThreadBusy", "failure_of", "missing", "open_store", "shown",
]  # fmt: skip


@asynccontextmanager
async def open_store(location: str | Path) -> AsyncIterator[Store]:
    """The store at `location`, created with our tables when new."""
    # Each database's driver is imported only when a location names it.
    if is_postgres(location):
        from store.postgres import open_postgres_store

        async with open_postgres_store(str(location)) as store:
            yield store
        return
    from store.sqlite import open_sqlite_store

    async with open_sqlite_store(Path(location)) as sqlite_store:
        yield sqlite_store


def missing(location: str | Path, *, need_file: bool = False) -> Missing | None:
    """None when `location` holds a store (or, for SQLite, any file: opening it judges it);
    else what a command that only reads says instead. Nothing is created."""
    if is_postgres(location):
        from store.postgres_connection import missing_tables

        return missing_tables(str(location))
    return missing_file(Path(location), need_file=need_file)


def missing_file(path: Path, *, need_file: bool = False) -> Missing | None:
    # Here, not in store.sqlite: a listing of a file that does not exist loads no driver.
    if path.is_file() if need_file else path.exists():
        return None
    return Missing(
        note="the file does not exist yet",
        sentence=f"{path} does not exist",
        no_store=f"--db {path}: no such thread file; pass the --db fsagent ran with",
    )
