"""Our tables, as numbered migrations: the one place the schema is written down.

Each store applies, in order, the migrations its database has not recorded yet, one
transaction each, and records them in `fsagent_migrations`; the count applied is the schema
version. A migration is never edited once released: a change is a new migration at the end.

Migrations 1-3 are the tables release 0.1.0 created without recording anything, so they say
`IF NOT EXISTS`: on such a file they record themselves and change nothing.

LangGraph's own tables (`checkpoints`, `writes`, ...) are its saver's business: it has
migrations of its own, run by `setup()`.
"""

from __future__ import annotations

from dataclasses import dataclass

MIGRATIONS_TABLE = "fsagent_migrations"


# What the two dialects spell differently; a statement names it as {serial_key} (so a
# literal brace in a statement is written twice): a key numbered by the database.
DIALECT_WORDS: dict[str, dict[str, str]] = {
    "sqlite": {"serial_key": "INTEGER PRIMARY KEY"},
    "postgres": {"serial_key": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"},
}


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    statements: tuple[str, ...]

    def for_dialect(self, dialect: str) -> tuple[str, ...]:
        words = DIALECT_WORDS[dialect]
        return tuple(statement.format(**words) for statement in self.statements)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "thread_registry",
        (
            """
            CREATE TABLE IF NOT EXISTS fsagent_threads (
                name TEXT PRIMARY KEY,
                created_at TEXT NOT NULL,
                pid INTEGER,        -- the process that has the thread open, NULL when none
                opened_at TEXT
            )
            """,
        ),
    ),
    Migration(
        2,
        "write_ledger",
        (
            """
            CREATE TABLE IF NOT EXISTS fsagent_ledger (
                thread TEXT NOT NULL,
                message_id TEXT NOT NULL,  -- the AI message that made the call: models
                call_id TEXT NOT NULL,     -- reuse call ids across turns
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('started', 'done')),
                result TEXT,
                failed INTEGER NOT NULL DEFAULT 0,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                PRIMARY KEY (thread, message_id, call_id)
            )
            """,
        ),
    ),
    Migration(
        3,
        "audit_log",
        (
            """
            CREATE TABLE IF NOT EXISTS fsagent_audit (
                id {serial_key},
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
            """,
        ),
    ),
    Migration(
        4,
        "thread_holder_host",
        # The lease holder's machine as well as its pid: with Postgres, threads are shared
        # across machines, and "pid 4242" alone names no process.
        ("ALTER TABLE fsagent_threads ADD COLUMN host TEXT",),
    ),
    Migration(
        5,
        "undo_records",
        (
            # What each approved write replaced, kept before it ran (core.changes.undo_capture), and
            # the undos that took writes back: `undone_by` names the run, so an undo never
            # applies twice and a run cut off by a crash is finished, not restarted.
            """
            CREATE TABLE fsagent_undo (
                seq {serial_key},   -- the order writes were kept in
                thread TEXT NOT NULL,
                message_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                turn INTEGER NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                record TEXT NOT NULL,      -- JSON: the old content, or why it cannot be undone
                size BIGINT NOT NULL,      -- bytes of old content it holds
                undone_by TEXT,
                kept_at TEXT NOT NULL,
                UNIQUE (thread, message_id, call_id)
            )
            """,
            """
            CREATE TABLE fsagent_undo_runs (
                thread TEXT NOT NULL,
                undo_id TEXT NOT NULL,
                plan TEXT NOT NULL,        -- JSON: which writes, forced or not, who decided
                status TEXT NOT NULL CHECK (status IN ('running', 'done')),
                started_at TEXT NOT NULL,
                finished_at TEXT,
                PRIMARY KEY (thread, undo_id)
            )
            """,
        ),
    ),
    Migration(
        6,
        "thread_settings",
        # What a thread was started with (JSON: roots, approval mode, rules file), so that
        # approve, deny, undo and the HTTP service act in those roots and not in whatever
        # folder they happen to be run from. NULL for threads started before.
        ("ALTER TABLE fsagent_threads ADD COLUMN settings TEXT",),
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def pending(applied: set[int]) -> list[Migration]:
    """The migrations still to run on a database that recorded `applied`, in order."""
    return [migration for migration in MIGRATIONS if migration.number not in applied]


def newer_than_us(applied: set[int]) -> bool:
    """A database migrated by a later fsagent: its tables may mean what we do not know."""
    return any(number > SCHEMA_VERSION for number in applied)


def newer_message(location: str, applied: set[int]) -> str:
    return (
        f"{location} was written by a newer fsagent (schema {max(applied)}; this version "
        f"knows {SCHEMA_VERSION}); it was left untouched. Upgrade fsagent or pass another --db"
    )
