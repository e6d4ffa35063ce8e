"""What a store tells a person: the errors it raises (the message is the one line they see),
and how a missing store is said."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Missing:
    """A location that holds no store yet, in the words the commands that only read use."""

    note: str  # "the file does not exist yet": why a listing is empty
    sentence: str  # "threads.db does not exist": why a named thread is not there
    no_store: str  # the whole line, for a command that needs the store to be there


class StoreError(Exception):
    """The store cannot be opened or used (missing folder, damaged, foreign, locked or newer
    file). Nothing in it was changed."""


def disk_full_message(location: str) -> str:
    return f"disk full writing {location}; free space or pass another --db"


def read_only_message(location: str) -> str:
    return (
        f"{location} is read-only: threads, threads show, approvals and audit can read it; "
        "to change a thread, make it writable or pass another --db"
    )


class ThreadBusy(Exception):
    """The thread is open in another live process; the message names that process."""


# SQLite's primary result codes (sqlite3.h) for a file that cannot take a write.
SQLITE_READONLY = 8
SQLITE_FULL = 13


def failure_of(error: BaseException, location: str) -> StoreError | None:
    """The store's own failure behind `error`, as the one line a person reads, or None when
    `error` is something else. A run that meets one cannot go on: the thread cannot be kept.
    SQLite's errors are judged by their result code (Python 3.11 carries it)."""
    if isinstance(error, StoreError):
        return error
    import sqlite3

    if not isinstance(error, sqlite3.Error):
        return None
    code = (getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == SQLITE_FULL or "database or disk is full" in str(error):
        return StoreError(disk_full_message(location))
    if code == SQLITE_READONLY:
        return StoreError(read_only_message(location))
    return None
