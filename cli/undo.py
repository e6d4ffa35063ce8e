"""`fsagent undo`: approved writes taken back through our MCP server (no model needed)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from cli.launch import open_server_tools
from cli.reader import held_reader, require_store
from cli.roots import thread_roots

if TYPE_CHECKING:
    from cli.settings import Settings


def undo_command(args: argparse.Namespace, settings: Settings) -> int:
    require_store(settings.db, args.name)
    return asyncio.run(undo(args, settings))


async def undo(args: argparse.Namespace, settings: Settings) -> int:
    """Take writes back through our MCP server (LM Studio is not needed), on the thread's
    store: the same ledger and audit as any write."""
    from core.opening import ThreadParts, open_thread
    from terminal import commands

    async with held_reader(settings, args.name) as (store, reader, name):
        args.name = name
        settings = (await thread_roots(store, name, settings)).settings
        await commands.undoable_view(reader, name)
        async with open_server_tools(settings) as (roots, tools):
            parts = ThreadParts(reader, store, settings.base_url, tools, None, settings.verbose)
            session = await open_thread(parts, name, roots=roots, other_roots=True)
            return await commands.undo(session, args.call, args.turn, args.force)
