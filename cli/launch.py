"""The launch every front-end and command that runs the agent shares: our MCP server started on
checked roots and rules while the model server is asked about its model (`launch`), then the
tools, the context keeper and the graph on the store (`open_agent`); or the server's tools alone
(`open_server_tools`, for undo).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.complaints import complain
from cli.model import LoadedModel, load_model
from cli.roots import check_roots
from cli.servers import other_tools
from core.errors import StartupError
from store.errors import StoreError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from cli.settings import Settings
    from core.approval.policy import Policy
    from core.context.context import ContextKeeper
    from core.context.instructions import Instructions
    from core.context.models import ModelChoice
    from core.opening import ThreadParts
    from core.threads.threads import Graph
    from core.tools.tools import KernelSandbox, ToolServer
    from store.base import Store


@dataclass
class Launched:
    """What starts before anything heavy is imported: checked roots and rules, our MCP
    server's process, and the question to LM Studio about its models."""

    roots: list[Path]
    policy: Policy
    process: asyncio.subprocess.Process
    model_ready: asyncio.Future[LoadedModel]
    settings: Settings  # what it was launched on


@asynccontextmanager
async def launch(settings: Settings) -> AsyncIterator[Launched]:
    from core.approval.policy import load_policy
    from core.tools.server_process import start_server, stop_server

    roots = check_roots(settings.roots)
    # Rules are read once, before anything starts: a bad file stops fsagent here.
    policy = load_policy(settings.policy, roots)
    process = await start_server(
        roots,
        read_only=settings.read_only,
        verbose=settings.verbose,
        protect=protected_files(settings, roots),
    )
    # Ask LM Studio for its models while our server starts: both are waits, neither needs
    # the other.
    model_ready = asyncio.ensure_future(load_model(settings))
    try:
        yield Launched(roots, policy, process, model_ready, settings)
    except (StartupError, StoreError):
        # A start that failed (LM Studio down, a thread file that cannot be used): the server
        # has run nothing, so it is not waited for while it is still importing.
        with suppress(ProcessLookupError):
            process.kill()
        raise
    finally:
        model_ready.cancel()
        if model_ready.done() and not model_ready.cancelled():
            model_ready.exception()  # seen: an error raised first says what went wrong
        await stop_server(process)


@dataclass
class Agent:
    app: Graph
    tools: list[BaseTool]
    policy: Policy
    server: ToolServer
    choice: ModelChoice
    context: ContextKeeper
    parts: ThreadParts  # what core.opening opens each thread of this agent with
    instructions: Instructions  # the project's AGENTS.md, as every request sends it


@asynccontextmanager
async def open_agent(
    settings: Settings, launched: Launched, store: Store, *, in_banner: bool = False
) -> AsyncIterator[Agent]:
    """Everything a run needs: the model, our MCP server's tools, and the graph on the store,
    whose write calls go through its ledger. Whether the kernel holds the server is said
    once, on stderr (or in the chat's banner: `in_banner`)."""
    from core.approval.questions import with_ask_person
    from core.context.constrained import CallMode
    from core.context.context import ContextKeeper
    from core.context.counts import ServerCounter
    from core.context.instructions import Instructions, read_instructions, with_instructions
    from core.context.prompts import SYSTEM_PROMPT
    from core.opening import ThreadParts
    from core.tools.tool_groups import ALLOWED_TOOLS
    from core.tools.tool_schemas import offered_tools
    from core.tools.tools import open_tool_server

    # LM Studio's answer before the server's handshake: a refusal takes a fraction of a
    # second, the server's start-up seconds.
    loaded = await launched.model_ready
    require = settings.require_kernel_sandbox
    async with (
        open_tool_server(launched.process, require_kernel_sandbox=require) as server,
        other_tools(settings, launched.roots) as others,
    ):
        if not in_banner:
            say_kernel_sandbox(server.kernel_sandbox, settings.verbose, server.recovery)
        # Ours, then the person's other servers' (docs/other-servers.md).
        loaded_tools = [*server.tools, *others]
        # The model may always ask the person, but not in the read-only agent.
        tools = loaded_tools if settings.read_only else with_ask_person(loaded_tools)
        # The same tools in every request of the thread (core.context.context says why).
        read_names = ALLOWED_TOOLS | {tool.name for tool in others}
        offered = offered_tools(tools, read_names if settings.read_only else None)
        # The person's AGENTS.md, read once: the same bytes after the system prompt in every
        # request (core.context.instructions).
        context_length = loaded.budget.context_length if loaded.budget else None
        instructions = (
            read_instructions(launched.roots[0], context_length)
            if settings.instructions
            else Instructions()
        )
        context = ContextKeeper(
            loaded.chat_model,
            offered,
            budget=loaded.budget,
            system_prompt=with_instructions(SYSTEM_PROMPT, instructions),
            max_tokens=loaded.max_tokens,
            text_calls=settings.text_calls,
            calls=CallMode(settings.constrain_calls, no_tools=loaded.choice.no_tools),
            counter=ServerCounter(settings.base_url, loaded.choice.server),
        )
        if settings.read_only:
            from core.read_only import build_read_only_agent

            app = build_read_only_agent(context, tools, store.checkpointer)
        else:
            from agent_graph import build_graph

            app = build_graph(
                loaded.chat_model, tools, store.checkpointer, policy=launched.policy,
                mode=settings.approve, store=store, context=context,
            )  # fmt: skip
        parts = ThreadParts(app, store, settings.base_url, tools, context, settings.verbose)
        try:
            yield Agent(
                app, tools, launched.policy, server, loaded.choice, context, parts, instructions
            )
        finally:
            if context.counter is not None:
                await context.counter.close()


