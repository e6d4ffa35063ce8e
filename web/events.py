"""A run's core events (core/threads/events.py) as server-sent events: one `event:` name and
one JSON
`data:` line each.

    route        {"route"}
    text         {"text"}                      the model's reply as it streams
    notice       {"text"}                      a line of ours, never part of the reply (a cut-off
                                               run finished, the request queued for review)
    answer       {"text"}                      a finished reply, whole
    tool_call    {"id", "tool", "args", "error"}
    tool_result  {"id", "tool", "text", "failed"}
    decision     {"id", "tool", "decision", "reason", "by"}   a rule's, the mode's, a grant's,
                                                              or the admin's
    reasoning    {"text"}                      a reasoning model's thinking as it streams; never
                                               part of the answer
    cut          {"limit"}                     the reply stopped at the reply limit (tokens, 0
                                               when unknown); any call in it was not run
    compacted    {"summarised", "covered", "kept", "tokens_before", "tokens_after",
                  "context_length", "why"}     older messages summarised (see core.threads.events)
    undone       {"text", "complete"}          an undo ran; what the model was told
    approval     {"status": "pending", "thread", "route", "calls": [... each with "preview"]}
    error        {"text"}
    done         {"thread", "status"}          done | pending | error | cut_off; always last

Each has an `id:` line, its place in the run (1, 2, ...); a `: keep-alive` comment comes
while nothing else does for a while (web/runs.py).

A run that pauses ends with a `notice` that the request is queued for review, then
`approval`, then `done`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any, assert_never

from core.approval.questions import Pause
from core.session import ThreadSession
from core.text import format_call
from core.threads import events
from web.payloads import previewed
from web.preview_cache import PreviewCache

Frame = tuple[str, dict[str, Any]]

DONE, PENDING, ERROR, CUT_OFF = "done", "pending", "error", "cut_off"


def encode(frame: Frame, number: int | None = None) -> bytes:
    """One server-sent event; `number` its `id:` (a frame's place in its run, from 1)."""
    kind, data = frame
    first = f"id: {number}\n" if number is not None else ""
    return f"{first}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def queued_notice(thread: str, payload: Pause) -> str:
    calls = ", ".join(format_call(c["name"], c["args"], 60) for c in payload["calls"])
    return (
        f"Queued for review: {calls} waits for approval. Nothing was changed yet; an admin "
        f"decides it in the inbox (or POST /api/admin/approvals/{thread}), and the answer "
        "follows."
    )


async def run_frames(
    session: ThreadSession, run: AsyncIterator[events.Event], cache: PreviewCache
) -> AsyncIterator[Frame]:
    """The frames of one run, in order, without `done` (the runner adds it). A pause's
    previews are kept in `cache`, so the inbox's listing after it works out none again."""
    streamed = False  # whether the reply being written was sent as text deltas already
    async for event in run:
        # Every event has its frame: the type checker proves the match complete.
        match event:
            case events.TextDelta(text):
                streamed = True
                yield "text", {"text": text}
            case events.Reasoning(text):
                yield "reasoning", {"text": text}
            case events.Unsure(text):
                yield "unsure", {"text": text}
            case events.Settled():
                yield "settled", {}
            case events.Answer(text):
                if not streamed:  # our own messages (the step limit) do not stream
                    yield "text", {"text": text}
                streamed = False
                yield "answer", {"text": text}
            case events.Route(route):
                yield "route", {"route": route}
            case events.ToolCall(call_id, tool, args, error):
                streamed = False
                yield "tool_call", {"id": call_id, "tool": tool, "args": args, "error": error}
            case events.ToolResult():
                yield result_frame(event)
            case events.Decision():
                yield decision_frame(event)
            case events.ReplyCut(limit):
                yield "cut", {"limit": limit}
            case events.Compacted():
                yield "compacted", dataclasses.asdict(event)
            case events.Undone(text, complete):
                yield "undone", {"text": text, "complete": complete}
            case events.Notice(text):
                # Ours, not the model's: a line of its own, never part of the reply's text.
                streamed = False
                yield "notice", {"text": text}
            case events.Failed(text):
                yield "error", {"text": text}
            case events.Paused(payload):
                yield "notice", {"text": queued_notice(session.thread, payload)}
                yield "approval", await approval_data(session, payload, cache)
            case _:
                assert_never(event)


def result_frame(result: events.ToolResult) -> Frame:
    return "tool_result", {
        "id": result.call_id,
        "tool": result.tool,
        "text": result.text,
        "failed": result.failed,
    }


def decision_frame(decision: events.Decision) -> Frame:
    return "decision", {
        "id": decision.call_id,
        "tool": decision.tool,
        "decision": decision.decision,
        "reason": decision.reason,
        "by": decision.by,
    }


async def approval_data(
    session: ThreadSession, payload: Pause, cache: PreviewCache
) -> dict[str, Any]:
    return {
        "status": PENDING,
        "thread": session.thread,
        "route": payload.get("route"),
        "calls": await previewed(session, payload["calls"], cache),
    }


def status_of(frames: list[Frame]) -> str:
    """How a run ended, from its frames: the last one that says."""
    for kind, _ in reversed(frames):
        if kind == "approval":
            return PENDING
        if kind == "error":
            return ERROR
    return DONE
