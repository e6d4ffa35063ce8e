"""A run at the person's terminal: its events on screen and in the transcript (the route, each
tool call and its result, decisions made without asking, the model's text and reasoning as
they stream, a reply cut at the limit, a compaction, errors), what it is doing now (a TTY's
status line), and Ctrl-C, which cuts it off."""

from __future__ import annotations

from collections.abc import AsyncIterator

from core.session import ThreadSession
from core.text import counted, format_call, format_result
from core.threads import events
from core.tools.tool_groups import WRITE_TOOLS
from terminal.console import Terminal
from terminal.interrupts import Interrupted


class StepPrinter:
    """Shows one thread's events; counts the errors, which make the exit code 1."""

    def __init__(self, term: Terminal, *, show_reasoning: bool = True) -> None:
        self.term = term
        self.errors = 0
        self.show_reasoning = show_reasoning
        self.streamed = False  # model text of the current reply was shown as it came
        self.text_calls = 0  # calls the model wrote as text, read as calls, in this run

    def show(self, event: events.Event) -> None:
        term = self.term
        match event:
            case events.TextDelta(text):
                term.stream(text)
                self.streamed = True
            case events.Unsure(text):
                term.stream_unsure(text)
            case events.Settled():
                term.take_back_unsure()
            case events.Reasoning(text):
                # Never in the transcript: it is neither the answer nor something that ran.
                if self.show_reasoning:
                    term.stream_reasoning(text)
            case events.Route(route):
                self.streamed = False  # a new turn: nothing of its reply shown yet
                term.say(f"⇢ route: {route}")
                term.event("route", route=route)
                term.activity("thinking")
            case events.Answer(text):
                # Model text was streamed already; our own messages (the step limit) were not.
                if not self.streamed:
                    term.answer(text)
                term.end_stream()
                self.streamed = False
                term.event("answer", text=text)
            case events.ToolCall(_, tool, args, error) if error:
                term.say(f"→ {tool}(…) ✗ {error}")
                term.event("tool_call", tool=tool, args=None, error=error)
            case events.ToolCall(_, tool, args, _, from_text) if from_text:
                # The model wrote this call as text: say so, and how often it happened.
                self.text_calls += 1
                term.say(f"→ {format_call(tool, args)}  (read from the model's text: {from_text})")
                term.event(
                    "tool_call",
                    tool=tool,
                    args=args,
                    from_text=from_text,
                    text_calls=self.text_calls,
                )
                term.activity(f"{'checking' if tool in WRITE_TOOLS else 'running'} {tool}")
            case events.ToolCall(_, tool, args):
                term.say(f"→ {format_call(tool, args)}")
                term.event("tool_call", tool=tool, args=args)
                # A write runs only once approved: until a decision, it is being checked.
                term.activity(f"{'checking' if tool in WRITE_TOOLS else 'running'} {tool}")
            case events.ToolResult(_, tool, text, failed):
                term.say(f"← {'✗ ' if failed else ''}{format_result(text)}")
                term.event("tool_result", tool=tool, status="error" if failed else "ok", text=text)
                term.activity("thinking")
            case events.Decision():
                self.show_decision(event)
            case events.ReplyCut(limit):
                where = f"the {limit}-token reply limit" if limit else "the reply limit"
                term.say(
                    f"⚠ the reply was cut off at {where} (--max-tokens); any call in it was not run"
                )
                term.event("cut", limit=limit)
            case events.Compacted():
                self.show_compacted(event)
            case events.Notice(text):
                term.say(text)
            case events.Failed(text, fatal):
                self.streamed = False
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
        if decision.approved:
            self.term.activity(f"running {decision.tool}")

    def show_compacted(self, event: events.Compacted) -> None:
        term = self.term
        if not event.summarised:
            term.say("Nothing to compact: a summary would not be shorter than the older messages.")
            return
        of = f" of {event.context_length:,}" if event.context_length else ""
        term.say(
            f"⇣ compacted: {counted(event.summarised, 'older message')} summarised by the model "
            f"(the summary now stands for {event.covered}); request ~{event.tokens_before:,} "
            f"→ ~{event.tokens_after:,} tokens{of}. The thread keeps every message "
            "(fsagent threads show)."
        )
        term.event("compacted", summarised=event.summarised, covered=event.covered, why=event.why)


async def show_run(
    session: ThreadSession,
    run: AsyncIterator[events.Event],
    printer: StepPrinter,
    activity: str = "thinking",
) -> bool:
    """Show a run until it ends or pauses; False if it was cut off or failed. Ctrl-C
    cancels it: what finished is kept and the thread takes a new prompt. A second Ctrl-C
    while that is recorded cannot cut the recording off; it quits once it is done
    (`term.ctrl_c.quit`)."""
    term = printer.term
    try:
        with term.working(activity):
            return await term.ctrl_c.cancellable(_show(run, printer))
    except Interrupted:
        with term.ctrl_c.shield():
            for result in await session.close_cut_off_run("the run was cut off (Ctrl-C)"):
                printer.show(result)
        term.say("⨯ interrupted: what finished is kept; the thread takes a new prompt.")
        return False


async def _show(run: AsyncIterator[events.Event], printer: StepPrinter) -> bool:
    ok = True
    async for event in run:
        printer.show(event)
        ok = ok and not isinstance(event, events.Failed)
    return ok