def kernel_sandbox_line(sandbox: KernelSandbox, verbose: bool) -> str | None:
    """What a session says of the kernel sandbox at start: that there is none, always; that
    it holds, with --verbose."""
    return sandbox.line if verbose or not sandbox.holds else None


def say_kernel_sandbox(sandbox: KernelSandbox, verbose: bool, recovery: str | None) -> None:
    """Outside the banner (`fsagent serve`, the commands): on stderr, with what the server's
    recovery put right at its start (core.tools.recovery)."""
    for line in (kernel_sandbox_line(sandbox, verbose), recovery):
        if line is not None:
            complain(line)


def protected_files(settings: Settings, roots: list[Path]) -> list[Path]:
    """What the server must never let a write, move or delete change, whatever was
    approved: the rules file in force and the one the first root would have (an agent that
    could write either could loosen its own rules), and a SQLite thread store with the
    files SQLite keeps beside it (an agent that could write those could rewrite its own
    approvals). The server judges which of them lie in a root."""
    from core.approval.policy import POLICY_FILE
    from store.location import is_postgres

    files = [roots[0] / POLICY_FILE]
    if settings.policy is not None:
        files.append(Path(os.path.abspath(settings.policy)))
    if not is_postgres(settings.db):
        stores = {Path(os.path.abspath(settings.db)), Path(os.path.realpath(settings.db))}
        files += [store.with_name(store.name + end) for store in sorted(stores) for end in DB_ENDS]
    return files


# A SQLite file's own name and the ones SQLite keeps beside it (WAL, shared memory, journal).
DB_ENDS = ("", "-wal", "-shm", "-journal")


@asynccontextmanager
async def open_server_tools(
    settings: Settings,
) -> AsyncIterator[tuple[list[Path], list[BaseTool]]]:
    """Our MCP server's tools alone, without a model, and the roots it serves."""
    from core.tools.server_process import start_server, stop_server
    from core.tools.tools import open_tool_server

    roots = check_roots(settings.roots)
    protect = protected_files(settings, roots)
    process = await start_server(roots, verbose=settings.verbose, protect=protect)
    require = settings.require_kernel_sandbox
    try:
        async with open_tool_server(process, require_kernel_sandbox=require) as server:
            say_kernel_sandbox(server.kernel_sandbox, settings.verbose, server.recovery)
            yield roots, server.tools
    finally:
        await stop_server(process)


def started_with(settings: Settings, launched: Launched) -> dict[str, Any]:
    """What a thread records at its first session (store migration 6)."""
    return {
        "roots": [str(root) for root in launched.roots],
        "approve": settings.approve,
        "policy": str(settings.policy.resolve()) if settings.policy else None,
    }


def make_data_folder(location: str) -> None:
    """The data folder (store.location.data_location) is made when a session first keeps a
    thread there; a --db of the person's own names a folder that must exist."""
    from store.location import data_location

    data = data_location(os.environ)
    if Path(location) == data:
        data.parent.mkdir(parents=True, exist_ok=True)
