"""How fsagent connects to Postgres: what every connection adds to the URL, a failed
connection said in one line, and whether a database holds our tables. psycopg only, no
LangGraph, so the reading commands (store.postgres_reading) share it with the store.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from store.errors import Missing, StoreError
from store.location import scrub, shown
from store.migrations import MIGRATIONS_TABLE

CONNECT_TIMEOUT_SECONDS = 10
# Tables visible on the connection's search path, where ours are created.
EXISTING_TABLES = (
    "SELECT c.relname AS name FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()"
)


def connect_options(url: str) -> dict[str, Any]:
    """What every connection of ours adds to the URL, unless the URL says otherwise."""
    given = conninfo_to_dict(url)
    options: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}
    defaults = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        # Our side notices a vanished server too.
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "application_name": "fsagent",
    }
    options.update({key: value for key, value in defaults.items() if key not in given})
    return options


def connect_error(url: str, error: psycopg.Error) -> StoreError:
    """One line for a connection that failed: which kind, where, what to do."""
    text = scrub(str(error), url)
    reason = text.rsplit(" failed: ", 1)[-1].replace("FATAL:  ", "").strip().splitlines()[0]
    where = shown(url)
    if "password authentication failed" in text or "no password supplied" in text:
        return StoreError(
            f"cannot log in to Postgres at {where}: {reason}; check the user and password in --db"
        )
    if "does not exist" in text and "database" in text:
        return StoreError(
            f"cannot use Postgres at {where}: {reason}; create it (createdb) or pass another --db"
        )
    return StoreError(
        f"cannot connect to Postgres at {where}: {reason}; start the server or pass another --db"
    )


def connect(url: str) -> psycopg.Connection[Any]:
    """A plain (synchronous) connection, for a command that only reads."""
    try:
        return psycopg.connect(url, **connect_options(url))
    except psycopg.Error as error:
        raise connect_error(url, error) from None


def no_tables(url: str) -> Missing:
    where = shown(url)
    return Missing(
        note="it has no fsagent tables yet",
        sentence=f"{where} has no fsagent tables yet",
        no_store=f"--db {where}: no fsagent tables there; pass the --db fsagent ran with",
    )


def missing_tables(url: str) -> Missing | None:
    """None when the database holds our tables; else how a command that only reads says
    it does not. Nothing is created."""
    with connect(url) as conn:
        tables = {str(row[0]) for row in conn.execute(EXISTING_TABLES)}
    return None if MIGRATIONS_TABLE in tables else no_tables(url)
