"""The shared store: every thread table on one Postgres database, for any number of fsagent
processes on any number of machines.

LangGraph's checkpoints go through its `AsyncPostgresSaver` on a `psycopg` async pool. Our
tables (registry, ledger, audit, migrations) go through one connection of our own, in
autocommit mode, which also holds the leases.

The lease is a session-level advisory lock, one per thread, on that connection. Postgres
releases it the moment the connection ends, so a holder that crashed cannot keep a thread:
a SIGKILLed process's socket is closed by its kernel at once, and a machine that vanished is
noticed by TCP keepalives, which this connection asks the server to send every few seconds.
A lease row with a heartbeat would need a clock, a timeout to tune and a sweeper, and a slow
holder could lose its lease while still running. Because ledger claims go through the same
connection, a write is only claimed while the lease is held: if the connection is lost, the
lease goes with it and so does the next claim.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from store import statements as sql
from store.base import AuditRow, LedgerEntry, LedgerRow, ThreadRecord, UndoRecord, UndoRun
from store.errors import StoreError, ThreadBusy
from store.location import scrub, shown
from store.migrations import MIGRATIONS_TABLE, newer_message, newer_than_us, pending
from store.postgres_connection import (
    CONNECT_TIMEOUT_SECONDS,
    EXISTING_TABLES,
    connect_error,
    connect_options,
)
from store.statements import psycopg as psycopg_sql

# The pool logs its retries itself; what went wrong reaches the person as one line.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

POOL_SIZE = 4  # LangGraph's saver runs one statement at a time per saver; a few suffice
# The server notices a vanished client (and releases its leases) within about
# idle + interval * count seconds.
KEEPALIVE = {"tcp_keepalives_idle": 10, "tcp_keepalives_interval": 5, "tcp_keepalives_count": 3}
SETUP_LOCK = "fsagent:setup"  # one process at a time creates or migrates the tables
LEASE_PREFIX = "fsagent:thread:"
# LangGraph's tables: a database holding another `checkpoints` table is not one we may use.
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
HOLDER_WAIT_SECONDS = 2.0


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def host_name() -> str:
    return socket.gethostname()


class PostgresStore:
    """The store on one Postgres database; open it with `open_postgres_store`."""

    def __init__(
        self, url: str, conn: AsyncConnection[Any], pool: AsyncConnectionPool, saver: Any
    ) -> None:
        self.url = url
        self.conn = conn
        self.pool = pool
        self.saver = saver
        # Our one connection is shared by every coroutine of this process; a transaction
        # must not take in another coroutine's statements.
        self.lock = asyncio.Lock()

    @property
    def location(self) -> str:
        return shown(self.url)

    @property
    def checkpointer(self) -> AsyncPostgresSaver:
        saver: AsyncPostgresSaver = self.saver
        return saver

    # -- the registry and its lease --------------------------------------------------------------

    @asynccontextmanager
    async def hold(self, thread: str) -> AsyncIterator[None]:
        await self._take(thread)
        try:
            yield
        finally:
            await self._release(thread)

    async def _take(self, thread: str) -> None:
        async with self.lock:
            cursor = await self.conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS taken",
                (LEASE_PREFIX + thread,),
            )
            row = await cursor.fetchone()
            if row is None or not row["taken"]:
                raise ThreadBusy(await self._busy_message(thread))
            try:
                async with self.conn.transaction():
                    await self.conn.execute(
                        "INSERT INTO fsagent_threads (name, created_at, pid, host, opened_at) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
                        "pid = excluded.pid, host = excluded.host, opened_at = excluded.opened_at",
                        (thread, now(), os.getpid(), host_name(), now()),
                    )
            except BaseException:
                await self.conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (LEASE_PREFIX + thread,)
                )
                raise

    async def _busy_message(self, thread: str) -> str:
        # The holder writes its row just after taking the lease; give it that moment.
        deadline = asyncio.get_running_loop().time() + HOLDER_WAIT_SECONDS
        while True:
            cursor = await self.conn.execute(
                "SELECT pid, host FROM fsagent_threads WHERE name = %s", (thread,)
            )
            row = await cursor.fetchone()
            if (row and row["pid"]) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        holder = f"pid {row['pid']} on {row['host']}" if row and row["pid"] else "pid unknown"
        return (
            f"thread '{thread}' is open in another fsagent process ({holder}); "
            "finish there first, or pass another --thread"
        )

    async def _release(self, thread: str) -> None:
        try:
            async with self.lock:
                await self.conn.execute(
                    "UPDATE fsagent_threads SET pid = NULL, host = NULL "
                    "WHERE name = %s AND pid = %s AND host = %s",
                    (thread, os.getpid(), host_name()),
                )
                await self.conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended(%s, 0))",
                    (LEASE_PREFIX + thread,),
                )
        except psycopg.OperationalError:
            pass  # the connection is gone, and the lease went with it

    async def thread_names(self) -> list[str]:
        rows = await self._fetch(sql.THREAD_NAMES)
        return sorted({str(row["name"]) for row in rows})

    async def forget(self, thread: str) -> None:
        await self.saver.adelete_thread(thread)
        async with self.lock, self.conn.transaction():
            for table, column in sql.THREAD_TABLES:
                await self.conn.execute(f"DELETE FROM {table} WHERE {column} = %s", (thread,))

    # -- the ledger ------------------------------------------------------------------------------

    async def ledger_row(self, thread: str, message_id: str, call_id: str) -> LedgerRow | None:
        rows = await self._fetch(sql.LEDGER_ROW, (thread, message_id, call_id))
        if not rows:
            return None
        return LedgerRow(rows[0]["status"], rows[0]["result"], bool(rows[0]["failed"]))

    async def ledger_claim(
        self, thread: str, message_id: str, call_id: str, tool: str, args: Any
    ) -> bool:
        # One statement in its own transaction: of two processes claiming the same call at
        # once, the second waits for the first to commit and then inserts nothing.
        async with self.lock, self.conn.transaction():
            cursor = await self.conn.execute(
                psycopg_sql(sql.LEDGER_CLAIM),
                (thread, message_id, call_id, tool, json.dumps(args), now()),
            )
            return cursor.rowcount == 1

    async def ledger_done(
        self, thread: str, message_id: str, call_id: str, result: str, failed: bool
    ) -> None:
        async with self.lock:
            await self.conn.execute(
                psycopg_sql(sql.LEDGER_DONE),
                (result, int(failed), now(), thread, message_id, call_id),
            )

    # -- the audit log ---------------------------------------------------------------------------

    async def record_audit(self, rows: list[AuditRow]) -> None:
        if not rows:
            return
        async with self.lock, self.conn.transaction(), self.conn.cursor() as cursor:
            await cursor.executemany(
                psycopg_sql(sql.AUDIT_ADD), [sql.audit_values(row) for row in rows]
            )

    async def audit_rows(self, thread: str | None = None) -> list[AuditRow]:
        query, params = sql.AUDIT_ROWS, tuple[str, ...]()
        if thread:
            query, params = query + " WHERE thread = ?", (thread,)
        found = await self._fetch(query + " ORDER BY id", params)
        return [
            AuditRow(
                r["time"],
                r["thread"],
                r["message_id"],
                r["call_id"],
                r["tool"],
                json.loads(r["args"]),
                r["decision"],
                r["reason"],
                r["decided_by"],
            )  # fmt: skip
            for r in found
        ]

    # -- copying a thread ------------------------------------------------------------------------

    async def thread_settings(self, thread: str) -> dict[str, Any] | None:
        rows = await self._fetch(sql.THREAD_SETTINGS, (thread,))
        return sql.recorded_settings(thread, self.location, rows[0]["settings"] if rows else None)

    async def record_thread_settings(self, thread: str, settings: dict[str, Any]) -> None:
        async with self.lock:
            await self.conn.execute(
                psycopg_sql(sql.SETTINGS_RECORD), (json.dumps(settings), thread)
            )

    async def thread_record(self, thread: str) -> ThreadRecord:
        registered = await self._fetch(sql.REGISTERED_AT, (thread,))
        ledger = await self._fetch(sql.LEDGER_OF_THREAD, (thread,))
        return ThreadRecord(
            name=thread,
            created_at=registered[0]["created_at"] if registered else None,
            settings=registered[0]["settings"] if registered else None,
            ledger=tuple(LedgerEntry(**{**row, "failed": bool(row["failed"])}) for row in ledger),
            undo=tuple(await self.undo_records(thread)),
            undo_runs=tuple(await self._undo_runs(thread)),
        )

    async def add_thread_record(self, record: ThreadRecord) -> None:
        async with self.lock, self.conn.transaction(), self.conn.cursor() as cursor:
            # The copy's holder registered the thread already: it keeps the original's date.
            await cursor.execute(
                psycopg_sql(sql.REGISTER_COPY),
                (record.name, record.created_at or now(), record.settings),
            )
            if record.ledger:
                await cursor.executemany(
                    psycopg_sql(sql.LEDGER_COPY), [entry.values() for entry in record.ledger]
                )
            for undo in record.undo:  # one at a time: each takes the next seq, in order
                await cursor.execute(psycopg_sql(sql.UNDO_COPY), undo.values(kept_at=now()))
            for run in record.undo_runs:
                await cursor.execute(
                    psycopg_sql(sql.UNDO_RUN_START),
                    (run.thread, run.undo_id, json.dumps(run.plan), run.status, now()),
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
        async with self.lock:
            await self.conn.execute(psycopg_sql(sql.UNDO_KEEP), values)

    async def undo_records(self, thread: str) -> list[UndoRecord]:
        rows = await self._fetch(sql.UNDO_RECORDS, (thread,))
        return [
            UndoRecord(
                **{**row, "args": json.loads(row["args"]), "record": json.loads(row["record"])}
            )
            for row in rows
        ]

    async def undo_bytes(self, thread: str) -> int:
        rows = await self._fetch(sql.UNDO_BYTES, (thread,))
        return int(rows[0]["total"]) if rows else 0

    async def begin_undo(
        self, thread: str, undo_id: str, plan: dict[str, Any], seqs: list[int]
    ) -> bool:
        async with self.lock, self.conn.transaction():
            # FOR UPDATE: of two processes taking back the same writes, the second waits for
            # the first to commit and then sees them undone.
            cursor = await self.conn.execute(
                "SELECT seq FROM fsagent_undo WHERE thread = %s AND seq = ANY(%s) "
                "AND undone_by IS NULL FOR UPDATE",
                (thread, list(seqs)),
            )
            if len(await cursor.fetchall()) != len(set(seqs)):
                return False
            await self.conn.execute(
                psycopg_sql(sql.UNDO_RUN_START),
                (thread, undo_id, json.dumps(plan, ensure_ascii=False), "running", now()),
            )
            await self.conn.execute(
                "UPDATE fsagent_undo SET undone_by = %s WHERE thread = %s AND seq = ANY(%s)",
                (undo_id, thread, list(seqs)),
            )
        return True

    async def unfinished_undo(self, thread: str) -> UndoRun | None:
        runs = [run for run in await self._undo_runs(thread) if run.status == "running"]
        return runs[0] if runs else None

    async def finish_undo(self, thread: str, undo_id: str) -> None:
        async with self.lock:
            await self.conn.execute(psycopg_sql(sql.UNDO_RUN_DONE), (now(), thread, undo_id))

    async def _undo_runs(self, thread: str) -> list[UndoRun]:
        rows = await self._fetch(sql.UNDO_RUNS, (thread,))
        return [UndoRun(**{**row, "plan": json.loads(row["plan"])}) for row in rows]

    # -- our schema ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        return len(await applied_migrations(self.conn))

    async def _fetch(self, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of one of our statements (store.statements, `?` placeholders)."""
        async with self.lock:
            cursor = await self.conn.execute(psycopg_sql(query), params)
            return list(await cursor.fetchall())


