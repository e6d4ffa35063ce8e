"""A decided batch as one JSON answer, in the seed's admin contract:

    {"status": "approved" | "rejected" | "answered", "thread_id", "answer",
     "run": "done" | "pending" | "error" | "cut_off",      how the resumed run ended
     "results": [{"id", "tool", "path", "failed", "text"}],  each call that ran, by path
     "calls": [...]  (when it pauses again), "error": "..." (when the run failed),
     "decided_by": "admin", "decided_at": "2026-01-02T10:00:00+0000"}   who decided, when

`status` is the admin's decision (approved when any call of the batch was let run), never the
run's: a client written against the seed reads it so; how the run went has a field of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.approval.decisions import AnswerValue, ResumeValue, ToolCall, resume_json
from web.events import DONE, Frame

LET_RUN = frozenset({"approve", "edit"})


def decision_status(decisions: dict[str, Any]) -> str:
    if "answers" in decisions:
        return "answered"
    kinds = {d.get("type") for d in decisions.get("decisions", {}).values()}
    return "approved" if kinds & LET_RUN else "rejected"


def call_path(args: Any) -> str | None:
    """What a call works on, as a person names it: its path, or source -> destination."""
    if not isinstance(args, dict):
        return None
    path, source, destination = args.get("path"), args.get("source"), args.get("destination")
    if isinstance(path, str):
        return path
    if isinstance(source, str) and isinstance(destination, str):
        return f"{source} → {destination}"
    return None


def outcome(
    thread: str,
    calls: Sequence[ToolCall],
    resume: ResumeValue | AnswerValue,
    frames: list[Frame],
    decided: tuple[str, str] = ("admin", ""),
) -> dict[str, Any]:
    decisions = resume_json(resume)  # either kind, read as its JSON form
    args = {call["id"]: call.get("args") for call in calls}
    names = {call["id"]: call.get("name") for call in calls}
    for call_id, decision in decisions.get("decisions", {}).items():
        if decision.get("type") == "edit":
            args[call_id] = decision.get("args")
    run = DONE
    answer = ""
    extra: dict[str, Any] = {}
    results = []
    for kind, data in frames:
        if kind == "answer":
            answer = data["text"]
        elif kind == "tool_result":
            results.append({
                "id": data["id"],
                # A resumed call's result may not know its tool ("?"); the batch does.
                "tool": names.get(data["id"]) or data["tool"],
                "path": call_path(args.get(data["id"])),
                "failed": data["failed"],
                "text": data["text"],
            })  # fmt: skip
        elif kind == "tool_call":
            args.setdefault(data["id"], data.get("args"))
            names.setdefault(data["id"], data.get("tool"))
        elif kind == "approval":
            extra["calls"] = data["calls"]
        elif kind == "error":
            extra.setdefault("error", data["text"])
        elif kind == "done":
            run = data["status"]
    return {
        "status": decision_status(decisions),
        "thread_id": thread,
        "answer": answer,
        "run": run,
        "results": results,
        # The page's Decided list says who and when, as the refusal a late second tab reads.
        "decided_by": decided[0],
        "decided_at": decided[1],
        **extra,
    }
