"""The review of a paused batch: each write call shown with what it would change, and the
person's decision on it (y, n, e, a, r, ?), read from a terminal or, strictly, from a pipe."""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.approval.approval import ApprovalCall, ApprovalPayload, ToolCall
from core.approval.decisions import Decision, ResumeValue
from core.changes.binding import Preview, carry
from core.text import clip, visible
from terminal.console import Terminal

# The keys a person answers with, and the decision each one gives.
ANSWER_WORDS = {"y": "y", "yes": "y", "n": "n", "no": "n", "e": "e", "a": "a", "r": "r"}
# What the payload must allow for a key to be offered: `a` approves, so it needs approve.
KEY_NEEDS = {"y": "approve", "n": "reject", "e": "edit", "a": "approve", "r": "respond"}
KEYS = "ynear"
PIPED_ANSWERS = "y, yes, n, no, n: reason, e: {json arguments}, r: text, or a"
BULKY_ARGUMENTS = ("content", "edits")  # shown by the preview, not in the call's line


class NotAnAnswer(Exception):
    """A line at an approval that is not an answer. Piped, it ends the run (exit 3) with
    nothing run and the thread still paused; on a TTY the person is asked again."""


def offered_keys(call: ApprovalCall) -> list[str]:
    allowed = call.get("allowed_decisions") or []
    return [key for key in KEYS if KEY_NEEDS[key] in allowed]


def grant_folder(call: ApprovalCall) -> str:
    """The folder an `a` would cover, as the person wrote the path (approve resolves it)."""
    first = call["args"].get("source", call["args"].get("path", ""))
    return (posixpath.dirname(str(first)) or ".") + "/"


def help_lines(call: ApprovalCall) -> list[str]:
    texts = {
        "y": "approve: run it as shown",
        "n": "reject: it does not run (then an optional reason, which the model reads)",
        "e": "edit: change it before it runs ($EDITOR; or type e: {json arguments})",
        "a": f"approve, and approve {call['name']} inside {grant_folder(call)} without asking "
        "for the rest of this thread (/grants lists grants, /revoke N removes one)",
        "r": "respond: it does not run; what you type is the model's answer in its place "
        "(or type r: text)",
    }
    lines = [f"  {key}  {texts[key]}" for key in offered_keys(call)]
    return lines + ["  ?  this help; an empty answer is no"]


def describe_call(call: ToolCall) -> str:
    """A call (a payload's, or an undo record's name and args) in full, except bulky
    arguments, which the preview shows as a change."""
    args = call["args"] if isinstance(call["args"], dict) else {}
    shown = []
    for key, value in args.items():
        if key in BULKY_ARGUMENTS:
            shown.append(f"{key}=<{len(str(value)):,} chars, below>")
        else:
            shown.append(f"{key}={clip(repr(value))}")
    return f"{call['name']}({', '.join(shown)})"


def parse_answer(line: str, call: ApprovalCall) -> tuple[str, str]:
    """(key, what follows a colon) for an answer line; NotAnAnswer for anything else."""
    word, _, rest = line.strip().partition(":")
    key = ANSWER_WORDS.get(word.strip().lower())
    rest = rest.strip()
    if key is None or (rest and key in ("y", "a")):
        raise NotAnAnswer(f"{line.strip()!r} is not an answer")
    if key not in offered_keys(call):
        offered = ", ".join(offered_keys(call))
        raise NotAnAnswer(f"{line.strip()!r}: {call['name']} can only be answered {offered}")
    return key, rest


def json_arguments(text: str) -> dict[str, Any]:
    try:
        args = json.loads(text)
    except ValueError as error:
        raise NotAnAnswer(f"{text.strip()!r} is not JSON arguments ({error})") from None
    if not isinstance(args, dict):
        raise NotAnAnswer(f"{text.strip()!r} is not a JSON object of arguments")
    return args


def as_decision(key: str, rest: str, by: str, args: dict[str, Any] | None = None) -> Decision:
    """The decision an answer gives; `by`: piped or person (who answered)."""
    if key == "y":
        return {"type": "approve", "by": by}
    if key == "a":
        return {"type": "approve", "grant": True, "by": by}
    if key == "e" and args is not None:
        return {"type": "edit", "args": args, "by": by}
    if key == "r":
        return {"type": "respond", "message": rest, "by": by}
    return {"type": "reject", "message": rest, "by": by}


async def piped_decision(term: Terminal, call: ApprovalCall) -> Decision | None:
    """A pipe must answer exactly; None at end of input."""
    line = await term.ask(decision_prompt(call))
    if line is None:
        return None
    key, rest = parse_answer(line, call)
    if key == "r" and not rest:
        raise NotAnAnswer(f"{line.strip()!r}: a piped respond carries its text (r: text)")
    if key != "e":
        return as_decision(key, rest, "piped")
    text = rest or await term.follow_up("  arguments as JSON> ")
    if text is None:
        return None
    return as_decision(key, "", "piped", json_arguments(text))


