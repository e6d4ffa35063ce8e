"""What the API says about threads, as JSON: a thread's status and messages, and the calls it
waits on with their previews (what each would change, worked out without changing anything)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from core.approval.decisions import ToolCall
from core.changes.binding import Preview
from core.changes.diff_view import WordSpans, first_view_page, is_diff, totals, word_spans
from core.session import ThreadSession
from core.threads.messages import content_text
from core.threads.threads import ThreadView, pending_approval
from web.preview_cache import PreviewCache, flag_data


def message_data(message: AnyMessage) -> dict[str, Any] | None:
    if isinstance(message, HumanMessage):
        return {"role": "user", "text": content_text(message.content)}
    if isinstance(message, AIMessage):
        calls = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]
        return {"role": "assistant", "text": content_text(message.content), "tool_calls": calls}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "call_id": message.tool_call_id,
            "text": content_text(message.content),
            "failed": message.status == "error",
        }
    return None


def summary(view: ThreadView) -> dict[str, Any]:
    """A thread in a list: no messages, no previews (those cost a server call each)."""
    return {
        "name": view.name,
        "status": view.status,
        "messages": len(view.messages),
        "last_activity": view.last_activity,
        "pending": [bare_call(call) for call in view.waiting],
        "problem": view.problem,
    }


def bare_call(call: ToolCall) -> dict[str, Any]:
    """A call of either kind (ApprovalCall, QuestionCall) as the API shows it."""
    return {
        "id": call.get("id"),
        "name": call.get("name"),
        "args": call.get("args"),
        "allowed_decisions": call.get("allowed_decisions") or [],
        # A question (ask_person) has these instead of decisions.
        **{key: call[key] for key in ("question", "choices") if key in call},
    }


async def previewed(
    session: ThreadSession, calls: Sequence[ToolCall], cache: PreviewCache
) -> list[dict[str, Any]]:
    """Each call with its preview and the binding of what that shows (`preview_id`), which
    an approval sends back (core.changes.binding). A diff is worked out once per state
    (web/preview_cache.py); anything else at each look."""
    found = []
    for call in calls:
        kept = await cache.drawn(session, call)
        if kept is not None:
            shown, drawn = kept.preview, kept.facts
        else:
            shown = await cache.worked_out(session, call)
            drawn = await drawn_diff(session, call, shown)
        found.append(
            {
                **bare_call(call),
                "preview": shown.lines,
                "preview_id": shown.preview_id,
                # The characters marked in the lines (core.changes.marks): look-alikes,
                # whitespace drawn as signs, control characters, by line index.
                "preview_flags": shown.flag_data(),
                **drawn,
            }
        )
    return found


CUT_MARK = "more lines not shown"  # core.changes.preview.cut's last line


async def drawn_diff(session: ThreadSession, call: ToolCall, shown: Preview) -> dict[str, Any]:
    """What the page draws a diff with (core.changes.diff_view): the whole diff's totals,
    the changed words, and for a cut diff a first view with added lines in it. That view is
    of the whole preview read again; it is sent only when it has the same preview_id, so a
    yes still binds to exactly the state drawn. (A diff the cache could not keep comes here;
    a kept one has these from its one dry run: web/preview_cache.py.)"""
    if not is_diff(shown.lines):
        return {}
    cut = next((i for i, line in enumerate(shown.lines) if CUT_MARK in line), None)
    if cut is None:
        return {"diff_totals": totals(shown.lines), "preview_words": word_spans(shown.lines)}
    whole = await session.whole_preview(call)
    if whole.preview_id != shown.preview_id:
        return {}
    # After the cut: the undo note, and a legend of the signs this view draws.
    first, flags = first_view_page(whole.lines, whole.flags, shown.lines[cut + 1 :])
    return {
        "diff_totals": totals(whole.lines),
        "preview_first": first,
        "preview_words": word_spans(first),
        "preview_first_flags": flag_data(flags),
    }


def page_facts(
    shown: Preview, offset: int, end: int, whole_words: WordSpans | None = None
) -> dict[str, Any]:
    """A page of a whole preview's totals, its changed words and its marked characters (by
    index in the whole); `whole_words` are the whole's when they are known already (a kept
    diff)."""
    lines = shown.lines
    if not is_diff(lines):
        return {}
    known = word_spans(lines) if whole_words is None else whole_words
    words = {at: spans for at, spans in known.items() if offset <= at < end}
    flags = flag_data({at: found for at, found in shown.flags.items() if offset <= at < end})
    return {"totals": totals(lines), "words": words, "flags": flags}


async def detail(session: ThreadSession, view: ThreadView, cache: PreviewCache) -> dict[str, Any]:
    """A thread in full: its messages, and the calls it waits on with their previews."""
    messages = [data for m in view.messages if (data := message_data(m)) is not None]
    return {
        **summary(view),
        "messages": messages,
        "pending": await previewed(session, view.waiting, cache),
    }


async def waiting(session: ThreadSession, view: ThreadView, cache: PreviewCache) -> dict[str, Any]:
    """A waiting thread in the admin's list: the calls, their previews and the request that
    caused them."""
    payload = pending_approval(view.snapshot)
    return {
        "thread": view.name,
        "kind": payload["kind"] if payload else "approval",  # "approval", or "question"
        "request": view.request,
        "route": payload.get("route") if payload else None,
        # What the model said before its calls ("I'll add it after 'call mom'."): the why.
        "reason": model_words(view),
        "calls": await previewed(session, view.waiting, cache),
        "problem": view.problem,
        "last_activity": view.last_activity,
        "since": view.last_activity,  # when it paused: its checkpoint's time
    }


def model_words(view: ThreadView) -> str:
    """The text of the model's message that made the calls the thread waits on."""
    waiting = {call.get("id") for call in view.waiting}
    for message in reversed(view.messages):
        if isinstance(message, AIMessage) and {c["id"] for c in message.tool_calls} & waiting:
            return content_text(message.content)
    return ""
