"""What the person sees of a session at the terminal, and its loop: the banner, each run's
events as they stream (terminal.steps), the approvals it pauses for (terminal.review), and the
prompt with its commands (/grants, /revoke N, /compact). The thread itself is driven through
the core's `ThreadSession`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from langgraph.types import StateSnapshot

from core import events
from core.approval import describe_grant
from core.context import ContextKeeper
from core.errors import StartupError
from core.models import ModelChoice
from core.policy import Grant, Policy
from core.session import ThreadSession
from core.summary import Summary
from core.text import format_call
from core.threads import INTERRUPTED, cannot_resume_message, pending_approval
from terminal.console import Terminal
from terminal.review import ANSWER_WORDS, PIPED_ANSWERS, NotAnAnswer, review
from terminal.steps import StepPrinter, TurnInterrupter, show_run

QUIT_WORDS = frozenset({"quit", "exit"})
# At the prompt: the thread's grants; summarising its older turns now.
PERSON_COMMANDS = ("/grants", "/revoke", "/compact")


def banner(snapshot: StateSnapshot | None, tool_count: int, thread: str) -> str:
    head = f"Loaded {tool_count} tools. Thread '{thread}': "
    payload = pending_approval(snapshot)
    if payload:
        calls = ", ".join(format_call(c["name"], c["args"], 60) for c in payload["calls"])
        return head + f"paused: waiting for your approval of {calls}."
    values = snapshot.values if snapshot is not None else None
    messages = (values or {}).get("messages") or []
    if messages:
        return head + f"resuming, {len(messages)} messages."
    return head + "new conversation."


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


def summary_line(snapshot: StateSnapshot | None) -> str | None:
    """A resumed thread whose older turns the model sees as a summary says so."""
    values = (snapshot.values if snapshot is not None else None) or {}
    summary = Summary.from_state(values.get("summary"))
    if summary is None:
        return None
    return (
        f"The model is sent a summary in place of this thread's first {summary.covers} "
        "messages (fsagent threads show has them all)."
    )


def approval_summary(mode: str, policy: Policy | None, grants: list[Grant]) -> list[str]:
    """Whatever decides writes without asking, said up front."""
    lines = []
    if mode == "yes":
        lines.append("--approve yes: every write that no rule denies runs without asking.")
    elif mode == "no":
        lines.append("--approve no: every write is refused; reads still run.")
    if policy is not None and policy.rules:
        lines.append(f"Rules: {len(policy.rules)} from {policy.source}.")
    if grants:
        lines += grant_lines(grants)
    return lines


def grant_lines(grants: list[Grant]) -> list[str]:
    if not grants:
        return ["No grants in this thread."]
    lines = ["Grants in this thread (approved without asking; /revoke N removes one):"]
    return lines + [f"  {n}. {describe_grant(grant)}" for n, grant in enumerate(grants, 1)]


@dataclass
class Conversation:
    """One thread at the terminal: runs shown as they stream, approvals asked about."""

    session: ThreadSession
    term: Terminal
    printer: StepPrinter
    interrupter: TurnInterrupter
    strict: bool = False

    async def show_run(self, run: AsyncIterator[events.Event]) -> bool:
        return await show_run(self.session, run, self.printer, self.interrupter)

    async def settle_approvals(self, payload: dict[str, Any] | None) -> bool:
        """Ask about the pending approval, and any the resumed run pauses at next; False if
        the thread is left paused. The payload comes from the run that paused, or from the
        state of a thread just opened: loading the state again would cost a whole-history
        read."""
        while payload:
            try:
                decisions = await review(self.term, payload, self.session.preview)
            except NotAnAnswer as refused:
                line = (
                    f"not an answer at the approval: {refused} (answer {PIPED_ANSWERS}); "
                    "nothing was run, the thread stays paused"
                )
                print(f"fsagent: {line}", file=sys.stderr, flush=True)
                self.term.event("error", text=line)
                return False
            if decisions is None:
                self.term.say("Left paused: nothing was run. Open this thread again to answer.")
                return False
            if not await self.show_run(self.session.resume(decisions)):
                return True
            payload = self.session.paused_on
        return True

    async def person_command(self, line: str) -> None:
        """`/grants` lists the thread's grants; `/revoke N` removes one; `/compact`
        summarises the older turns now."""
        word, _, argument = line.strip().partition(" ")
        if word == "/compact":
            await self.show_run(self.session.compact())
            return
        if word == "/grants":
            for text in grant_lines(await self.session.grants()):
                self.term.say(text)
            return
        number = argument.strip()
        gone = await self.session.revoke(int(number)) if number.isdigit() else None
        if gone is None:
            self.term.say(f"no grant {number!r}; /grants lists them")
            return
        self.term.say(f"Revoked: {gone}. It will be asked about again.")

    async def turn(self, prompt: str) -> bool:
        self.term.event("prompt", text=prompt)
        if not await self.show_run(self.session.turn(prompt)):
            return True
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
    show_reasoning: bool = True,
) -> int:
    """The read-eval loop. Returns the exit code (see agent.EXIT_CODES)."""
    view = await session.view()
    if view is not None and view.problem:
        raise StartupError(cannot_resume_message(view))
    snapshot = view.snapshot if view is not None else None
    term.say(banner(snapshot, tool_count, session.thread))
    for extra in (model_line, summary_line(snapshot)):
        if extra:
            term.say(extra)
    grants = list(((snapshot.values if snapshot else None) or {}).get("grants") or [])
    for line in approval_summary(approve_mode, policy, grants):
        term.say(line)
    term.say("Type a prompt, or 'quit'.")
    printer = StepPrinter(term, show_reasoning=show_reasoning)
    with TurnInterrupter(asyncio.get_running_loop()) as interrupter:
        conversation = Conversation(session, term, printer, interrupter, strict=strict)
        if view is not None and view.status == INTERRUPTED:
            # A crash mid-run: finish it, so nothing approved is lost; the ledger keeps
            # every write that already ran (or may have) from running again.
            term.say(f"⟳ The last run was cut off at {', '.join(view.steps)}; finishing it now.")
            await conversation.show_run(session.finish_cut_off_run())
            pending = session.paused_on
        else:
            pending = pending_approval(snapshot)
        if not await conversation.settle_approvals(pending):
            return 3
        return await prompt_loop(conversation, term.ask)


# A bare answer typed at the prompt almost always belongs to an approval that did not come
# (the model skipped the call): sending it to the model could make it act on its own.
def looks_like_an_answer(line: str) -> bool:
    word, colon, _ = line.strip().lower().partition(":")
    return word.strip() in ANSWER_WORDS and (not colon or word.strip() in ("n", "no", "e"))


async def prompt_loop(conversation: Conversation, ask: Callable[[str], str | None]) -> int:
    term = conversation.term
    while True:
        try:
            line = ask("you> ")
        except KeyboardInterrupt:
            term.say()
            return 130
        if line is None or line.strip().lower() in QUIT_WORDS:
            return 1 if conversation.printer.errors else 0
        if not line.strip():
            continue
        if line.split()[0] in PERSON_COMMANDS:
            await conversation.person_command(line)
            continue
        if looks_like_an_answer(line):
            warning = f"not sent to the model: {line.strip()!r} looks like an approval answer, "
            warning += "but nothing is waiting for approval"
            term.say(f"⚠ {warning}")
            term.event("warning", text=warning)
            if conversation.strict:
                return 3
            continue
        if not await conversation.turn(line.strip()):
            return 3
