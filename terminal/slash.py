"""The `/` commands at the `you>` prompt: one registry of name, one line of help and handler,
which `/help`, the prompt's completion and the prompt loop all read.

A command is added where it is written, with `@command`:

    @command("/compact", "summarise older turns so the thread fits the context")
    async def compact(context: CommandContext, argument: str) -> Outcome: ...

A line is a command when its first word is `/name` (letters, digits, `-`, `_`): a path such
as `/etc/hosts is wrong` is a prompt, and goes to the model.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from core.approval.approval import describe_grant
from core.approval.policy import Grant
from core.context.budget import MESSAGE_OVERHEAD, estimate_messages, estimate_text
from core.context.instructions import Instructions
from core.context.prompts import SYSTEM_PROMPT
from core.context.summary import Summary
from core.session import ThreadSession
from core.text import counted
from terminal.console import Terminal
from terminal.steps import StepPrinter, show_run

QUIT: Literal["quit"] = "quit"
# None: back to the prompt; QUIT: the session ends as `quit` ends it; a number: the session
# ends with that exit code.
Outcome = Literal["quit"] | int | None


@dataclass
class CommandContext:
    """What a command may use: the thread, the terminal, and how a run's events are shown."""

    session: ThreadSession
    term: Terminal
    printer: StepPrinter
    instructions: Instructions | None = None  # the project's AGENTS.md, as sent


Handler = Callable[[CommandContext, str], Awaitable[Outcome]]


@dataclass(frozen=True)
class SlashCommand:
    name: str  # "/revoke"
    help: str  # one line
    run: Handler
    usage: str = ""  # what follows the name: "N"


COMMANDS: dict[str, SlashCommand] = {}
_COMMAND_WORD = re.compile(r"/[A-Za-z][\w-]*")


def command(name: str, help: str, usage: str = "") -> Callable[[Handler], Handler]:
    def register(run: Handler) -> Handler:
        COMMANDS[name] = SlashCommand(name, help, run, usage)
        return run

    return register


def command_word(line: str) -> str | None:
    """`/name` if the line is a command (known or not), else None."""
    words = line.split(maxsplit=1)
    if words and _COMMAND_WORD.fullmatch(words[0]):
        return words[0]
    return None


def help_lines() -> list[str]:
    width = max(len(f"{c.name} {c.usage}".strip()) for c in COMMANDS.values())
    lines = []
    for found in sorted(COMMANDS.values(), key=lambda c: c.name):
        lines.append(f"  {f'{found.name} {found.usage}'.strip():<{width}}  {found.help}")
    return lines


async def run_command(context: CommandContext, line: str) -> Outcome:
    """Run the command the line names; an unknown one is said so, and nothing is sent to
    the model."""
    word = command_word(line) or ""
    found = COMMANDS.get(word)
    if found is None:
        warning = f"unknown command {word}; /help lists the commands (nothing was sent)"
        context.term.say(f"⚠ {warning}")
        context.term.event("warning", text=warning)
        return None
    return await found.run(context, line.strip()[len(word) :].strip())


# -- the commands ---------------------------------------------------------------------------------


@command("/help", "list these commands")
async def show_help(context: CommandContext, argument: str) -> Outcome:
    context.term.say("Commands (anything else is sent to the model):")
    for line in help_lines():
        context.term.say(line)
    return None


@command("/quit", "end the session (so do `quit`, `exit` and Ctrl-D); the thread is kept")
async def quit_session(context: CommandContext, argument: str) -> Outcome:
    return QUIT


@command("/grants", "list this thread's grants: writes approved without asking")
async def show_grants(context: CommandContext, argument: str) -> Outcome:
    for text in grant_lines(await context.session.grants()):
        context.term.say(text)
    return None


@command("/revoke", "remove grant N (from /grants); its writes are asked about again", "N")
async def revoke_grant(context: CommandContext, argument: str) -> Outcome:
    gone = await context.session.revoke(int(argument)) if argument.isdigit() else None
    if gone is None:
        context.term.say(f"no grant {argument!r}; /grants lists them")
        return None
    context.term.say(f"Revoked: {gone}. It will be asked about again.")
    return None


@command("/compact", "summarise the older turns now, so the thread fits the model's context")
async def compact(context: CommandContext, argument: str) -> Outcome:
    await show_run(context.session, context.session.compact(), context.printer, "compacting")
    return None


@command(
    "/context", "what the model's context holds: the fixed part, instructions, summary, history"
)
async def show_context(context: CommandContext, argument: str) -> Outcome:
    for line in await context_lines(context.session, context.instructions):
        context.term.say(line)
    return None


async def context_lines(session: ThreadSession, instructions: Instructions | None) -> list[str]:
    """The next request's parts, estimated as the context code estimates them (the fixed
    part as the server counted it, once it has), and the instructions' text, escaped: it is
    the person's file, not ours."""
    keeper = session.context
    if keeper is None:
        return ["This session keeps no model context."]
    snapshot = await session.app.aget_state(session.config)
    values = snapshot.values or {}
    messages = list(values.get("messages") or [])
    summary = Summary.from_state(values.get("summary"))
    sent = instructions.tokens if instructions is not None else 0
    prompt = MESSAGE_OVERHEAD + estimate_text(SYSTEM_PROMPT)
    budget = keeper.budget
    limit = (
        f"the context {budget.context_length} tokens, a request at most {budget.prompt_limit} "
        f"(replies up to {keeper.max_tokens})"
        if budget is not None
        else "the context unknown (the server does not say; --context-length N budgets it)"
    )
    history = [m for _, m in keeper.visible(messages, summary, result_cap=keeper.result_cap())]
    lines = [
        f"Context ({limit}):",
        f"  fixed part ~{keeper.fixed_tokens} tokens: tools ~{keeper.tool_tokens} "
        f"({counted(len(keeper.tools), 'tool')}), system prompt ~{prompt}, instructions ~{sent}",
        f"  summary: ~{estimate_text(summary.text)} tokens, in place of the first "
        f"{counted(summary.covers, 'message')}"
        if summary is not None
        else "  summary: none",
        f"  history: {counted(len(history), 'message')}, ~{estimate_messages(history)} tokens",
    ]
    if instructions is None or not instructions.files:
        return [
            *lines,
            "  instructions: none (no AGENTS.md from the root up to the repository's top)",
        ]
    lines.append(f"  {instructions.banner_line()}; as sent:")
    # The person's file, as sent: the terminal's `say` writes each line through
    # core.text.visible, so an escape code in it is shown written out, never run.
    return lines + ["    " + line for line in instructions.block.split("\n")]


def grant_lines(grants: list[Grant]) -> list[str]:
    if not grants:
        return ["No grants in this thread."]
    lines = ["Grants in this thread (approved without asking; /revoke N removes one):"]
    return lines + [f"  {n}. {describe_grant(grant)}" for n, grant in enumerate(grants, 1)]
