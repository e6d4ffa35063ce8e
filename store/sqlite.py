"""The embedded store: one SQLite file (`threads.db`) holding LangGraph's checkpoints and ours.

Two connections to the one file: LangGraph's saver has its own, and ours runs in autocommit
mode, so a ledger row is on disk before the write it describes starts. The file runs in WAL
mode (readers never block the writer) with a busy timeout, and `synchronous=NORMAL`: every
commit survives a killed process, which is what we promise; only a power cut can lose the
last ones, where FULL would cost an fsync per checkpoint.

A file that is not ours (not SQLite, another program's database, damaged, locked, or written
by a newer fsagent) is refused with one line and never changed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from store import statements as sql
from store.base import AuditRow, LedgerEntry, LedgerRow, ThreadRecord, UndoRecord, UndoRun
from store.errors import StoreError, ThreadBusy, failure_of, read_only_message
from store.migrations import MIGRATIONS_TABLE, newer_message, newer_than_us, pending
from store.reading import KNOWN_TABLES, SQLITE_TABLES

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_SECONDS = 10.0


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SQLiteStore:
    """The store on one SQLite file; open it with `open_sqlite_store`.

    One connection serves every thread a process runs at once (the HTTP service runs several):
    `_lock` keeps one method's statements together, so a transaction of one (taking a
    thread's lock, recording a batch of audit rows) never takes in a statement of another.
    """

    def __init__(
        self,
        path: Path,
        conn: aiosqlite.Connection,
        saver: AsyncSqliteSaver,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.conn = conn
        self.saver = saver
        self.read_only = read_only  # a file fsagent may read but not write (see open_sqlite_store)
        self._lock = asyncio.Lock()

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def checkpointer(self) -> AsyncSqliteSaver:
        return self.saver

    # -- the registry and its lock -------------------------------------------------------------

    @asynccontextmanager
    async def hold(self, thread: str) -> AsyncIterator[None]:
        if self.read_only:  # every command that changes a thread holds it first
            raise StoreError(read_only_message(str(self.path)))
        async with self._lock:
            await self._take(thread)
        try:
            yield
        finally:
            # Best effort: a lock left behind (the disk filled up meanwhile) names a pid that
            # is gone, which the next opener sees.
            async with self._lock:
                with suppress(sqlite3.Error):
                    await self.conn.execute(
                        "UPDATE fsagent_threads SET pid = NULL WHERE name = ? AND pid = ?",
                        (thread, os.getpid()),
                    )

    async def _take(self, thread: str) -> None:
        # BEGIN IMMEDIATE takes the file's write lock, so check-and-set is one step even when
        # two processes open the same thread at the same moment.
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise failure_of(error, str(self.path)) or StoreError(
                locked_message(self.path)
            ) from error
        try:
            async with self.conn.execute(
                "SELECT pid FROM fsagent_threads WHERE name = ?", (thread,)
            ) as cursor:
                row = await cursor.fetchone()
            holder = row[0] if row else None
            if holder and holder != os.getpid() and process_alive(holder):
                raise ThreadBusy(
                    f"thread '{thread}' is open in another fsagent process (pid {holder}); "
                    "finish there first, or pass another --thread"
                )
            await self.conn.execute(
                "INSERT INTO fsagent_threads (name, created_at, pid, host, opened_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE "
                "SET pid = excluded.pid, host = excluded.host, opened_at = excluded.opened_at",
                (thread, now(), os.getpid(), socket.gethostname(), now()),
            )
            await self.conn.execute("COMMIT")
        except BaseException:
            await rollback(self.conn)
            raise

    async def thread_names(self) -> list[str]:
        # Asked of the tables, not by loading every checkpoint.
        return sorted({str(row[0]) for row in await self._fetch(sql.THREAD_NAMES)})

    async def forget(self, thread: str) -> None:
        await self.saver.adelete_thread(thread)
        async with self._lock:
            for table, column in sql.THREAD_TABLES:
                await self.conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (thread,))

    # -- the ledger ------------------------------------------------------------------------------

    async def ledger_row(self, thread: str, message_id: str, call_id: str) -> LedgerRow | None:
        found = await self._fetch(sql.LEDGER_ROW, (thread, message_id, call_id))
        return LedgerRow(found[0][0], found[0][1], bool(found[0][2])) if found else None

    async def ledger_claim(
        self, thread: str, message_id: str, call_id: str, tool: str, args: Any
    ) -> bool:
        async with self._lock:
            cursor = await self.conn.execute(
                sql.LEDGER_CLAIM, (thread, message_id, call_id, tool, json.dumps(args), now())
            )
            return cursor.rowcount == 1

    async def ledger_done(
        self, thread: str, message_id: str, call_id: str, result: str, failed: bool
    ) -> None:
        async with self._lock:
            await self.conn.execute(
                sql.LEDGER_DONE, (result, int(failed), now(), thread, message_id, call_id)
            )

    # -- the audit log ---------------------------------------------------------------------------

    async def record_audit(self, rows: list[AuditRow]) -> None:
        if not rows:
            return
        async with self._lock, self._transaction():
            await self.conn.executemany(sql.AUDIT_ADD, [sql.audit_values(row) for row in rows])

    async def audit_rows(self, thread: str | None = None) -> list[AuditRow]:
        query, params = sql.AUDIT_ROWS, tuple[str, ...]()
        if thread:
            query, params = query + " WHERE thread = ?", (thread,)
        found = await self._fetch(query + " ORDER BY id", params)
        return [
            AuditRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8])
            for r in found
        ]

    # -- copying a thread ------------------------------------------------------------------------

    async def thread_settings(self, thread: str) -> dict[str, Any] | None:
        rows = await self._fetch(sql.THREAD_SETTINGS, (thread,))
        return sql.recorded_settings(thread, self.location, rows[0][0] if rows else None)

    async def record_thread_settings(self, thread: str, settings: dict[str, Any]) -> None:
        async with self._lock:
            await self.conn.execute(sql.SETTINGS_RECORD, (json.dumps(settings), thread))

    async def thread_record(self, thread: str) -> ThreadRecord:
        registered = await self._fetch(sql.REGISTERED_AT, (thread,))
        ledger = await self._fetch(sql.LEDGER_OF_THREAD, (thread,))
        return ThreadRecord(
            name=thread,
            created_at=registered[0][0] if registered else None,
            settings=registered[0][1] if registered else None,
            ledger=tuple(
                LedgerEntry(*row[:7], bool(row[7]), *row[8:])  # type: ignore[call-arg]
                for row in ledger
            ),
            undo=tuple(await self.undo_records(thread)),
            undo_runs=tuple(await self._undo_runs(thread)),
        )

    async def add_thread_record(self, record: ThreadRecord) -> None:
        async with self._lock, self._transaction("BEGIN IMMEDIATE"):
            # The copy's holder registered the thread already: it keeps the original's date.
            await self.conn.execute(
                sql.REGISTER_COPY, (record.name, record.created_at or now(), record.settings)
            )
            await self.conn.executemany(
                sql.LEDGER_COPY, [entry.values() for entry in record.ledger]
            )
            for undo in record.undo:  # one at a time: each takes the next seq, in order
                await self.conn.execute(sql.UNDO_COPY, undo.values(kept_at=now()))
            await self.conn.executemany(
                sql.UNDO_RUN_START,
                [
                    (run.thread, run.undo_id, json.dumps(run.plan), run.status, now())
                    for run in record.undo_runs
                ],
            )

    # -- undo ------------------------------------------------------------------------------------

    async def keep_undo(
        self,
        thread: str,
        message_id: str,
        call_id: str,
        turn: int,
        tool: str,
        args: Any,
        record: dict[str, Any],
        size: int,
    ) -> None:
        values = sql.undo_keep_values(
            thread, message_id, call_id, turn, tool, args, record, size, now()
        )
        async with self._lock:
            await self.conn.execute(sql.UNDO_KEEP, values)

    async def undo_records(self, thread: str) -> list[UndoRecord]:
        found = await self._fetch(sql.UNDO_RECORDS, (thread,))
        return [
            UndoRecord(
                r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), json.loads(r[7]), r[8], r[9]
            )
            for r in found
        ]

    async def undo_bytes(self, thread: str) -> int:
        found = await self._fetch(sql.UNDO_BYTES, (thread,))
        return int(found[0][0]) if found else 0

    async def begin_undo(
        self, thread: str, undo_id: str, plan: dict[str, Any], seqs: list[int]
    ) -> bool:
        marks = ", ".join("?" for _ in seqs)
        async with self._lock, self._transaction("BEGIN IMMEDIATE"):
            async with self.conn.execute(
                f"SELECT COUNT(*) FROM fsagent_undo WHERE thread = ? AND seq IN ({marks}) "
                "AND undone_by IS NULL",
                (thread, *seqs),
            ) as cursor:
                row = await cursor.fetchone()
            if not row or row[0] != len(set(seqs)):
                return False  # nothing was written: the commit ends an empty transaction
            await self.conn.execute(
                sql.UNDO_RUN_START,
                (thread, undo_id, json.dumps(plan, ensure_ascii=False), "running", now()),
            )
            await self.conn.execute(
                f"UPDATE fsagent_undo SET undone_by = ? WHERE thread = ? AND seq IN ({marks})",
                (undo_id, thread, *seqs),
            )
        return True

    async def unfinished_undo(self, thread: str) -> UndoRun | None:
        runs = [run for run in await self._undo_runs(thread) if run.status == "running"]
        return runs[0] if runs else None

    async def _undo_runs(self, thread: str) -> list[UndoRun]:
        found = await self._fetch(sql.UNDO_RUNS, (thread,))
        return [UndoRun(row[0], row[1], json.loads(row[2]), row[3]) for row in found]

    async def finish_undo(self, thread: str, undo_id: str) -> None:
        async with self._lock:
            await self.conn.execute(sql.UNDO_RUN_DONE, (now(), thread, undo_id))

    # -- one connection, shared by concurrent runs -------------------------------------------------

    async def _fetch(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        async with self._lock, self.conn.execute(query, params) as cursor:
            return list(await cursor.fetchall())

    @asynccontextmanager
    async def _transaction(self, begin: str = "BEGIN") -> AsyncIterator[None]:
        """Statements as one transaction: committed if the block ends, rolled back if it
        raises. The caller holds `_lock`."""
        await self.conn.execute(begin)
        try:
            yield
        except BaseException:
            await rollback(self.conn)
            raise
        await self.conn.execute("COMMIT")

    # -- our schema ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        async with self._lock:
            return len(await applied_migrations(self.conn))


def process_alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie has died; only its parent has not
    looked yet). psutil, not /proc, so it answers on macOS as on Linux; imported here, as
    only a lock held by another pid asks."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # alive, but someone else's


def locked_message(path: Path) -> str:
    return f"{path} is locked by another program; close it there or pass another --db"


# --- opening the file ----------------------------------------------------------------------------


def check_file_is_ours(path: Path) -> None:
    """Refuse, before SQLite touches it, a file that is not a SQLite database at all."""
    if not path.exists():
        if not path.parent.is_dir():
            raise StoreError(
                f"--db {path}: folder {path.parent} does not exist; create it or pick another"
            )
        return
    if path.is_dir():
        raise StoreError(f"--db {path} is a folder; pass a file")
    try:
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise StoreError(f"cannot read {path}: {error.strerror}; pass another --db") from error
    if head and head != SQLITE_HEADER:
        raise StoreError(
            f"{path} is not an fsagent threads file (not a SQLite database); it was left "
            "untouched. Pass another --db"
        )


async def connect(path: Path, read_only: bool = False, **options: Any) -> aiosqlite.Connection:
    # A file on a read-only mount (or one we may not write) is opened read-only, and as
    # immutable when its folder cannot take WAL's shared-memory file either: nobody can be
    # writing it then (https://sqlite.org/uri.html#uriimmutable).
    target = str(path)
    if read_only:
        target = read_only_uri(path)
        options["uri"] = True
    try:
        conn = await aiosqlite.connect(target, timeout=BUSY_TIMEOUT_SECONDS, **options)
    except sqlite3.Error as error:
        raise failure_of(error, str(path)) or StoreError(
            f"cannot open {path}: {error}; pass another --db"
        ) from error
    await conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    return conn


def read_only_uri(path: Path) -> str:
    uri = path.resolve().as_uri() + "?mode=ro"
    return uri if os.access(path.parent, os.W_OK) else uri + "&immutable=1"


def file_state(path: Path) -> tuple[bool, bool]:
    """(whether opening it creates it, whether it may only be read)."""
    created = not path.exists()
    return created, not created and not os.access(path, os.W_OK)


async def applied_migrations(conn: aiosqlite.Connection) -> set[int]:
    async with conn.execute(f"SELECT number FROM {MIGRATIONS_TABLE}") as cursor:
        return {int(row[0]) for row in await cursor.fetchall()}


async def migrate(conn: aiosqlite.Connection, path: Path) -> None:
    """Apply what `store.migrations` has and the file has not, one transaction each."""
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
        "(number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    applied = await applied_migrations(conn)
    if newer_than_us(applied):
        raise StoreError(newer_message(str(path), applied))
    for migration in pending(applied):
        await conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the lock.
            if migration.number not in await applied_migrations(conn):
                for statement in migration.for_dialect("sqlite"):
                    await conn.execute(statement)
                await conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (number, name, applied_at) VALUES (?, ?, ?)",
                    (migration.number, migration.name, now()),
                )
            await conn.execute("COMMIT")
        except BaseException:
            await rollback(conn)
            raise


async def rollback(conn: aiosqlite.Connection) -> None:
    """Roll back what is open. SQLite may have rolled back itself (a full disk does): a second
    ROLLBACK would fail with "no transaction is active" and hide the cause."""
    if conn.in_transaction:
        await conn.execute("ROLLBACK")


async def check_tables_are_ours(conn: aiosqlite.Connection, path: Path) -> None:
    async with conn.execute(SQLITE_TABLES) as cursor:
        tables = {row[0] for row in await cursor.fetchall()}
    if tables and not tables & KNOWN_TABLES:
        shown = ", ".join(sorted(tables)[:5])
        raise StoreError(
            f"{path} is a SQLite database of something else (tables: {shown}), not an "
            "fsagent threads file; it was left untouched. Pass another --db"
        )


async def prepare(conn: aiosqlite.Connection, path: Path, read_only: bool = False) -> None:
    """Our side of the file: checked, in WAL mode, migrated (a read-only file only checked)."""
    try:
        await check_tables_are_ours(conn, path)
        if read_only:
            await check_current(conn, path)
            return
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = NORMAL")
        await migrate(conn, path)
    except sqlite3.OperationalError as error:
        failure = failure_of(error, str(path))
        if failure is not None:
            raise failure from error
        if "locked" in str(error) or "busy" in str(error):
            raise StoreError(locked_message(path)) from error
        raise StoreError(f"{path} cannot be used ({error}); it was left untouched") from error
    except sqlite3.DatabaseError as error:
        raise StoreError(
            f"{path} is damaged or not an fsagent threads file ({error}); it was left "
            "untouched. Pass another --db"
        ) from error


async def check_current(conn: aiosqlite.Connection, path: Path) -> None:
    """A read-only file is read as it is: one that needs a migration cannot be."""
    applied = await applied_migrations(conn)
    if newer_than_us(applied):
        raise StoreError(newer_message(str(path), applied))
    if pending(applied):
        raise StoreError(
            f"{path} is read-only and was written by an older fsagent: upgrading it writes "
            "it; make it writable once, or pass another --db"
        )


@asynccontextmanager
async def open_saver(path: Path, read_only: bool = False) -> AsyncIterator[AsyncSqliteSaver]:
    conn = await connect(path, read_only)
    try:
        saver = AsyncSqliteSaver(conn)
        try:
            if read_only:
                saver.is_setup = True  # its tables are there (checked); setup would write
            else:
                await conn.execute("PRAGMA synchronous = NORMAL")
                await saver.setup()
        except sqlite3.DatabaseError as error:
            failure = failure_of(error, str(path))
            if failure is not None:
                raise failure from error
            raise StoreError(
                f"{path} is not a usable fsagent threads file ({error}); it was left "
                "untouched. Pass another --db"
            ) from error
        yield saver
    finally:
        await conn.close()


@asynccontextmanager
async def open_sqlite_store(path: Path) -> AsyncIterator[SQLiteStore]:
    """Open the thread file, creating it (and our tables) when new. A file fsagent may not
    write is opened read-only: reading works, holding a thread says why it cannot."""
    check_file_is_ours(path)
    created, read_only = file_state(path)
    ready = False
    try:
        conn = await connect(path, read_only, isolation_level=None)
        try:
            await prepare(conn, path, read_only)
            async with open_saver(path, read_only) as saver:
                ready = True
                yield SQLiteStore(path, conn, saver, read_only)
        finally:
            await conn.close()
    finally:
        if created and not ready:
            remove_new_file(path)


def remove_new_file(path: Path) -> None:
    """A thread file this process began and could not finish (a full disk): nothing half
    made is left, so the next start begins afresh."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with suppress(FileNotFoundError):
            leftover.unlink()
