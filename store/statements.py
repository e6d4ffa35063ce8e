"""The statements both stores run on our tables, written once.

They use `?` placeholders, as sqlite3 does; the Postgres store runs them through `psycopg()`,
which gives psycopg's `%s`. What only one database can say (SQLite's `BEGIN IMMEDIATE`,
Postgres's advisory locks and `= ANY(%s)`) stays in that store's module.
"""

from __future__ import annotations

import json
from typing import Any

from store.base import AuditRow
from store.errors import StoreError

THREAD_NAMES = "SELECT name FROM fsagent_threads UNION SELECT DISTINCT thread_id FROM checkpoints"
# The tables a thread's rows are in, by the column that names it; the audit log is kept.
THREAD_TABLES = (
    ("fsagent_ledger", "thread"),
    ("fsagent_undo", "thread"),
    ("fsagent_undo_runs", "thread"),
    ("fsagent_threads", "name"),
)
REGISTERED_AT = "SELECT created_at, settings FROM fsagent_threads WHERE name = ?"
REGISTER_COPY = (
    "INSERT INTO fsagent_threads (name, created_at, settings) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET created_at = excluded.created_at, "
    "settings = excluded.settings"
)
THREAD_SETTINGS = "SELECT settings FROM fsagent_threads WHERE name = ?"
# Recorded once, by the first session of the thread: what it was started with stays.
SETTINGS_RECORD = "UPDATE fsagent_threads SET settings = ? WHERE name = ? AND settings IS NULL"

LEDGER_ROW = (
    "SELECT status, result, failed FROM fsagent_ledger "
    "WHERE thread = ? AND message_id = ? AND call_id = ?"
)
LEDGER_CLAIM = (
    "INSERT INTO fsagent_ledger (thread, message_id, call_id, tool, args, status, started_at) "
    "VALUES (?, ?, ?, ?, ?, 'started', ?) ON CONFLICT DO NOTHING"
)
LEDGER_DONE = (
    "UPDATE fsagent_ledger SET status = 'done', result = ?, failed = ?, finished_at = ? "
    "WHERE thread = ? AND message_id = ? AND call_id = ?"
)
LEDGER_OF_THREAD = (
    "SELECT thread, message_id, call_id, tool, args, status, result, failed, started_at, "
    "finished_at FROM fsagent_ledger WHERE thread = ? ORDER BY started_at, message_id, call_id"
)
LEDGER_COPY = (
    "INSERT INTO fsagent_ledger (thread, message_id, call_id, tool, args, status, result, "
    "failed, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)

AUDIT_ADD = (
    "INSERT INTO fsagent_audit (time, thread, message_id, call_id, tool, args, decision, "
    "reason, decided_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
AUDIT_ROWS = (
    "SELECT time, thread, message_id, call_id, tool, args, decision, reason, decided_by "
    "FROM fsagent_audit"
)

UNDO_KEEP = (
    "INSERT INTO fsagent_undo (thread, message_id, call_id, turn, tool, args, record, size, "
    "kept_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (thread, message_id, call_id) DO UPDATE SET turn = excluded.turn, "
    "tool = excluded.tool, args = excluded.args, record = excluded.record, "
    "size = excluded.size, kept_at = excluded.kept_at"
)
UNDO_RECORDS = (
    "SELECT seq, thread, message_id, call_id, turn, tool, args, record, size, undone_by "
    "FROM fsagent_undo WHERE thread = ? ORDER BY seq"
)
UNDO_BYTES = "SELECT COALESCE(SUM(size), 0) AS total FROM fsagent_undo WHERE thread = ?"
UNDO_COPY = (
    "INSERT INTO fsagent_undo (thread, message_id, call_id, turn, tool, args, record, size, "
    "undone_by, kept_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
UNDO_RUN_START = (
    "INSERT INTO fsagent_undo_runs (thread, undo_id, plan, status, started_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
UNDO_RUN_DONE = (
    "UPDATE fsagent_undo_runs SET status = 'done', finished_at = ? WHERE thread = ? AND undo_id = ?"
)
UNDO_RUNS = (
    "SELECT thread, undo_id, plan, status FROM fsagent_undo_runs "
    "WHERE thread = ? ORDER BY started_at, undo_id"
)


def psycopg(statement: str) -> str:
    """A statement with psycopg's placeholders (our statements hold no `%` of their own)."""
    return statement.replace("?", "%s")


def recorded_settings(thread: str, location: str, text: str | None) -> dict[str, Any] | None:
    """A THREAD_SETTINGS value read; None for a thread started before fsagent kept it. One
    that is not a JSON mapping (a file edited by hand) is the store's one line, not a crash
    wherever the settings are first used."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise StoreError(
            f"thread {thread!r} in {location}: its recorded settings are not readable "
            f"({text[:60]!r}); open another thread (--thread NAME) or restore it from a backup"
        )
    return value


def audit_values(row: AuditRow) -> tuple[Any, ...]:
    return (
        row.time,
        row.thread,
        row.message_id,
        row.call_id,
        row.tool,
        json.dumps(row.args, ensure_ascii=False, sort_keys=True),
        row.decision,
        row.reason,
        row.by,
    )


def undo_keep_values(
    thread: str,
    message_id: str,
    call_id: str,
    turn: int,
    tool: str,
    args: Any,
    record: dict[str, Any],
    size: int,
    kept_at: str,
) -> tuple[Any, ...]:
    return (
        thread,
        message_id,
        call_id,
        turn,
        tool,
        json.dumps(args, ensure_ascii=False),
        json.dumps(record, ensure_ascii=False),
        size,
        kept_at,
    )
