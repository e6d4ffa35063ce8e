"""What every thread store holds, whatever the database: the interface the core works with.

A store is one database holding LangGraph's checkpoints (through its own saver) and our
tables: the thread registry with its one-process lock, the write ledger that makes every
write run at most once, the audit log, the undo records (what each approved write replaced)
and our schema version. The core only ever sees this
interface, so a second database (Postgres) is a second implementation, not a second code path.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


@dataclass(frozen=True)
class LedgerRow:
    status: str  # "started" or "done"
    result: str | None
    failed: bool


@dataclass(frozen=True)
class LedgerEntry:
    """A ledger row whole, as a copy of the thread needs it (`args` is the stored JSON)."""

    thread: str
    message_id: str
    call_id: str
    tool: str
    args: str
    status: str
    result: str | None
    failed: bool
    started_at: str
    finished_at: str | None

    def values(self) -> tuple[Any, ...]:
        """The columns in table order."""
        return (
            self.thread, self.message_id, self.call_id, self.tool, self.args, self.status,
            self.result, int(self.failed), self.started_at, self.finished_at,
        )  # fmt: skip


@dataclass(frozen=True)
class AuditRow:
    """One decision on one write call, with the arguments that ran (edited ones too)."""

    time: str
    thread: str
    message_id: str
    call_id: str
    tool: str
    args: Any
    decision: str  # approve, edit, grant, reject, respond, undo; answer, unanswered
    reason: str
    by: str  # person, piped, admin, rule, grant or mode


@dataclass(frozen=True)
class UndoRecord:
    """What one write call replaced, kept before it ran, so it can be put back."""

    seq: int  # the order records were kept in: a later write has a larger seq
    thread: str
    message_id: str
    call_id: str
    turn: int  # the person's request it ran in, counted from 1
    tool: str
    args: Any
    record: dict[str, Any]  # the old state, as core.changes.undo_capture writes it
    size: int  # bytes of old content it holds (the per-thread limit counts these)
    undone_by: str | None  # the undo that took it back; None while it stands

    def values(self, kept_at: str) -> tuple[Any, ...]:
        """The columns a copy inserts, in table order (its seq is numbered anew, in order)."""
        return (
            self.thread,
            self.message_id,
            self.call_id,
            self.turn,
            self.tool,
            json.dumps(self.args, ensure_ascii=False),
            json.dumps(self.record, ensure_ascii=False),
            self.size,
            self.undone_by,
            kept_at,
        )


@dataclass(frozen=True)
class UndoRun:
    """An undo the person approved: which records it takes back, and whether it finished."""

    thread: str
    undo_id: str
    plan: dict[str, Any]  # as core.undo writes it: the records' seqs, forced or not, by whom
    status: str  # "running" or "done"


@dataclass(frozen=True)
class ThreadRecord:
    """What our tables hold of one thread beside its checkpoints: its registry row (without
    a holder), its ledger and its undo records and runs. The audit log is copied whole,
    threads deleted since included."""

    name: str
    created_at: str | None
    ledger: tuple[LedgerEntry, ...]
    undo: tuple[UndoRecord, ...] = ()  # oldest first; the copy numbers them anew, in order
    undo_runs: tuple[UndoRun, ...] = ()
    settings: str | None = None  # JSON: what the thread was started with (migration 6)


class Store(Protocol):
    """One thread store. Every method is safe to call again after a crash: writes are keyed
    so a repeat adds nothing."""

    @property
    def location(self) -> str:
        """Where the store is, as the person may see it (a path, or a URL with its password
        masked)."""
        ...

    @property
    def checkpointer(self) -> BaseCheckpointSaver[Any]:
        """LangGraph's saver on the same database."""
        ...

    # -- the registry and its lock -------------------------------------------------------------

    def hold(self, thread: str) -> AbstractAsyncContextManager[None]:
        """Have `thread` open in this process only; ThreadBusy names another live holder.
        A lock left by a process that died is taken over."""
        ...

    async def thread_names(self) -> list[str]:
        """Every thread: registered, or only checkpointed (files from before the registry)."""
        ...

    async def forget(self, thread: str) -> None:
        """Delete the thread: its checkpoints, registry row, ledger and undo records. The
        audit stays."""
        ...

    # -- the ledger ------------------------------------------------------------------------------

    async def ledger_row(self, thread: str, message_id: str, call_id: str) -> LedgerRow | None: ...

    async def ledger_claim(
        self, thread: str, message_id: str, call_id: str, tool: str, args: Any
    ) -> bool:
        """Record a write as started, before it runs. False when a row was there already:
        the call ran (or may have) in another run, and must not run again."""
        ...

    async def ledger_done(
        self, thread: str, message_id: str, call_id: str, result: str, failed: bool
    ) -> None: ...

    # -- the audit log ---------------------------------------------------------------------------

    async def record_audit(self, rows: list[AuditRow]) -> None:
        """Add decisions; a row already recorded (same thread, message, call, decision) is
        kept as it was."""
        ...

    async def audit_rows(self, thread: str | None = None) -> list[AuditRow]: ...

    # -- copying a thread to another store (`fsagent migrate-db`) ---------------------------------

    async def thread_record(self, thread: str) -> ThreadRecord: ...

    async def thread_settings(self, thread: str) -> dict[str, Any] | None:
        """What the thread was started with (roots, approval mode, rules file); None for a
        thread started before fsagent kept it."""
        ...

    async def record_thread_settings(self, thread: str, settings: dict[str, Any]) -> None:
        """Keep what a held thread is started with; a thread that has them keeps its own."""
        ...

    async def add_thread_record(self, record: ThreadRecord) -> None:
        """Register the thread (with no holder) and add its ledger rows; rows already there
        are kept as they were."""
        ...

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
        """Keep what a write call is about to replace, before it runs (before its ledger
        claim). Kept again for a call that has not run yet (a resumed run) replaces the
        record and keeps its place in the order."""
        ...

    async def undo_records(self, thread: str) -> list[UndoRecord]:
        """The thread's records, oldest first."""
        ...

    async def undo_bytes(self, thread: str) -> int:
        """The bytes of old content the thread's records hold, for the per-thread limit."""
        ...

    async def begin_undo(
        self, thread: str, undo_id: str, plan: dict[str, Any], seqs: list[int]
    ) -> bool:
        """In one transaction: record the undo as running and mark the records `seqs` undone
        by it. False, with nothing changed, when any of them was undone already (an undo
        never takes a write back twice)."""
        ...

    async def unfinished_undo(self, thread: str) -> UndoRun | None:
        """An undo that was approved and started but not finished (the process died)."""
        ...

    async def finish_undo(self, thread: str, undo_id: str) -> None: ...

    # -- our schema ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        """The number of our migrations applied (see store.migrations)."""
        ...
