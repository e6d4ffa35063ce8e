"""What the person sees of a session at the terminal, and its loop: the banner, each run's
events as they stream (terminal.steps), the approvals it pauses for (terminal.review), the
`/` commands (terminal.slash), and the prompt. The thread itself is driven through the
core's `ThreadSession`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from langgraph.types import StateSnapshot

from core.approval.decisions import AnswerValue, ResumeValue, resume_json
from core.approval.policy import Grant, Policy
from core.approval.questions import QUESTION_KIND, Pause
from core.changes.binding import BindingError
from core.context.budget import estimate_text
from core.context.context import ContextKeeper
from core.context.instructions import Instructions
from core.context.models import ModelChoice
from core.opening import check_resumable, recover
from core.session import ThreadSession
from core.text import clip
from core.threads import events
from core.threads.thread_names import escaped
from core.threads.threads import IDLE, INTERRUPTED, pending_approval
from terminal.banner import HINT, mode_lines, recap, status_line, summary_note, thread_line
from terminal.console import Terminal, put
from terminal.interrupts import Interrupted
from terminal.question import QUESTION_ANSWERS, answer_questions
from terminal.review import ANSWER_WORDS, PIPED_ANSWERS, NotAnAnswer, review
from terminal.slash import QUIT, CommandContext, command_word, grant_lines, run_command
from terminal.steps import StepPrinter, show_run
from terminal.undo import undo_command  # noqa: F401  (imported, it registers /undo)

if TYPE_CHECKING:  # a pipe never imports prompt_toolkit (terminal.tty)
    from terminal.early_prompt import EarlyPrompt

QUIT_WORDS = frozenset({"quit", "exit"})
# A prompt this big, to a model of unknown context, is warned about once (~32k tokens).
BIG_PROMPT_TOKENS = 32_000
CTRL_C = 130  # the exit code of a session Ctrl-C ended, as a shell reports it
PAUSED = 3  # stopped with an approval pending or an answer refused


def banner(snapshot: StateSnapshot | None, tool_count: int, thread: str) -> str:
    values = snapshot.values if snapshot is not None else None
    messages = (values or {}).get("messages") or []
    return thread_line(thread, pending_approval(snapshot), len(messages), tool_count)


def model_line(choice: ModelChoice, context: ContextKeeper, *, verbose: bool = False) -> str:
    """`model X, context 4096`, and what of it the reply and the fixed part take; --verbose
    also says where the context length came from."""
    budget = context.budget
    if budget is None:
        head = (
            f"model {choice.name}, context unknown (the server does not say; "
            "pass --context-length N to budget requests)"
        )
    else:
        head = f"model {choice.name}, context {budget.context_length}"
        if verbose:
            head += f" (from {choice.context_source})"
    return (
        f"{head}; replies up to {context.max_tokens} tokens, "
        f"tools and instructions ~{context.fixed_tokens}"
    )


def recap_line(snapshot: StateSnapshot | None) -> str | None:
    values = (snapshot.values if snapshot is not None else None) or {}
    return recap(list(values.get("messages") or []), paused=bool(pending_approval(snapshot)))


def summary_line(snapshot: StateSnapshot | None) -> str | None:
    values = (snapshot.values if snapshot is not None else None) or {}
    return summary_note(values.get("summary"))


def approval_summary(mode: str, policy: Policy | None, grants: list[Grant]) -> list[str]:
    """Whatever decides writes without asking, said up front."""
    return mode_lines(mode, policy) + (grant_lines(grants) if grants else [])


def left_paused(thread: str, question: bool) -> str:
    """What a session that ends at an approval or a question says: how to answer it."""
    name = escaped(thread)
    answer = f"fsagent approve {name} --answer TEXT" if question else f"fsagent approve {name}"
    return (
        f"Left paused: nothing was run. Answer it with `{answer}` (or `fsagent deny {name}`), "
        "or open the thread again."
    )


@dataclass
class Conversation:
    """One thread at the terminal: runs shown as they stream, approvals asked about.

    Its steps return None to go on, or the exit code the session ends with."""

    session: ThreadSession
    term: Terminal
    printer: StepPrinter
    strict: bool = False
    warned_big: bool = False  # warn_unknown_context said it once

    @property
    def first_activity(self) -> str:
        """What a new request does first: the router's choice, unless the agent has none."""
        return "routing" if "router" in self.session.app.nodes else "thinking"

    async def show_run(self, run: AsyncIterator[events.Event], activity: str) -> int | None:
        """None when the run ended or paused; PAUSED when it was cut off or failed, or
        CTRL_C when a second Ctrl-C asked to quit while the cut-off run was closed."""
        if await show_run(self.session, run, self.printer, activity):
            return None
        return CTRL_C if self.term.ctrl_c.quit else PAUSED

    async def settle_approvals(self, payload: Pause | None) -> int | None:
        """Ask about the pending approval, and any the resumed run pauses at next. The
        payload comes from the run that paused, or from the state of a thread just opened:
        loading the state again would cost a whole-history read."""
        while payload:
            question = payload["kind"] == QUESTION_KIND
            asking: Awaitable[AnswerValue | ResumeValue | None] = (
                answer_questions(self.term, payload)
                if payload["kind"] == QUESTION_KIND  # checked again: this narrows the payload
                else review(self.term, payload, self.session.preview)
            )
            try:
                decisions = await self.term.ctrl_c.cancellable(asking)
            except Interrupted:
                # Ctrl-C at a question, or while a preview was worked out.
                self.term.say(f"⨯ {left_paused(self.session.thread, question)}")
                return CTRL_C
            except NotAnAnswer as refused:
                where = "the question" if question else "the approval"
                expected = QUESTION_ANSWERS if question else PIPED_ANSWERS
                line = (
                    f"not an answer at {where}: {refused} (answer {expected}); "
                    "nothing was run, the thread stays paused"
                )
                put(f"fsagent: {line}", file=sys.stderr)
                self.term.event("error", text=line)
                return PAUSED
            if decisions is None:
                self.term.say(left_paused(self.session.thread, question))
                return PAUSED
            try:
                bound = await self.session.bind(resume_json(decisions))
            except BindingError as stale:
                # What was shown is not what is there now: shown again, asked again.
                self.term.say(f"⚠ {stale}")
                continue
            called = ", ".join(sorted({call["name"] for call in payload["calls"]}))
            run = self.session.resume(bound)
            stopped = await self.show_run(run, f"running {called}")
            if stopped is not None:
                # A resumed run that was cut off or failed has closed its calls: the thread
                # takes new prompts.
                return CTRL_C if stopped == CTRL_C else None
            payload = self.session.paused_on
        return None

    def warn_unknown_context(self, prompt: str) -> None:
        """Once a session: a big prompt sent to a model whose context no one said may be
        cut by the server (Ollama cuts silently) or refused after a long wait."""
        context = self.session.context
        if self.warned_big or context is None or context.budget is not None:
            return
        tokens = estimate_text(prompt)
        if tokens > BIG_PROMPT_TOKENS:
            self.warned_big = True
            warning = (
                f"this prompt is ~{tokens:,} tokens and the model's context is unknown; "
                "the server may cut or refuse it (pass --context-length N to have it checked)"
            )
            self.term.say(f"⚠ {warning}")
            self.term.event("warning", text=warning)

    async def turn(self, prompt: str) -> int | None:
        self.warn_unknown_context(prompt)
        self.term.event("prompt", text=prompt)
        stopped = await self.show_run(self.session.turn(prompt), self.first_activity)
        if stopped is not None:
            return CTRL_C if stopped == CTRL_C else None
        return await self.settle_approvals(self.session.paused_on)


