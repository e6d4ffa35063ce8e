"""`fsagent threads`, `threads show NAME`, `approvals` and `audit` the light way: the store
read directly (store.reading, read-only), threads judged from it (core.threads.stored_views),
printed by terminal.thread_listing. Nothing of LangGraph, langchain, the MCP client or the
model client is imported.

A SQLite file is read by store.reading, a Postgres URL by store.postgres_reading (psycopg,
imported only then). Each command returns None where it cannot read a store this way, and
cli/threads.py reads it through the graph then, as before: a store without our tables (opening it
the usual way migrates it), or a thread holding a value this reader does not decode (a
LangGraph upgrade that changed the format; tests/store/test_reading.py fails then, too).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from core.threads.stored_views import MESSAGES, StoredView, stored_view
from core.threads.thread_names import name_among, no_thread
from store.checkpoint_format import Unreadable
from store.location import is_postgres
from store.reading import Reader, open_sqlite_reader
from terminal import thread_listing as listing

# Test-only: read through the graph, so a test can compare the two readings' output.
TEST_HEAVY_ENV = "FSAGENT_TEST_HEAVY_READ"


def threads(location: str) -> int | None:
    return _read(location, lambda reader: listing.print_listing(views(reader), reader.location))


def approvals(location: str) -> int | None:
    return _read(location, lambda reader: listing.print_approvals(views(reader)))


def audit(location: str, thread: str | None, as_json: bool) -> int | None:
    def act(reader: Reader) -> int:
        rows = reader.audit_rows(thread)
        return listing.print_audit(rows, thread, reader.location, as_json)

    return _read(location, act)


def show(location: str, given: str) -> int | None:
    def act(reader: Reader) -> int:
        name = name_among(reader.thread_names(), given)
        stored = reader.thread(name, [MESSAGES]) if name is not None else None
        if stored is None:
            raise no_thread(given, reader.location)
        return listing.print_thread(stored_view(stored))

    return _read(location, act)


def views(reader: Reader) -> list[StoredView]:
    """Every thread with a checkpoint, judged: what `core.threads.threads.all_views` gives."""
    found = (reader.thread(name, [MESSAGES]) for name in reader.thread_names())
    return [stored_view(thread) for thread in found if thread is not None]


def _read(location: str, act: Callable[[Reader], int]) -> int | None:
    """`act` on the store, or None to read it through the graph. Each command judges every
    thread before it prints, so a fallback never repeats a line."""
    if os.environ.get(TEST_HEAVY_ENV):
        return None
    try:
        with open_reader(location) as reader:
            if reader.newer_than_us():
                return None
            return act(reader)
    except Unreadable:
        return None


def open_reader(location: str) -> AbstractContextManager[Reader]:
    if is_postgres(location):
        from store.postgres_reading import open_postgres_reader

        return open_postgres_reader(location)
    return open_sqlite_reader(Path(location))