# --- opening the database ------------------------------------------------------------------------


def async_options(url: str) -> dict[str, Any]:
    """The connection options, with rows as dicts (our statements read columns by name)."""
    return {**connect_options(url), "row_factory": dict_row}


async def connect(url: str) -> AsyncConnection[Any]:
    try:
        conn = await AsyncConnection.connect(url, **async_options(url))
    except psycopg.Error as error:
        raise connect_error(url, error) from None
    # The server's side of the keepalives: a client machine that vanished loses its leases
    # within seconds, not the OS default of two hours.
    for name, value in KEEPALIVE.items():
        await conn.execute(f"SET {name} = {int(value)}")
    return conn


async def applied_migrations(conn: AsyncConnection[Any]) -> set[int]:
    cursor = await conn.execute(f"SELECT number FROM {MIGRATIONS_TABLE}")
    return {int(row["number"]) for row in await cursor.fetchall()}


async def existing_tables(conn: AsyncConnection[Any]) -> set[str]:
    """Tables visible on the connection's search path, where ours are created."""
    cursor = await conn.execute(EXISTING_TABLES)
    return {row["name"] for row in await cursor.fetchall()}


@asynccontextmanager
async def setup_lock(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """One process at a time creates or migrates the tables.

    Polled with try-lock rather than waited for: LangGraph's migrations create indexes
    CONCURRENTLY, which wait for every open transaction in the database, and a blocked
    `pg_advisory_lock` call is one."""
    while True:
        cursor = await conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS taken", (SETUP_LOCK,)
        )
        row = await cursor.fetchone()
        if row and row["taken"]:
            break
        await asyncio.sleep(0.05)
    try:
        yield
    finally:
        await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (SETUP_LOCK,))


