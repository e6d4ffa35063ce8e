"""A thread is opened here, for every front-end and command: the terminal's chat, approve,
deny and undo, and each request of the HTTP service.

`ThreadParts` is what one process opened once and every thread shares: the graph (with its
model, policy and mode inside), the store, the tools and the context keeper. `open_thread`
checks the name, the roots, and makes the one `ThreadSession`. `recover` is what an opened
thread runs before it takes a new request: a paused step this version does not have is
refused, an undo a crash cut off is finished, then a run a crash cut off. A front-end only
shows the events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from core.context.context import ContextKeeper
from core.errors import StartupError
from core.session import ThreadSession
from core.threads import events
from core.threads.thread_names import escaped, name_to_open
from core.threads.threads import INTERRUPTED, Graph, ThreadView, cannot_resume_message
from store.base import Store, UndoRun


@dataclass(frozen=True)
class ThreadParts:
    """What every thread of one process is opened with."""

    app: Graph
    store: Store
    base_url: str
    tools: list[BaseTool] = field(default_factory=list)
    # None: requests are not budgeted (a graph that never calls the model: undo).
    context: ContextKeeper | None = None
    verbose: bool = False


class CannotResume(StartupError):
    """The thread is paused at a step, or on a payload, this version cannot resume."""


class OtherRoots(StartupError):
    """The thread was started with other roots than the ones it is opened with."""


async def open_thread(
    parts: ThreadParts,
    given: str,
    *,
    roots: Sequence[Path],
    started_with: Mapping[str, Any] | None = None,
    other_roots: bool = False,
) -> ThreadSession:
    """The session on the thread `given` names (see core.threads.thread_names), opened with `roots`.
    A bad name is refused before any row exists. A thread started with other roots is
    refused unless `other_roots` says to act in these (a yes binds to where it was shown).
    `started_with` (roots, approval mode, rules file) is recorded once, at the thread's first
    session, by the front-end that holds the thread."""
    name = await name_to_open(parts.store, given)
    await check_roots(parts.store, name, roots, other_roots=other_roots)
    if started_with is not None:
        await parts.store.record_thread_settings(name, dict(started_with))
    return ThreadSession(
        parts.app,
        name,
        parts.store,
        base_url=parts.base_url,
        tools=parts.tools,
        context=parts.context,
        verbose=parts.verbose,
    )


async def check_roots(
    store: Store,
    thread: str,
    roots: Sequence[Path],
    *,
    other_roots: bool = False,
    way_back: str = "act in its roots",
) -> None:
    """A thread's recorded roots (store migration 6) against the ones it is opened with, for
    every way in at once. A thread from before fsagent kept its roots is opened anywhere.
    `way_back` says how the front-end acts in the recorded roots instead."""
    recorded = await store.thread_settings(thread)
    started = [str(root) for root in (recorded or {}).get("roots") or []]
    given = [str(root) for root in roots]
    if not started or started == given or other_roots:
        return
    raise OtherRoots(
        f"thread '{escaped(thread)}' was started with --root {' --root '.join(started)}, "
        f"not --root {' --root '.join(given)}; {way_back}, or pass --other-root to act in "
        "these"
    )


async def recover(session: ThreadSession, view: ThreadView | None) -> AsyncIterator[events.Event]:
    """Bring an opened thread to where it takes a request, as events: an undo a crash cut
    off is finished (no step runs twice), then a run a crash cut off (the ledger keeps a
    write that ran, or may have, from running again). `view` is the thread as it was
    opened; afterwards `session.paused_on` says whether the finished run paused."""
    check_resumable(view)
    run = await session.unfinished_undo()
    if run is not None:
        yield events.Notice(undo_notice(run))
        async for event in session.finish_undo(run):
            yield event
    if view is not None and view.status == INTERRUPTED:
        steps = ", ".join(view.steps)
        yield events.Notice(f"⟳ The last run was cut off at {steps}; finishing it now.")
        async for event in session.finish_cut_off_run():
            yield event


def check_resumable(view: ThreadView | None) -> None:
    """Refuse, loudly, a thread paused where this version cannot resume it: resumed, it
    would return having done nothing (docs/design.md, pitfalls)."""
    if view is not None and view.problem:
        raise CannotResume(cannot_resume_message(view))


def undo_notice(run: UndoRun) -> str:
    return f"⟳ The undo of {run.plan.get('what', 'the last changes')} was cut off; finishing it."
