"""`fsagent migrate-db FROM TO`: every thread of one store copied into another, whatever the
two databases are (SQLite to Postgres, and back).

A thread is copied whole: every checkpoint, oldest first, with each one's pending writes, so
the messages (stored as deltas, rebuilt from the writes of every ancestor), a pending
approval and its raw interrupt are in the copy as they were. Then its registry row and its
ledger; the audit log is copied whole at the end, rows of threads deleted since included.
Both copies of a thread are held (leased) while it is copied, so nothing runs on it meanwhile.

A saver hands pending writes back without their task path (which orders the writes of
parallel tasks of one step); our graph runs one task a step, so nothing depends on it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, CheckpointTuple

from store.base import Store
from store.errors import StoreError


@dataclass
class Copied:
    threads: dict[str, int] = field(default_factory=dict)  # thread -> checkpoints copied
    ledger_rows: int = 0
    audit_rows: int = 0


async def copy_store(source: Store, target: Store) -> Copied:
    names = await source.thread_names()
    clash = sorted(set(names) & set(await target.thread_names()))
    if clash:
        raise StoreError(
            f"{target.location} already has thread(s) {', '.join(clash)}; nothing was copied. "
            "Copy into an empty store, or remove them there first (fsagent threads rm NAME)"
        )
    copied = Copied()
    for name in names:
        async with source.hold(name), target.hold(name):
            copied.threads[name] = await copy_checkpoints(
                source.checkpointer, target.checkpointer, name
            )
            record = await source.thread_record(name)
            await target.add_thread_record(record)
            copied.ledger_rows += len(record.ledger)
    audit = await source.audit_rows()
    await target.record_audit(audit)
    copied.audit_rows = len(audit)
    return copied


async def checkpoints_oldest_first(
    saver: BaseCheckpointSaver[Any], thread: str
) -> AsyncIterator[CheckpointTuple]:
    found = [item async for item in saver.alist({"configurable": {"thread_id": thread}})]
    # Newest first from the saver; a checkpoint's parent must be there before it is.
    for item in reversed(found):
        yield item


async def copy_checkpoints(
    source: BaseCheckpointSaver[Any], target: BaseCheckpointSaver[Any], thread: str
) -> int:
    count = 0
    async for item in checkpoints_oldest_first(source, thread):
        namespace = item.config["configurable"].get("checkpoint_ns", "")
        checkpoint = item.checkpoint
        parent_id = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        # `aput` takes the parent's id from the config it is given.
        put_config: dict[str, Any] = {
            "configurable": {"thread_id": thread, "checkpoint_ns": namespace}
        }
        if parent_id:
            put_config["configurable"]["checkpoint_id"] = parent_id
        saved = await target.aput(
            put_config,  # type: ignore[arg-type]
            checkpoint,
            item.metadata,
            dict(checkpoint.get("channel_versions") or {}),
        )
        for task_id, writes in writes_by_task(item.pending_writes or []):
            await target.aput_writes(saved, writes, task_id)
        count += 1
    return count


def writes_by_task(pending: list[Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """A checkpoint's pending writes in the calls a saver takes them in: a task's ordinary
    writes together (their index is their position), each special write (interrupt,
    error, resume) on its own (its index is fixed)."""
    ordinary: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    calls: list[tuple[str, list[tuple[str, Any]]]] = []
    for task_id, channel, value in pending:
        if channel in WRITES_IDX_MAP:
            calls.append((task_id, [(channel, value)]))
        else:
            ordinary[task_id].append((channel, value))
    return [(task_id, writes) for task_id, writes in ordinary.items()] + calls