async def run_session(
    session: ThreadSession,
    term: Terminal,
    *,
    tool_count: int,
    approve_mode: str,
    policy: Policy | None,
    strict: bool,
    model_line: str | None = None,
    roots: Sequence[Path | str] = (),
    roots_note: str = "",
    show_reasoning: bool = True,
    sandbox_line: str | None = None,
    recovery_line: str | None = None,
    prompt: str | None = None,
    store: str = "",
    early: EarlyPrompt | None = None,
    instructions: Instructions | None = None,
) -> int:
    """The read-eval loop. Returns the exit code (see agent.EXIT_CODES). With `early`, the
    banner was said and the first line is being read already (terminal.early_prompt): what
    was not known then (the tools, the model, the kernel sandbox) is said now."""
    # The session at a glance: the model and its context, where the agent may read and write
    # (and, when there is none or with --verbose, whether the kernel holds it there), who
    # decides writes, and what the server's recovery put right at its start (its paths).
    told = instructions.banner_line() if instructions is not None else None
    status = (
        model_line,
        told,
        status_line(roots, approve_mode, roots_note, store),
        sandbox_line,
        recovery_line,
    )
    lines = [line for line in status if line]
    if early is not None:
        loaded = f"Loaded {tool_count} tools." + (f" {model_line}" if model_line else "")
        lines = [line for line in (loaded, told, sandbox_line, recovery_line) if line]
    session.hold_until_known = not term.watched
    with term.ctrl_c.installed():
        try:
            return await _run_session(
                session,
                term,
                tool_count=tool_count,
                approve_mode=approve_mode,
                policy=policy,
                strict=strict,
                status=lines,
                show_reasoning=show_reasoning,
                prompt=prompt,
                early=early,
                instructions=instructions,
            )
        except asyncio.CancelledError:
            # Ctrl-C while nothing could be cut off on its own (the banner being read, a
            # /command): the session ends, as it would at the prompt.
            if not term.ctrl_c.main_cancelled:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            term.say()
            return CTRL_C


