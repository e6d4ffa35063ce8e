"""The prompt before the imports: at a terminal, `you>` appears at once, and the person types
while fsagent imports LangGraph and the model's client, starts the MCP server and asks the
model server about its model (issue 31).

What can be said before any of that is said from the light reader (store.reading): which
thread, where it was, where the agent may act, who decides writes. The model's line follows
above the prompt when it is known (terminal.tty prints above a prompt being read). A line
typed before everything is ready waits for it under a status line, the usual sign of life.

Only a thread that needs nothing first gets the early prompt: a new one, or one idle in the
roots it was started with, in a SQLite file or a Postgres database (read by their light
readers). A thread paused for an approval or an answer, one a crash cut off, one that would act
in other roots (a question first), or a store this fsagent cannot read so take the usual
start, where those come first.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from core.approval.policy import Policy
from core.threads.stored_views import IDLE, MESSAGES, StoredView, stored_view
from core.threads.thread_names import escaped, follows_rule
from store.checkpoint_format import Unreadable
from store.location import is_postgres
from terminal.banner import HINT, mode_lines, recap, status_line, summary_note, thread_line
from terminal.reading import open_reader
from terminal.tty import TtyTerminal

STARTING = "starting: the model server and the tools"


@dataclass
class EarlyThread:
    """What the light reader says of the thread the session opens."""

    view: StoredView | None  # None: a new thread
    roots: tuple[Path, ...]  # where it acts
    note: str = ""  # "this thread's": its own roots, taken without --root
    policy: Path | None = None  # its own rules file, taken with its roots


def early_thread(
    location: str, thread: str, roots: tuple[Path, ...], roots_given: bool
) -> EarlyThread | None:
    """The thread, if the session can prompt before the rest of the start; else None. A
    Postgres server that cannot be reached is the store's one line here, as it would be a
    moment later (the connection's wait is not paid twice)."""
    if not follows_rule(thread):
        return None
    if not is_postgres(location) and not Path(location).exists():
        return EarlyThread(None, roots)
    try:
        with open_reader(location) as reader:
            if not reader.made():
                return EarlyThread(None, roots)  # the start makes the store: a new thread
            if reader.newer_than_us():
                return None
            stored = reader.thread(thread, [MESSAGES])
            recorded = reader.thread_settings(thread)
    except (Unreadable, OSError):
        return None  # a file or database not ours yet, or not readable so: the usual start
    view = stored_view(stored) if stored is not None else None
    if view is not None and (view.status != IDLE or view.problem):
        return None
    if stored is not None and (stored.checkpoint.get("channel_values") or {}).get("grants"):
        return None  # its grants are said from the graph's state (terminal.slash.grant_lines)
    if not recorded.get("roots"):
        return EarlyThread(view, roots)
    started = tuple(Path(root) for root in recorded["roots"])
    if not roots_given:
        policy = Path(recorded["policy"]) if recorded.get("policy") else None
        return EarlyThread(view, started, "this thread's", policy)
    if tuple(Path(os.path.realpath(root)) for root in roots) != started:
        return None  # acting in other roots is asked about first
    return EarlyThread(view, roots)


@dataclass
class EarlyPrompt:
    """The banner said and the first line being read, while the start goes on."""

    term: TtyTerminal
    thread: EarlyThread
    line: asyncio.Task[str | None] = field(init=False)
    waiting: bool = False  # the sign of life is up: a line came before the start was done
    taken: bool = False  # the session has the first line

    def __post_init__(self) -> None:
        self.line = asyncio.ensure_future(self.term.prompt("you> "))
        self.line.add_done_callback(self._typed)

    def _typed(self, line: asyncio.Task[str | None]) -> None:
        if self.taken:
            return  # the session was waiting for it: it goes on at once, no sign needed
        if line.cancelled() or line.exception() is not None or line.result() is None:
            return  # Ctrl-C or Ctrl-D: the session ends once it can
        self.waiting = True
        self.term.working_depth += 1
        self.term.live.start(STARTING)

    def imported(self) -> None:
        """The agent's modules are in: the `/` commands can be completed now."""
        self.term.editor.complete_again()

    def ready(self) -> None:
        """Everything has started: the sign of life, if up, goes."""
        if self.waiting:
            self.waiting = False
            self.term.working_depth -= 1
            self.term.live.stop()

    async def first(self) -> str | None:
        """The first line, once typed (Ctrl-C there: Interrupted, as at any prompt)."""
        self.ready()
        self.taken = True
        return await self.line

    def cancel(self) -> str | None:
        """Stop reading (the start failed, or the thread turned out to need something first);
        the line, if one was typed and not taken, to say it was not sent."""
        self.ready()
        if not self.line.done():
            self.line.cancel()
            return None
        if self.taken or self.line.cancelled() or self.line.exception() is not None:
            return None
        return self.line.result()


def open_early(
    term: TtyTerminal,
    thread: EarlyThread,
    name: str,
    *,
    approve_mode: str,
    policy: Policy | None,
    store: str = "",
) -> EarlyPrompt:
    """Say what is known now and start reading the first line."""
    view = thread.view
    messages = view.messages if view is not None else []
    term.say(thread_line(escaped(name), None, len(messages)))
    for line in (
        recap(messages, paused=False),
        status_line(thread.roots, approve_mode, thread.note, store),
        summary_note(view.summary if view is not None else None),
        *mode_lines(approve_mode, policy),
        HINT,
    ):
        if line:
            term.say(line)
    return EarlyPrompt(term, thread)
