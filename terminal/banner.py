"""The lines a session opens with, as text from plain values: which thread and where it was,
where the agent may act, and whatever decides writes without asking.

Plain values, not a LangGraph snapshot, so that the prompt before the imports
(terminal.early_prompt) says the same lines from the light reader as display.py says from
the graph's state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from core.approval.pauses import QUESTION_KIND
from core.approval.policy import Policy
from core.text import NOTE_MARK, clip, content_text, counted, format_call, visible

HINT = "Type a prompt; /help lists the commands; /quit or Ctrl-D ends."


class Said(Protocol):
    """A message as a langchain message or the light reader's stored one has it."""

    type: str
    content: Any


def thread_line(
    thread: str,
    pause: Mapping[str, Any] | None,
    messages: int,
    tool_count: int | None = None,
) -> str:
    """`Loaded N tools. Thread 'x': new conversation.` (or resuming, or what it waits on)."""
    head = f"Loaded {tool_count} tools. " if tool_count is not None else ""
    head += f"Thread '{visible(thread, keep='')}': "
    if pause and pause["kind"] == QUESTION_KIND:
        asked = "; ".join(repr(c.get("question", "")) for c in pause["calls"])
        return head + f"paused: waiting for your answer to {asked}."
    if pause:
        calls = ", ".join(format_call(c["name"], c["args"], 60) for c in pause["calls"])
        return head + f"paused: waiting for your approval of {calls}."
    if messages:
        return head + f"resuming, {counted(messages, 'message')}."
    return head + "new conversation."


def recap(messages: Sequence[Said], paused: bool) -> str | None:
    """Where a resumed thread was: the person's last prompt, clipped, and the first line of
    the answer to it (a paused thread's banner says what it waits on instead)."""
    asked = [
        n
        for n, m in enumerate(messages)
        if m.type == "human" and not content_text(m.content).startswith(NOTE_MARK)
    ]
    if not asked:
        return None
    prompt = " ".join(content_text(messages[asked[-1]].content).split())
    line = f"Last: you> {clip(prompt, 70)}"
    answers = [m for m in messages[asked[-1] + 1 :] if m.type == "ai" and content_text(m.content)]
    if answers and not paused:
        first = (content_text(answers[-1].content).strip().splitlines() or [""])[0]
        line += f" · agent> {clip(first, 70)}"
    return line


def summary_note(summary: Any) -> str | None:
    """A resumed thread whose older turns the model sees as a summary says so (`summary` is
    the state's value, core.context.summary.Summary.as_state)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("text"), str):
        return None
    try:
        covers = int(summary["upto"]) - len(summary.get("held") or ())
    except (KeyError, TypeError, ValueError):  # written by another version: say nothing
        return None
    return (
        f"The model is sent a summary in place of this thread's first {covers} "
        "messages (fsagent threads show has them all)."
    )


def status_line(
    roots: Sequence[Path | str], approve_mode: str, note: str = "", store: str = ""
) -> str:
    """Where the agent may read and write (with `note`: "this thread's" when they are the
    roots the thread was started with, taken without --root), who decides writes, and where
    threads are kept (`store`: from another folder, the same file is found, issue 31)."""
    label = "Root" if len(roots) == 1 else "Roots"
    where = ", ".join(visible(str(root), keep="") for root in roots)
    parts = [f"{label}: {where}" + (f" ({note})" if note else "")] if roots else []
    parts.append(f"Approval: {approve_mode}")
    if store:
        parts.append(f"Threads: {visible(store, keep='')}")
    return " · ".join(parts)


def mode_lines(mode: str, policy: Policy | None) -> list[str]:
    """What the approval mode and the rules decide without asking, said up front (the
    grants a thread holds follow: terminal.slash.grant_lines)."""
    lines = []
    if mode == "yes":
        lines.append("--approve yes: every write that no rule denies runs without asking.")
    elif mode == "no":
        lines.append("--approve no: every write is refused; reads still run.")
    if policy is not None and policy.rules:
        lines.append(f"Rules: {len(policy.rules)} from {policy.source}.")
    return lines
