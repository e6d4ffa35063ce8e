"""Threads in the thread file: the registry and its per-thread locks, the ledger that makes
every write run at most once, what state each thread is in, and how a cut-off run is closed.
The commands that list, show, reset, remove and decide threads are `thread_commands`.

The file is shared with LangGraph's checkpointer (its `checkpoints` and `writes` tables); ours
are prefixed `fsagent_`. A checkpoint records a position in our code, and that is not enough
on its own: a tool that was running when the process died would run again on resume, and a
thread paused at a step a newer version renamed would resume into nothing. The ledger and the
checks here make those cases impossible or loud.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent import WRITE_TOOLS, StartupError, ThreadError

if TYPE_CHECKING:
    import aiosqlite
    from langchain_core.messages import ToolMessage

IDLE = "idle"
WAITING = "waiting for approval"
INTERRUPTED = "interrupted"

SQLITE_HEADER = b"SQLite format 3\x00"
# Tables a file of ours may hold: LangGraph's checkpointer and our own.
LANGGRAPH_TABLES = frozenset({"checkpoints", "writes"})
OUR_TABLES = frozenset({"fsagent_threads", "fsagent_ledger"})

SCHEMA = """
CREATE TABLE IF NOT EXISTS fsagent_threads (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    pid INTEGER,        -- the process that has the thread open, NULL when none
    opened_at TEXT
);
CREATE TABLE IF NOT EXISTS fsagent_ledger (
    thread TEXT NOT NULL,
    message_id TEXT NOT NULL,  -- the AI message that made the call: models reuse call ids
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('started', 'done')),
    result TEXT,
    failed INTEGER NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (thread, message_id, call_id)
);
"""

# Test hook, read only by the tools node: `started` or `done` makes every write step print
# HOLD_MARKER and sleep right after that ledger row is written, so a test can SIGKILL it there.
TEST_HOLD_ENV = "FSAGENT_TEST_HOLD_WRITE"
HOLD_MARKER = "[test hook] holding the write after its ledger row is"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def thread_config(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


# --- the file --------------------------------------------------------------------------------


@dataclass
class LedgerRow:
    status: str
    result: str | None
    failed: bool


@dataclass
class Store:
    """Our tables in the thread file, on a connection of their own in autocommit mode, so a
    ledger row is on disk before the write it describes starts."""

    db: Path
    conn: aiosqlite.Connection

    # -- the registry and its locks ---------------------------------------------------------

    @asynccontextmanager
    async def hold(self, thread: str) -> AsyncIterator[None]:
        """Have `thread` open in this process only; another live process holding it is an
        error that names it. A lock left by a process that died is taken over."""
        await self._take(thread)
        try:
            yield
        finally:
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
            raise StartupError(locked_message(self.db)) from error
        try:
            async with self.conn.execute(
                "SELECT pid FROM fsagent_threads WHERE name = ?", (thread,)
            ) as cursor:
                row = await cursor.fetchone()
            holder = row[0] if row else None
            if holder and holder != os.getpid() and process_alive(holder):
                raise ThreadError(
                    f"thread '{thread}' is open in another fsagent process (pid {holder}); "
                    "finish there first, or pass another --thread"
                )
            await self.conn.execute(
                "INSERT INTO fsagent_threads (name, created_at, pid, opened_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE "
                "SET pid = excluded.pid, opened_at = excluded.opened_at",
                (thread, now(), os.getpid(), now()),
            )
            await self.conn.execute("COMMIT")
        except BaseException:
            await self.conn.execute("ROLLBACK")
            raise

    async def registered_names(self) -> list[str]:
        async with self.conn.execute("SELECT name FROM fsagent_threads") as cursor:
            return [row[0] for row in await cursor.fetchall()]

    async def forget(self, thread: str) -> None:
        await self.conn.execute("DELETE FROM fsagent_ledger WHERE thread = ?", (thread,))
        await self.conn.execute("DELETE FROM fsagent_threads WHERE name = ?", (thread,))

    # -- the ledger ---------------------------------------------------------------------------

    async def ledger_row(self, thread: str, message_id: str, call_id: str) -> LedgerRow | None:
        async with self.conn.execute(
            "SELECT status, result, failed FROM fsagent_ledger "
            "WHERE thread = ? AND message_id = ? AND call_id = ?",
            (thread, message_id, call_id),
        ) as cursor:
            row = await cursor.fetchone()
        return LedgerRow(row[0], row[1], bool(row[2])) if row else None

    async def ledger_start(
        self, thread: str, message_id: str, call: dict[str, Any], args: Any
    ) -> None:
        await self.conn.execute(
            "INSERT INTO fsagent_ledger "
            "(thread, message_id, call_id, tool, args, status, started_at) "
            "VALUES (?, ?, ?, ?, ?, 'started', ?)",
            (thread, message_id, call["id"], call["name"], json.dumps(args), now()),
        )

    async def ledger_done(
        self, thread: str, message_id: str, call_id: str, result: str, failed: bool
    ) -> None:
        await self.conn.execute(
            "UPDATE fsagent_ledger SET status = 'done', result = ?, failed = ?, "
            "finished_at = ? WHERE thread = ? AND message_id = ? AND call_id = ?",
            (result, int(failed), now(), thread, message_id, call_id),
        )


def process_alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie has died; only its parent has not
    looked yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, but someone else's
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def locked_message(db: Path) -> str:
    return f"{db} is locked by another program; close it there or pass another --db"


def check_file_is_ours(db: Path) -> None:
    """Refuse, before SQLite touches it, a file that is not a SQLite database at all."""
    if not db.exists():
        if not db.parent.is_dir():
            raise StartupError(
                f"--db {db}: folder {db.parent} does not exist; create it or pick another"
            )
        return
    if db.is_dir():
        raise StartupError(f"--db {db} is a folder; pass a file")
    try:
        with db.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise StartupError(f"cannot read {db}: {error.strerror}; pass another --db") from error
    if head and head != SQLITE_HEADER:
        raise StartupError(
            f"{db} is not an fsagent threads file (not a SQLite database); it was left "
            "untouched. Pass another --db"
        )


@asynccontextmanager
async def open_store(db: Path) -> AsyncIterator[Store]:
    """Open the thread file, creating it (and our tables) when new. A damaged, locked or
    foreign file is a StartupError and is never changed."""
    import aiosqlite

    check_file_is_ours(db)
    try:
        conn = await aiosqlite.connect(str(db), timeout=10.0, isolation_level=None)
    except sqlite3.Error as error:
        raise StartupError(f"cannot open {db}: {error}; pass another --db") from error
    try:
        try:
            await conn.execute("PRAGMA busy_timeout = 10000")
            async with conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
                tables = {row[0] for row in await cur.fetchall()}
            if tables and not tables & (LANGGRAPH_TABLES | OUR_TABLES):
                shown = ", ".join(sorted(tables)[:5])
                raise StartupError(
                    f"{db} is a SQLite database of something else (tables: {shown}), not an "
                    "fsagent threads file; it was left untouched. Pass another --db"
                )
            await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA synchronous = NORMAL")  # see open_checkpointer
            await conn.executescript(SCHEMA)
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise StartupError(locked_message(db)) from error
            raise StartupError(f"{db} cannot be used ({error}); it was left untouched") from error
        except sqlite3.DatabaseError as error:
            raise StartupError(
                f"{db} is damaged or not an fsagent threads file ({error}); it was left "
                "untouched. Pass another --db"
            ) from error
        yield Store(db, conn)
    finally:
        await conn.close()


# --- at most once: the ledger around a write -----------------------------------------------


async def run_write_once(
    store: Store,
    thread: str,
    message_id: str,
    call: dict[str, Any],
    args: Any,
    run: Callable[[], Awaitable[ToolMessage]],
) -> ToolMessage:
    """Run a write call unless the ledger says it ran (or may have) already.

    A step runs again after a crash; a `done` call then returns its recorded result and a
    `started` call, which may or may not have changed the file, is never run a second time.
    """
    row = await store.ledger_row(thread, message_id, call["id"])
    if row is not None:
        return recorded_answer(row, call)
    await store.ledger_start(thread, message_id, call, args)
    await hold_for_test("started")
    message = await run()
    from agent_graph import content_text

    failed = message.status == "error"
    await store.ledger_done(thread, message_id, call["id"], content_text(message.content), failed)
    await hold_for_test("done")
    return message


def recorded_answer(row: LedgerRow, call: dict[str, Any]) -> ToolMessage:
    """What a call the ledger has seen answers, without running it again."""
    from approval import tool_message

    if row.status == "done":
        return tool_message(call["id"], row.result or "", error=row.failed)
    return tool_message(call["id"], outcome_unknown_text(call), error=True)


def outcome_unknown_text(call: dict[str, Any]) -> str:
    return (
        f"Outcome unknown: {call['name']} was started, but fsagent stopped before it finished, "
        f"so it was not run again. It may or may not have changed {touched_paths(call)}; "
        "check before doing anything else, and tell the person."
    )


def touched_paths(call: dict[str, Any]) -> str:
    args = call.get("args") or {}
    paths = [str(args[key]) for key in ("path", "source", "destination") if args.get(key)]
    return " and ".join(paths) or "the files it names"


async def hold_for_test(row: str) -> None:
    """The crash tests' hook (FSAGENT_TEST_HOLD_WRITE); nothing happens unless it is set."""
    if os.environ.get(TEST_HOLD_ENV) == row:
        print(f"{HOLD_MARKER} {row!r}", flush=True)
        await asyncio.sleep(3600)