async def check_tables_are_ours(conn: AsyncConnection[Any], url: str) -> None:
    tables = await existing_tables(conn)
    if "checkpoints" in tables and "checkpoint_migrations" not in tables:
        raise StoreError(
            f"{shown(url)} has a table named checkpoints that is not LangGraph's; it was left "
            "untouched. Pass another --db (or a search_path of its own in the URL's options)"
        )
    if MIGRATIONS_TABLE in tables:
        applied = await applied_migrations(conn)
        if newer_than_us(applied):
            raise StoreError(newer_message(shown(url), applied))


async def langgraph_is_current(conn: AsyncConnection[Any]) -> bool:
    if "checkpoint_migrations" not in await existing_tables(conn):
        return False
    cursor = await conn.execute("SELECT max(v) AS v FROM checkpoint_migrations")
    row = await cursor.fetchone()
    latest = row["v"] if row else None
    return latest is not None and latest >= len(AsyncPostgresSaver.MIGRATIONS) - 1


async def migrate(conn: AsyncConnection[Any], url: str) -> None:
    """LangGraph's tables and ours, created or brought up to date, each migration once."""
    async with setup_lock(conn):
        await check_tables_are_ours(conn, url)
        if not await langgraph_is_current(conn):
            # On our connection, which holds the setup lock (autocommit: LangGraph's
            # migrations create indexes CONCURRENTLY, which no transaction may hold).
            await AsyncPostgresSaver(conn).setup()
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
            "(number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for migration in pending(await applied_migrations(conn)):
            async with conn.transaction():
                for statement in migration.for_dialect("postgres"):
                    await conn.execute(statement)
                await conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (number, name, applied_at) "
                    "VALUES (%s, %s, %s)",
                    (migration.number, migration.name, now()),
                )


