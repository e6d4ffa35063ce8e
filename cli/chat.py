"""`fsagent` and `fsagent -p`: a session at the terminal (or a pipe) on one thread, its prompt up
early when the thread needs nothing first.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.background_imports import HEAVY_IMPORTED, import_heavy, import_while_waiting
from cli.launch import (
    Agent,
    Launched,
    kernel_sandbox_line,
    launch,
    make_data_folder,
    open_agent,
    started_with,
)
from cli.reader import check_resumable
from cli.roots import LEAVE_ROOT_OUT, InRoots, thread_roots
from cli.screen import open_terminal, open_transcript, root_redactions
from core.errors import StartupError, first_leaf
from store.location import shown

if TYPE_CHECKING:
    from cli.settings import Settings
    from terminal.early_prompt import EarlyPrompt


def chat_command(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(chat(settings))


async def chat(settings: Settings) -> int:
    from terminal.console import screen_kind

    screen = screen_kind(plain=settings.plain)
    with open_transcript(settings.transcript) as transcript:
        early = prompt_early(settings, screen, transcript)
        try:
            return await start_chat(settings, screen, transcript, early)
        except BaseException:
            typed = early.cancel() if early is not None else None
            if typed:
                print(f"fsagent: not sent: {typed!r}", file=sys.stderr)
            raise


# Test-only: the start as it was before the early prompt, for `make bench`'s before row.
TEST_LATE_PROMPT_ENV = "FSAGENT_TEST_LATE_PROMPT"


def prompt_early(settings: Settings, screen: str, transcript: Any) -> EarlyPrompt | None:
    """At a terminal, the banner and `you>` before anything heavy is imported or started
    (terminal.early_prompt), for a thread that needs nothing first; else None."""
    if screen != "tty" or settings.prompt is not None or os.environ.get(TEST_LATE_PROMPT_ENV):
        return None
    from core.approval.policy import load_policy
    from terminal.early_prompt import early_thread, open_early

    roots = tuple(Path(os.path.realpath(root)) for root in settings.roots)
    found = early_thread(settings.db, settings.thread, roots, settings.roots_given)
    if found is None:
        return None
    # Read again by launch(): a bad rules file stops fsagent here, as it would there.
    policy = load_policy(settings.policy or found.policy, list(found.roots))
    term = open_terminal(screen, transcript, root_redactions(found.roots), imported=HEAVY_IMPORTED)
    store = shown(settings.db)
    return open_early(
        term, found, settings.thread, approve_mode=settings.approve, policy=policy, store=store
    )


async def start_chat(
    settings: Settings, screen: str, transcript: Any, early: EarlyPrompt | None
) -> int:
    async with launch(settings) as first:
        if early is not None:
            await asyncio.to_thread(import_heavy)
            early.imported()
        # The agent's heavy imports, while the server process imports the MCP SDK.
        import display  # noqa: F401
        from core.opening import open_thread
        from core.threads.thread_names import name_to_open
        from store import open_store

        make_data_folder(settings.db)
        # A start that fails (LM Studio down) leaves no thread file it began behind.
        async with none_left_if_start_fails(settings.db), open_store(settings.db) as store:
            thread = await name_to_open(store, settings.thread)  # before a row is made
            async with store.hold(thread):
                if not settings.read_only:
                    # Before waiting for LM Studio and the tools: a thread that cannot go on
                    # is the news.
                    await check_resumable(store, thread)
                # A thread works in its own roots: the server started on the given ones is
                # started again on those when they differ.
                roots = await thread_roots(store, thread, settings, way_back=LEAVE_ROOT_OUT)
                async with launched_in(roots.settings, first) as launched:
                    import_while_waiting(screen)
                    async with open_agent(roots.settings, launched, store, in_banner=True) as agent:
                        session = await open_thread(
                            agent.parts,
                            thread,
                            roots=launched.roots,
                            started_with=started_with(roots.settings, launched),
                            other_roots=True,  # decided above, with the person if need be
                        )
                        return await talk(
                            roots, session, agent, launched, screen, transcript, early
                        )


async def talk(
    roots: InRoots,
    session: Any,
    agent: Agent,
    launched: Launched,
    screen: str,
    transcript: Any,
    early: EarlyPrompt | None,
) -> int:
    """The session at the person's terminal, on a thread opened for it."""
    import display

    settings = roots.settings
    if early is not None:
        term = early.term
    else:
        # -p from a pipe reads nothing from it: an approval it pauses at follows --approve,
        # and with `ask` is left paused (exit 3), as at the end of a piped session.
        piped_prompt = settings.prompt is not None and not sys.stdin.isatty()
        stdin = io.StringIO() if piped_prompt else None
        term = open_terminal(screen, transcript, root_redactions(settings.roots), stdin)
    return await display.run_session(
        session,
        term,
        tool_count=len(agent.tools),
        approve_mode=settings.approve,
        policy=agent.policy,
        strict=settings.strict,
        model_line=display.model_line(agent.choice, agent.context, verbose=settings.verbose),
        sandbox_line=kernel_sandbox_line(agent.server.kernel_sandbox, settings.verbose),
        recovery_line=agent.server.recovery,
        instructions=agent.instructions,
        show_reasoning=not settings.hide_reasoning,
        roots=launched.roots,
        roots_note=roots.note,
        prompt=settings.prompt,
        store=shown(settings.db),
        early=early,
    )


@asynccontextmanager
async def launched_in(settings: Settings, first: Launched) -> AsyncIterator[Launched]:
    """`first`, when it was started on these settings' roots and rules; else a launch on
    them (the first server has run nothing: it is stopped at once)."""
    same_roots = [Path(os.path.realpath(root)) for root in settings.roots] == first.roots  # noqa: ASYNC240
    if same_roots and settings.policy == first.settings.policy:
        yield first
        return
    with suppress(ProcessLookupError):
        first.process.kill()
    async with launch(settings) as again:
        yield again


@asynccontextmanager
async def none_left_if_start_fails(location: str) -> AsyncIterator[None]:
    """A SQLite file this start made is removed again when the start fails (a StartupError:
    LM Studio down, no usable model), so nothing is created until a thread is really used."""
    from store.location import is_postgres

    path = None if is_postgres(location) else Path(location)
    new = path is not None and not path.exists()
    try:
        yield
    except BaseException as raised:
        if new and path is not None and isinstance(first_leaf(raised), StartupError):
            from store.sqlite import remove_new_file

            remove_new_file(path)
        raise