# --- what state a thread is in -------------------------------------------------------------


@dataclass
class ThreadView:
    name: str
    status: str
    messages: list[Any]
    last_activity: str
    waiting: list[dict[str, Any]] = field(default_factory=list)  # the calls of the approval
    steps: list[str] = field(default_factory=list)  # where the last run stopped
    problem: str | None = None  # why this version cannot resume it
    snapshot: Any = None  # the graph's state it was judged from, for whoever shows it next


async def view_thread(app: Any, name: str) -> ThreadView | None:
    """The thread as stored, judged from the raw checkpoint as well as the graph's view: a
    step the graph no longer has is invisible to `aget_state` (no next, no interrupts)."""
    config = thread_config(name)
    raw = await app.checkpointer.aget_tuple(config)
    if raw is None:
        return None
    snapshot = await app.aget_state(config)
    steps = stopped_at(raw.checkpoint)
    payloads = stored_interrupts(raw.pending_writes or [])
    waiting = next((p["calls"] for p in payloads if is_approval(p)), [])
    problem = resume_problem(app, steps, payloads, snapshot)
    if payloads:
        status = WAITING
    elif steps:
        status = INTERRUPTED
    else:
        status = IDLE
    return ThreadView(
        name=name,
        status=status,
        messages=list((snapshot.values or {}).get("messages") or []),
        last_activity=str(raw.checkpoint.get("ts") or ""),
        waiting=waiting,
        steps=steps,
        problem=problem,
        snapshot=snapshot,
    )