async def person_decision(term: Terminal, call: ApprovalCall) -> Decision | None:
    """A person at a TTY is asked again until the answer is one; None at end of input
    (Ctrl-D). Enter alone is no: only an explicit answer approves."""
    while True:
        line = await term.ask(decision_prompt(call))
        if line is None:
            return None
        if not line.strip():
            return as_decision("n", "", "person")
        if line.strip() == "?":
            for text in help_lines(call):
                term.say(text)
            continue
        try:
            key, rest = parse_answer(line, call)
            if key == "n" and not rest:
                rest = await term.follow_up("  reason (optional; the model reads it)> ") or ""
            if key == "r" and not rest:
                asked = "  your answer (the model reads it as the result)> "
                rest = await term.follow_up(asked) or ""
                if not rest.strip():
                    term.say("  no answer given; answer again")
                    continue
            if key != "e":
                return as_decision(key, rest, "person")
            args = json_arguments(rest) if rest else edit_in_editor(term, call)
        except NotAnAnswer as refused:
            term.say(f"  {refused}; ? shows the answers")
            continue
        if args is not None:
            return as_decision(key, "", "person", args)


def decision_prompt(call: ApprovalCall) -> str:
    return f"  {call['name']}? [{'/'.join(offered_keys(call))}/?] "


def edit_in_editor(term: Terminal, call: ApprovalCall) -> dict[str, Any] | None:
    """Open $EDITOR on the new file content (write_file) or the arguments as JSON."""
    args = call["args"]
    content_only = call["name"] == "write_file" and isinstance(args.get("content"), str)
    before = args["content"] if content_only else json.dumps(args, indent=2) + "\n"
    suffix = Path(str(args.get("path", ""))).suffix if content_only else ".json"
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False, encoding="utf-8") as f:
        f.write(before)
    try:
        with editor_owns_ctrl_c():
            subprocess.run([*shlex.split(editor), f.name], check=False)
        after = Path(f.name).read_text(encoding="utf-8")
    finally:
        os.unlink(f.name)
    if after == before:
        term.say("  unchanged; answer again")
        return None
    return {**args, "content": after} if content_only else json_arguments(after)


@contextmanager
def editor_owns_ctrl_c() -> Iterator[None]:
    """Ctrl-C in $EDITOR is the editor's (vi, nano use it); as `git commit` does, fsagent
    lets it pass meanwhile. A no-op handler rather than SIG_IGN, which the editor would
    inherit."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def diff_style(line: str) -> str | None:
    """The colour of a diff line on a terminal (an SGR code). The line itself is written
    out by `core.text.visible` when it is shown (Terminal.say): a file's control characters
    and bidi controls cannot move the cursor, recolour the screen or reorder what is shown
    to hide part of the very change being approved."""
    for start, code in (("+++", "1"), ("---", "1"), ("+", "32"), ("-", "31"), ("@@", "36")):
        if line.startswith(start):
            return code
    return None


Previewer = Callable[[ApprovalCall], Awaitable[Preview]]


def show_preview(term: Terminal, preview: Preview) -> None:
    """A preview's lines as the person reads them before deciding: each made visible, a
    diff's in its colour."""
    for line in preview.lines:
        term.say("    " + visible(line, keep="\t"), style=diff_style(line))


async def review(
    term: Terminal, payload: ApprovalPayload, preview: Previewer
) -> ResumeValue | None:
    """Ask about each call in turn, with what it would change; None leaves the thread paused
    (end of input). A piped line that is not an answer raises NotAnAnswer; Ctrl-C at a
    question raises Interrupted. Either way nothing is decided. A yes carries the binding of
    the preview printed just above it (core.changes.binding)."""
    calls = payload["calls"]
    term.event("approval_request", calls=[{"tool": c["name"], "args": c["args"]} for c in calls])
    term.say("⚠ Approval needed. The agent wants to run:")
    decisions: dict[str, Decision] = {}
    for number, call in enumerate(calls, 1):
        term.say(f"[{number}/{len(calls)}] {describe_call(call)}")
        with term.working("computing preview"):
            shown = await preview(call)
        show_preview(term, shown)
        decide = piped_decision if term.piped else person_decision
        decision = await decide(term, call)
        if decision is None:
            return None
        decisions[call["id"]] = carry(decision, shown)
    for call in calls:
        decision = decisions[call["id"]]
        kind = "grant" if decision.get("grant") else decision["type"]
        reason = decision.get("message", "")
        term.event("decision", tool=call["name"], decision=kind, reason=reason, by=decision["by"])
    return {"decisions": decisions}
