"""A run at the person's terminal: its events on screen and in the transcript (the route, each
tool call and its result, decisions made without asking, the model's text as it streams,
errors), and Ctrl-C, which cuts it off."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

from core import events
from core.session import ThreadSession
from core.text import format_call, format_result
from terminal.console import Terminal


class StepPrinter:
    """Shows one thread's events; counts the errors, which make the exit code 1."""

    def __init__(self, term: Terminal) -> None:
        self.term = term
        self.errors = 0

    def show(self, event: events.Event) -> None:
        term = self.term
        match event:
            case events.TextDelta(text):
                term.stream(text)
            case events.Route(route):
                term.say(f"⇢ route: {route}")
                term.event("route", route=route)
            case events.Answer(text):
                # Model text was streamed already; our own messages (the step limit) were not.
                if not term.streaming:
                    term.say(f"agent> {text}")
                term.end_stream()
                term.event("answer", text=text)
            case events.ToolCall(_, tool, args, error) if error:
                term.say(f"→ {tool}(…) ✗ {error}")
                term.event("tool_call", tool=tool, args=None, error=error)
            case events.ToolCall(_, tool, args):
                term.say(f"→ {format_call(tool, args)}")
                term.event("tool_call", tool=tool, args=args)
            case events.ToolResult(_, tool, text, failed):
                term.say(f"← {'✗ ' if failed else ''}{format_result(text)}")
                term.event("tool_result", tool=tool, status="error" if failed else "ok", text=text)
            case events.Decision():
                self.show_decision(event)
            case events.Failed(text, fatal):
                if not fatal:
                    self.errors += 1
                    term.say(f"error: {text}")
                term.event("error", text=text)
            case events.Paused():
                term.end_stream()
            case events.Undone(text, complete):
                done = "undone" if complete else "not all undone"
                term.say(f"{'↶' if complete else '✗'} {done}; the model is told: {text}")
                term.event("undo", text=text)
                if not complete:
                    self.errors += 1

    def show_decision(self, decision: events.Decision) -> None:
        """A decision a rule, the mode or a grant made: shown, so nothing passes unseen."""
        mark = "✓" if decision.approved else "✗"
        self.term.say(f"{mark} {decision.tool}: {decision.reason}")
        self.term.event(
            "decision",
            tool=decision.tool,
            decision=decision.decision,
            reason=decision.reason,
            by=decision.by,
        )


class TurnInterrupter:
    """Ctrl-C cancels the running turn; at a prompt it ends the session.

    asyncio's own SIGINT handling only cancels the main task, which cannot interrupt a
    blocking `input()`; this handler decides by what is running now.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.turn: asyncio.Task[Any] | None = None
        self.previous: Any = None

    def __enter__(self) -> TurnInterrupter:
        self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.turn is not None and not self.turn.done():
            self.loop.call_soon_threadsafe(self.turn.cancel)
            return
        raise KeyboardInterrupt


async def show_run(
    session: ThreadSession,
    run: AsyncIterator[events.Event],
    printer: StepPrinter,
    interrupter: TurnInterrupter,
) -> bool:
    """Show a run until it ends or pauses; False if it was cut off or failed. Ctrl-C
    cancels it: what finished is kept and the thread takes a new prompt."""
    task = asyncio.ensure_future(_show(run, printer))
    interrupter.turn = task
    try:
        return await task
    except asyncio.CancelledError:
        for result in await session.close_cut_off_run("the run was cut off (Ctrl-C)"):
            printer.show(result)
        printer.term.say("⨯ interrupted: what finished is kept; the thread takes a new prompt.")
        return False
    finally:
        interrupter.turn = None


async def _show(run: AsyncIterator[events.Event], printer: StepPrinter) -> bool:
    ok = True
    async for event in run:
        printer.show(event)
        ok = ok and not isinstance(event, events.Failed)
    return ok
