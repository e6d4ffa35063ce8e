"""The audit log: one row per decision on a write call, in the thread file, and `fsagent audit`.

Rows are written by the graph's `tools` node, the first step after every decision (a
person's, a rule's, a grant's or the mode's), so one place records them all. That node can
run again after a crash; the table is unique on (thread, message, call id, decision), so a
second run adds nothing. The message id is part of the key because local models reuse call ids
across turns.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from typing import Any

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS fsagent_audit (
    id INTEGER PRIMARY KEY,
    time TEXT NOT NULL,
    thread TEXT NOT NULL,
    message_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    UNIQUE (thread, message_id, call_id, decision)
)
"""
COLUMNS = ("time", "thread", "call_id", "tool", "args", "decision", "reason", "by")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def rows_for(thread: str, message: Any, approvals: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One row per decided write call of this model message, with the arguments that ran."""
    rows = []
    for call in message.tool_calls:
        record = approvals.get(call["id"])
        if not isinstance(record, dict):
            continue
        args = record.get("args", call["args"])
        reason = record.get("reason") or record.get("message") or ""
        rows.append(
            (
                now(),
                thread,
                str(message.id),
                call["id"],
                call["name"],
                json.dumps(args, ensure_ascii=False, sort_keys=True),
                str(record.get("decision", record.get("type"))),
                str(reason),
                str(record.get("by", "person")),
            )
        )
    return rows


class AuditLog:
    """Writes rows through the checkpointer's own connection, under its lock, so our writes
    never interleave with a checkpoint's transaction."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    async def create_table(self) -> None:
        async with self.saver.lock:
            await self.saver.conn.execute(CREATE_TABLE)
            await self.saver.conn.commit()

    async def record(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        async with self.saver.lock:
            await self.saver.conn.executemany(
                "INSERT OR IGNORE INTO fsagent_audit (time, thread, message_id, call_id, tool, "
                "args, decision, reason, decided_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            await self.saver.conn.commit()


# --- `fsagent audit` -------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON array")


def run(args: argparse.Namespace, settings: Any) -> int:
    """Reads the thread file directly: needs neither LM Studio nor the MCP server."""
    rows = read_rows(settings.db, args.thread)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    if not rows:
        where = f"thread '{args.thread}'" if args.thread else str(settings.db)
        print(f"No decisions recorded in {where}.")
    for row in rows:
        print(format_row(row))
    return 0


def read_rows(db: Any, thread: str | None) -> list[dict[str, Any]]:
    from agent import StartupError

    if not db.is_file():
        raise StartupError(f"--db {db}: no such thread file; pass the --db fsagent ran with")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise StartupError(f"cannot open {db}: {error}") from error
    try:
        query = (
            "SELECT time, thread, call_id, tool, args, decision, reason, decided_by "
            "FROM fsagent_audit"
        )
        params: tuple[str, ...] = ()
        if thread:
            query, params = query + " WHERE thread = ?", (thread,)
        found = conn.execute(query + " ORDER BY id", params).fetchall()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return []  # a thread file from before the audit, or no decision yet
        raise StartupError(f"{db}: cannot read the audit log: {error}") from error
    except sqlite3.DatabaseError as error:
        raise StartupError(f"{db} is not a usable fsagent threads file ({error})") from error
    finally:
        conn.close()
    return [dict(zip(COLUMNS, row, strict=True)) | {"args": json.loads(row[4])} for row in found]


def format_row(row: dict[str, Any]) -> str:
    args = json.dumps(row["args"], ensure_ascii=False)
    if len(args) > 120:
        args = f"{args[:120]}… (+{len(args) - 120} chars; --json shows all)"
    reason = f"  ({row['reason']})" if row["reason"] else ""
    return (
        f"{row['time']}  {row['thread']}  {row['tool']} {args}  "
        f"{row['decision']} by {row['by']}{reason}"
    )
