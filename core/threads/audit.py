"""The audit log's rows: one per decision on a write call (the store keeps them).

Rows are written by the graph's `tools` node, the first step after every decision (a
person's, a rule's, a grant's or the mode's), so one place records them all. That node can
run again after a crash; the table is unique on (thread, message, call id, decision), so a
second run adds nothing. The message id is part of the key because local models reuse call ids
across turns.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from core.approval.approval import ApprovalRecord
from store.base import AuditRow


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def rows_for(thread: str, message: Any, approvals: Mapping[str, ApprovalRecord]) -> list[AuditRow]:
    """One row per decided write call of this model message, with the arguments that ran."""
    rows = []
    for call in message.tool_calls:
        record = approvals.get(call["id"])
        if not isinstance(record, dict):
            continue
        args = record.get("args", call["args"])
        reason = record.get("reason") or record.get("message") or ""
        rows.append(
            AuditRow(
                time=now(),
                thread=thread,
                message_id=str(message.id),
                call_id=call["id"],
                tool=call["name"],
                args=args,
                decision=str(record.get("decision", record.get("type"))),
                reason=str(reason),
                by=str(record.get("by", "person")),
            )
        )
    return rows
