"""The thread store read the light way, for the commands that only read (`fsagent threads`,
`threads show`, `approvals`, `audit`): here the SQLite file, with the standard library's
`sqlite3`, opened read-only, and LangGraph's tables read directly, as
langgraph-checkpoint-sqlite 3.1 lays them out. store.postgres_reading reads a Postgres store
into the same `StoredThread`.

It gives what LangGraph's saver gives the graph: the latest checkpoint, its pending writes,
and for each DeltaChannel the nearest stored seed and the writes of the ancestors after it,
oldest first, each checkpoint's in `writes_sort_key` order (`(task_path, task_id, idx)`),
as `langgraph/checkpoint/sqlite/_delta.py` builds them. The replay itself is
core.threads.stored_views'. The parity tests (tests/store/test_reading.py) compare it all
with the graph's own `aget_state` on threads the real graph made.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from store import statements as sql
from store.base import AuditRow
from store.checkpoint_format import Unreadable, loads
from store.migrations import MIGRATIONS_TABLE, newer_than_us

NS = ""  # our graph has no subgraphs: every checkpoint is in the root namespace
LATEST = (
    "SELECT checkpoint_id, type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1"
)
ONE = (
    "SELECT parent_checkpoint_id, type, checkpoint FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
WRITES = (
    "SELECT task_id, channel, type, value, task_path, idx FROM writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
CHANNEL_WRITES = WRITES + " AND channel = ?"


@dataclass
class History:
    """One DeltaChannel's history at a checkpoint (langgraph's `DeltaChannelHistory`)."""

    writes: list[Any] = field(default_factory=list)  # the values, oldest first
    seeded: bool = False
    seed: Any = None


@dataclass
class StoredThread:
    name: str
    checkpoint: dict[str, Any]  # the latest checkpoint, decoded
    pending: list[tuple[str, str, Any, str]]  # (task_id, channel, value, task_path), sorted
    histories: dict[str, History]  # the delta channels the checkpoint does not hold


class Reader(Protocol):
    """What the reading commands read, from either store (store.postgres_reading's too)."""

    location: str

    def made(self) -> bool: ...
    def newer_than_us(self) -> bool: ...
    def thread_names(self) -> list[str]: ...
    def thread_settings(self, name: str) -> dict[str, Any]: ...
    def audit_rows(self, thread: str | None = None) -> list[AuditRow]: ...
    def thread(self, name: str, delta_channels: Sequence[str]) -> StoredThread | None: ...


# Tables a store of ours may hold: LangGraph's checkpointer's and our own (a release before
# migrations made all but the migrations table).
KNOWN_TABLES = frozenset(
    {
        "checkpoints",
        "writes",
        "fsagent_threads",
        "fsagent_ledger",
        "fsagent_undo",
        "fsagent_undo_runs",
        MIGRATIONS_TABLE,
    }
)
SQLITE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


def sort_key(row: Sequence[Any]) -> tuple[str, str, int]:
    """langgraph.checkpoint.base.writes_sort_key of a WRITES row."""
    return (str(row[4] or ""), str(row[0]), int(row[5]))


class SqliteReader:
    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.location = str(path)
        self.conn = conn

    def made(self) -> bool:
        """Whether this file holds anything yet. A database of something else is made too: it
        reads as `Unreadable`, and the store refuses it (store.sqlite.check_tables_are_ours)."""
        return self.conn.execute(SQLITE_TABLES).fetchone() is not None

    def newer_than_us(self) -> bool:
        """Whether a later fsagent migrated this file: its tables may mean what this one does
        not know, so the store's own path reads it (and refuses it, in one line)."""
        try:
            rows = self.conn.execute(f"SELECT number FROM {MIGRATIONS_TABLE}").fetchall()
        except sqlite3.OperationalError:  # no such table: not ours yet, nothing newer
            return False
        return newer_than_us({int(row[0]) for row in rows})

    def thread_names(self) -> list[str]:
        return sorted({str(row[0]) for row in self.conn.execute(sql.THREAD_NAMES)})

    def thread_settings(self, name: str) -> dict[str, Any]:
        """What the thread's first session recorded (its roots, its rules file); {} if none."""
        row = self.conn.execute(sql.THREAD_SETTINGS, (name,)).fetchone()
        return sql.recorded_settings(name, self.location, row[0] if row else None) or {}

    def audit_rows(self, thread: str | None = None) -> list[AuditRow]:
        query, params = sql.AUDIT_ROWS, tuple[str, ...]()
        if thread:
            query, params = query + " WHERE thread = ?", (thread,)
        return [
            AuditRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8])
            for r in self.conn.execute(query + " ORDER BY id", params)
        ]

    def thread(self, name: str, delta_channels: Sequence[str]) -> StoredThread | None:
        latest = self.conn.execute(LATEST, (name, NS)).fetchone()
        if latest is None:
            return None
        checkpoint_id, type_tag, blob = latest
        checkpoint = self._checkpoint(name, type_tag, blob)
        rows = sorted(self.conn.execute(WRITES, (name, NS, checkpoint_id)), key=sort_key)
        pending = [(str(r[0]), str(r[1]), loads(r[2], r[3]), str(r[4] or "")) for r in rows]
        values = checkpoint.get("channel_values") or {}
        versions = checkpoint.get("channel_versions") or {}
        # As langgraph.pregel._checkpoint._delta_channels_to_replay: a channel never written
        # is empty, one held here is read from here, the others are rebuilt.
        wanted = [ch for ch in delta_channels if ch in versions and ch not in values]
        histories = {ch: self._history(name, checkpoint_id, ch) for ch in wanted}
        return StoredThread(name, checkpoint, pending, histories)

    def _checkpoint(self, name: str, type_tag: str, blob: bytes) -> dict[str, Any]:
        checkpoint = loads(type_tag, blob)
        if not isinstance(checkpoint, dict):
            raise Unreadable(f"thread '{name}': a checkpoint that is not a mapping")
        return checkpoint

    def _history(self, name: str, target: str, channel: str) -> History:
        """The walk of `_delta.step_walk_with_row`: from the target's parent up, to the first
        ancestor that holds the channel (the seed) or the root; a repeated id ends it."""
        history = History()
        chain: list[str] = []
        row = self.conn.execute(ONE, (name, NS, target)).fetchone()
        walked = {target}
        parent = row[0] if row else None
        while parent is not None and parent not in walked:
            walked.add(parent)
            row = self.conn.execute(ONE, (name, NS, parent)).fetchone()
            if row is None:
                break
            chain.append(parent)
            values = self._checkpoint(name, row[1], row[2]).get("channel_values") or {}
            if channel in values:
                history.seeded, history.seed = True, values[channel]
                break
            parent = row[0]
        for cid in reversed(chain):  # oldest first
            rows = self.conn.execute(CHANNEL_WRITES, (name, NS, cid, channel))
            history.writes += [loads(r[2], r[3]) for r in sorted(rows, key=sort_key)]
        return history


@contextmanager
def open_sqlite_reader(path: Path) -> Iterator[SqliteReader]:
    """The file opened read-only: never created, never migrated, never written. A file this
    way cannot read (not a database, a table missing) is `Unreadable`."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=5)) as conn:
            yield SqliteReader(path, conn)
    except sqlite3.DatabaseError as error:
        raise Unreadable(f"{path}: {error}") from error