async def _run_session(
    session: ThreadSession,
    term: Terminal,
    *,
    tool_count: int,
    approve_mode: str,
    policy: Policy | None,
    strict: bool,
    status: list[str],
    show_reasoning: bool,
    prompt: str | None,
    early: EarlyPrompt | None = None,
    instructions: Instructions | None = None,
) -> int:
    view = await session.view()
    check_resumable(view)  # before the banner: a thread that cannot go on is the news
    snapshot = view.snapshot if view is not None else None
    if early is not None and (
        (view is not None and view.status != IDLE) or await session.unfinished_undo()
    ):
        # Something to finish or answer first (another fsagent paused the thread since the
        # light reader looked, or an undo was cut off): that comes before any prompt.
        typed = early.cancel()
        if typed:
            term.say(f"⚠ not sent: {clip(typed, 60)!r}; this thread is waiting, say it again after")
        early = None
    if early is not None:
        for line in status:  # the banner was said before the start (terminal.early_prompt)
            term.say(line)
    else:
        # A thread waiting for approval says so first: its calls are what matters now.
        term.say(banner(snapshot, tool_count, escaped(session.thread)))
        for extra in (recap_line(snapshot), *status, summary_line(snapshot)):
            if extra:
                term.say(extra)
        grants = list(((snapshot.values if snapshot else None) or {}).get("grants") or [])
        for line in approval_summary(approve_mode, policy, grants):
            term.say(line)
        if not term.piped and prompt is None:  # a hint for a person at the keyboard only
            term.say(HINT)
    printer = StepPrinter(term, show_reasoning=show_reasoning)
    conversation = Conversation(session, term, printer, strict=strict)
    # An undo or a run a crash cut off is finished before anything else (core.opening).
    # After an early prompt there is neither (checked above), and no status line may be
    # drawn over the prompt being read.
    if early is None:
        stopped = await conversation.show_run(recover(session, view), "finishing")
        if stopped == CTRL_C:
            return CTRL_C
    cut_off = view is not None and view.status == INTERRUPTED
    pending = session.paused_on if cut_off else pending_approval(snapshot)
    stopped = await conversation.settle_approvals(pending)
    if stopped is not None:
        return stopped
    if prompt is not None:  # -p: this one turn, then the session ends as a piped one would
        stopped = await conversation.turn(prompt)
        if stopped is not None:
            return stopped
        return 1 if printer.errors else 0
    return await prompt_loop(conversation, early, instructions)


# A bare answer typed at the prompt almost always belongs to an approval that did not come
# (the model skipped the call): sending it to the model could make it act on its own.
def looks_like_an_answer(line: str) -> bool:
    word, colon, _ = line.strip().lower().partition(":")
    return word.strip() in ANSWER_WORDS and (not colon or word.strip() in ("n", "no", "e"))


async def prompt_loop(
    conversation: Conversation,
    early: EarlyPrompt | None = None,
    instructions: Instructions | None = None,
) -> int:
    term = conversation.term
    commands = CommandContext(conversation.session, term, conversation.printer, instructions)
    while True:
        try:
            line = await (early.first() if early is not None else term.prompt("you> "))
            early = None
        except Interrupted:
            return CTRL_C
        if line is None or line.strip().lower() in QUIT_WORDS:
            return 1 if conversation.printer.errors else 0
        if not line.strip():
            continue
        if command_word(line):
            outcome = await run_command(commands, line)
            if outcome == QUIT:
                return 1 if conversation.printer.errors else 0
            if isinstance(outcome, int):
                return outcome  # the command ends the session (a piped non-answer: 3)
            continue
        if looks_like_an_answer(line):
            warning = f"not sent to the model: {line.strip()!r} looks like an approval answer, "
            warning += "but nothing is waiting for approval"
            term.say(f"⚠ {warning}")
            term.event("warning", text=warning)
            if conversation.strict:
                return PAUSED
            continue
        stopped = await conversation.turn(line.strip())
        if stopped is not None:
            return stopped
