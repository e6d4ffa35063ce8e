"""What every thread store holds, whatever the database: the interface the core works with.

A store is one database holding LangGraph's checkpoints (through its own saver) and our
tables: the thread registry with its one-process lock, the write ledger that makes every
write run at most once, the audit log, and our schema version. The core only ever sees this
interface, so a second database (Postgres) is a second implementation, not a second code path.
"""

from __future__ import annotations

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
class AuditRow:
    """One decision on one write call, with the arguments that ran (edited ones too)."""

    time: str
    thread: str
    message_id: str
    call_id: str
    tool: str
    args: Any
    decision: str  # approve, edit, grant or reject
    reason: str
    by: str  # person, piped, admin, rule, grant or mode


class Store(Protocol):
    """One thread store. Every method is safe to call again after a crash: writes are keyed
    so a repeat adds nothing."""

    @property
    def location(self) -> str:
        """Where the store is, as the person named it (a path, a URL without password)."""
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
        """Delete the thread: its checkpoints, registry row and ledger. The audit stays."""
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

    # -- our schema ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        """The number of our migrations applied (see store.migrations)."""
        ...