def setup_error(url: str, error: psycopg.Error) -> StoreError:
    text = scrub(str(error).splitlines()[0], url)
    if isinstance(error, psycopg.errors.InsufficientPrivilege):
        user = conninfo_to_dict(url).get("user") or "this user"
        return StoreError(
            f"cannot create fsagent's tables in {shown(url)}: {text}; grant {user} CREATE on "
            "the schema, or pass another --db"
        )
    return StoreError(f"cannot use {shown(url)}: {text}; it was left as it was")


@asynccontextmanager
async def open_postgres_store(url: str) -> AsyncIterator[PostgresStore]:
    """Open the database, creating LangGraph's tables and ours when new."""
    conn = await connect(url)
    try:
        pool: AsyncConnectionPool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            # Autocommit, as LangGraph's saver expects: it pipelines a checkpoint's
            # statements, and wrapping them in a transaction measured no fewer WAL flushes.
            kwargs=async_options(url),
            open=False,
            name="fsagent",
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
        except PoolTimeout as error:
            raise StoreError(
                f"cannot connect to Postgres at {shown(url)}: no connection within "
                f"{CONNECT_TIMEOUT_SECONDS} s; check the server, or pass another --db"
            ) from error
        try:
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            try:
                await migrate(conn, url)
            except psycopg.Error as error:
                raise setup_error(url, error) from None
            yield PostgresStore(url, conn, pool, saver)
        finally:
            await pool.close()
    finally:
        await conn.close()
