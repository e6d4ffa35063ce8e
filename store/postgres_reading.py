"""The Postgres store read the light way, for the commands that only read (`fsagent threads`,
`threads show`, `approvals`, `audit`): psycopg, one read-only transaction, and LangGraph's
tables read directly, as langgraph-checkpoint-postgres 3.2 lays them out.

That saver splits a checkpoint: the checkpoint itself is JSONB in `checkpoints`, holding the
plain values (None, str, int, float, bool) inline, and every other value is a msgpack blob in
`checkpoint_blobs`, keyed by its channel and the version `channel_versions` gives it there.
A DeltaChannel's snapshot is a blob too, with a `true` marker left inline. Pending writes are
in `checkpoint_writes`, as in SQLite.

It gives what store.reading's SQLite reader gives (a `StoredThread`), read as
`AsyncPostgresSaver.aget_tuple` and `aget_delta_channel_history` read it: the ancestors are
walked newest first, a page at a time, to the first one that holds the channel (a blob that is
not "empty", or an inline value that is not None); that one seeds the replay, and its writes
and those of the checkpoints after it are the history. tests/store/test_postgres_reading.py
compares it with the graph's own `aget_state` on a store LangGraph's saver wrote.

Checkpoints older than LangGraph's format 4 kept pending sends in their parent's writes; the
saver moves them on reading, this reader does not, so it reads such a thread as `Unreadable`
and the command reads it through the graph. (Our graph sends nothing, but a reader that
guesses is worse than one that falls back.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from store import statements as sql
from store.base import AuditRow
from store.checkpoint_format import Unreadable, loads
from store.location import shown
from store.migrations import MIGRATIONS_TABLE, newer_than_us
from store.postgres_connection import EXISTING_TABLES, connect
from store.reading import KNOWN_TABLES, NS, History, StoredThread, sort_key

CHECKPOINT_FORMAT = 4  # langgraph's `v` since pending sends moved into the checkpoint
PAGE = 256  # ancestors read per query while looking for a seed; a snapshot is rarely further

LATEST = (
    "SELECT checkpoint_id, checkpoint FROM checkpoints "
    "WHERE thread_id = %s AND checkpoint_ns = %s ORDER BY checkpoint_id DESC LIMIT 1"
)
# The blobs of the values a checkpoint holds (its channel_versions), as the saver's SELECT_SQL.
BLOBS = (
    "SELECT b.channel, b.type, b.blob FROM checkpoints c "
    "CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
    "JOIN checkpoint_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
    "AND b.channel = v.key AND b.version = v.value "
    "WHERE c.thread_id = %s AND c.checkpoint_ns = %s AND c.checkpoint_id = %s"
)
WRITES = (
    "SELECT task_id, channel, type, blob, task_path, idx FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
)
# One page of ancestors, newest first, each with what it holds of one channel (the saver's
# `_build_delta_stage1_sql` for one channel).
ANCESTORS = (
    "SELECT checkpoint_id, parent_checkpoint_id, "
    "checkpoint -> 'channel_versions' ->> %(channel)s AS version, "
    "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id "
    "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = %(channel)s "
    "AND b.version = c.checkpoint -> 'channel_versions' ->> %(channel)s "
    "AND b.type <> 'empty') AS has_blob, "
    "checkpoint -> 'channel_values' -> %(channel)s AS inline "
    "FROM checkpoints c WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s "
    "AND checkpoint_id < %(below)s ORDER BY checkpoint_id DESC LIMIT %(page)s"
)
CHAIN_WRITES = (
    "SELECT task_id, channel, type, blob, task_path, idx, checkpoint_id FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s AND checkpoint_id = ANY(%s)"
)
SEED_BLOB = (
    "SELECT type, blob FROM checkpoint_blobs "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s AND version = %s"
)


class PostgresReader:
    def __init__(self, url: str, conn: psycopg.Connection[Any]) -> None:
        self.location = shown(url)
        self.conn = conn

    def made(self) -> bool:
        """Whether this database holds a store yet (other tables may share it)."""
        tables = {str(row[0]) for row in self.conn.execute(EXISTING_TABLES)}
        return bool(tables & KNOWN_TABLES)

    def newer_than_us(self) -> bool:
        """Whether a later fsagent migrated this database (see SqliteReader's)."""
        rows = self.conn.execute(f"SELECT number FROM {MIGRATIONS_TABLE}").fetchall()
        return newer_than_us({int(row[0]) for row in rows})

    def thread_names(self) -> list[str]:
        return sorted({str(row[0]) for row in self.conn.execute(sql.THREAD_NAMES)})

    def thread_settings(self, name: str) -> dict[str, Any]:
        row = self.conn.execute(sql.psycopg(sql.THREAD_SETTINGS), (name,)).fetchone()
        return sql.recorded_settings(name, self.location, row[0] if row else None) or {}

    def audit_rows(self, thread: str | None = None) -> list[AuditRow]:
        query, params = sql.AUDIT_ROWS, tuple[str, ...]()
        if thread:
            query, params = query + " WHERE thread = ?", (thread,)
        rows = self.conn.execute(sql.psycopg(query + " ORDER BY id"), params)
        return [
            AuditRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8]) for r in rows
        ]

    def thread(self, name: str, delta_channels: Sequence[str]) -> StoredThread | None:
        latest = self.conn.execute(LATEST, (name, NS)).fetchone()
        if latest is None:
            return None
        checkpoint_id, checkpoint = latest
        if not isinstance(checkpoint, dict):
            raise Unreadable(f"thread '{name}': a checkpoint that is not a mapping")
        if int(checkpoint.get("v") or 0) < CHECKPOINT_FORMAT:
            raise Unreadable(f"thread '{name}': a checkpoint of format {checkpoint.get('v')}")
        blobs = {
            str(channel): loads(type_tag, blob)
            for channel, type_tag, blob in self.conn.execute(BLOBS, (name, NS, checkpoint_id))
            if type_tag != "empty"
        }
        # The blob is the value where the checkpoint holds only a snapshot's `true` marker.
        values = {**(checkpoint.get("channel_values") or {}), **blobs}
        checkpoint = {**checkpoint, "channel_values": values}
        rows = sorted(self.conn.execute(WRITES, (name, NS, checkpoint_id)), key=sort_key)
        pending = [(str(r[0]), str(r[1]), loads(r[2], r[3]), str(r[4] or "")) for r in rows]
        versions = checkpoint.get("channel_versions") or {}
        wanted = [ch for ch in delta_channels if ch in versions and ch not in values]
        histories = {ch: self._history(name, checkpoint_id, ch) for ch in wanted}
        return StoredThread(name, checkpoint, pending, histories)

    def _history(self, name: str, target: str, channel: str) -> History:
        """The ancestors from the target's parent up to the seed (or the root), then the
        channel's writes of each, oldest first."""
        parent_of: dict[str, str | None] = {}
        holds: dict[str, tuple[str | None, bool, Any]] = {}  # cid -> (version, blob, inline)
        target_row = self.conn.execute(
            "SELECT parent_checkpoint_id FROM checkpoints "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (name, NS, target),
        ).fetchone()
        current = target_row[0] if target_row else None
        chain: list[str] = []
        seed: tuple[str | None, Any] | None = None  # (blob version, inline value)
        below = target
        while current is not None and seed is None:
            if current not in parent_of:  # read the next page of ancestors
                page = self.conn.execute(
                    ANCESTORS,
                    {"channel": channel, "thread": name, "ns": NS, "below": below, "page": PAGE},
                ).fetchall()
                if not page:
                    break  # the chain names a checkpoint that is not there: no seed
                for cid, parent, version, has_blob, inline in page:
                    parent_of[cid] = parent
                    holds[cid] = (version, bool(has_blob), inline)
                below = page[-1][0]
                continue
            if current in chain:
                break  # a repeated id ends the walk, as in the SQLite reader
            chain.append(current)
            version, has_blob, inline = holds[current]
            if has_blob:  # a blob wins: for a snapshot the inline value is only its marker
                seed = (version, None)
            elif inline is not None:
                seed = (None, inline)
            current = parent_of[current]
        history = History()
        if seed is not None:
            history.seeded, history.seed = self._seed_value(name, channel, *seed)
        by_checkpoint: dict[str, list[Any]] = {}
        found: list[Any] = []
        if chain:
            found = self.conn.execute(CHAIN_WRITES, (name, NS, channel, chain)).fetchall()
        for row in found:
            by_checkpoint.setdefault(str(row[6]), []).append(row)
        for cid in reversed(chain):  # oldest first
            ordered = sorted(by_checkpoint.get(cid, []), key=sort_key)
            history.writes += [loads(r[2], r[3]) for r in ordered]
        return history

    def _seed_value(
        self, name: str, channel: str, version: str | None, inline: Any
    ) -> tuple[bool, Any]:
        """Whether the walk's seed is there, and its value. The saver, finding no blob (or
        an "empty" one) at the version, starts the replay empty; so does this."""
        if version is None:
            return True, inline
        row = self.conn.execute(SEED_BLOB, (name, NS, channel, version)).fetchone()
        if row is None or row[0] == "empty":
            return False, None
        return True, loads(row[0], row[1])


@contextmanager
def open_postgres_reader(url: str) -> Iterator[PostgresReader]:
    """One read-only transaction, so every thread is read as of one moment; it creates,
    migrates and writes nothing. What this way cannot read is `Unreadable` (the command
    reads it through the graph); a connection that fails is the store's one line."""
    with connect(url) as conn:
        conn.autocommit = False
        conn.read_only = True
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        try:
            with conn.transaction():
                yield PostgresReader(url, conn)
        except psycopg.Error as error:  # a table missing, the server gone mid-read
            raise Unreadable(f"{shown(url)}: {error}") from error