def stopped_at(checkpoint: dict[str, Any]) -> list[str]:
    """The steps a checkpoint is due to run next, by name, whatever graph wrote it.

    LangGraph triggers node X through channel `branch:to:X` and clears that channel when X
    runs, so a value still there is a step not yet done."""
    prefix = "branch:to:"
    values = checkpoint.get("channel_values") or {}
    return sorted(channel[len(prefix) :] for channel in values if channel.startswith(prefix))


def stored_interrupts(pending_writes: list[Any]) -> list[Any]:
    values = []
    for _task, channel, value in pending_writes:
        if channel == "__interrupt__":
            items = value if isinstance(value, list | tuple) else [value]
            values += [getattr(item, "value", item) for item in items]
    return values


def is_approval(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == "approval" and "calls" in value


def resume_problem(app: Any, steps: list[str], payloads: list[Any], snapshot: Any) -> str | None:
    from approval import is_current_payload

    for step in steps:
        if step not in app.nodes:
            return f"it is paused at step {step!r}, which this version of fsagent does not have"
    for payload in payloads:
        if not is_current_payload(payload):
            version = payload.get("version") if isinstance(payload, dict) else None
            return f"it waits on an approval of another format (version {version!r})"
    if payloads and not snapshot.interrupts:
        return "its pending approval is not one this version of fsagent can resume"
    return None


def cannot_resume_message(view: ThreadView) -> str:
    from terminal import format_call

    waits = ", ".join(format_call(c.get("name"), c.get("args"), 60) for c in view.waiting)
    waited = f"; it was waiting for approval of {waits}" if waits else ""
    return (
        f"thread '{view.name}' cannot be resumed: {view.problem}{waited}. Nothing was run. "
        f"Run `fsagent threads reset {view.name}` to cancel what it waits for and go on with it"
    )


async def require_thread(app: Any, name: str) -> ThreadView:
    view = await view_thread(app, name)
    if view is None:
        raise ThreadError(f"no thread named '{name}' in this file; `fsagent threads` lists them")
    return view


# --- closing a run that was cut off ----------------------------------------------------------


def unanswered_calls(messages: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The calls of the last AI message that have no answer yet, if the history ends with
    that message and its answers. Older gaps stay repaired in the request view only: an
    answer appended now would come after later messages, out of place."""
    from langchain_core.messages import AIMessage, ToolMessage

    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            return str(message.id), [c for c in calls if c.get("id") not in answered]
        break
    return "", []


async def closing_answer(
    store: Store, thread: str, message_id: str, call: dict[str, Any], why: str
) -> ToolMessage:
    """The truthful answer for a call whose run ended without one: the ledger knows whether
    a write ran, may have run, or never started."""
    from approval import cut_off_answer

    if call.get("name") in WRITE_TOOLS:
        row = await store.ledger_row(thread, message_id, call["id"])
        if row is not None:
            return recorded_answer(row, call)
    return cut_off_answer(call, why)


async def close_run(app: Any, store: Store, thread: str, why: str) -> list[Any]:
    """Leave the thread idle and consistent: drop the steps it was due to run (a pending
    approval included) and store an answer for every call left without one, so `threads
    show` and the next model request agree. Returns the answers stored."""
    from langgraph.graph import END

    config = thread_config(thread)
    snapshot = await app.aget_state(config)
    if not snapshot.created_at:
        return []
    message_id, calls = unanswered_calls((snapshot.values or {}).get("messages") or [])
    answers = [await closing_answer(store, thread, message_id, c, why) for c in calls]
    await app.aupdate_state(config, None, as_node=END)
    if answers:
        update: dict[str, Any] = {"messages": answers}
        if "approvals" in app.channels:  # the read-only agent's state has none
            update["approvals"] = {}
        # Written as if the tools node answered, which queues the agent step; clear it again.
        await app.aupdate_state(config, update, as_node="tools")
        await app.aupdate_state(config, None, as_node=END)
    return answers


# --- reading the file without the model or the tools -----------------------------------------


@asynccontextmanager
async def open_for_reading(db: Path) -> AsyncIterator[tuple[Store, Any]]:
    from agent_graph import open_checkpointer, reading_graph

    async with open_store(db) as store, open_checkpointer(db) as saver:
        yield store, reading_graph(saver)


async def thread_names(store: Store) -> list[str]:
    """Every thread in the file: registered by us, or only checkpointed (a file written by a
    version before the registry). Asked of the table, not by loading every checkpoint."""
    names = set(await store.registered_names())
    async with store.conn.execute("SELECT DISTINCT thread_id FROM checkpoints") as cursor:
        names.update(str(row[0]) for row in await cursor.fetchall())
    return sorted(names)


async def all_views(store: Store, app: Any) -> list[ThreadView]:
    views = [await view_thread(app, name) for name in await thread_names(store)]
    return [view for view in views if view is not None]
