"""`fsagent threads [list|show|rm|reset]`: read through the light reader where it can, through the
graph where it cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from cli.reader import in_reader, require_store
from store.location import shown

if TYPE_CHECKING:
    from cli.settings import Settings
    from core.threads.threads import Graph
    from store.base import Store


def threads_command(args: argparse.Namespace, settings: Settings) -> int:
    # Listing and showing read the store directly (terminal.reading), and through the graph
    # only where that reader cannot (it returns None then).
    from terminal import reading

    if args.action == "list":
        from store import missing

        absent = missing(settings.db)  # reading must not create the store
        if absent is not None:
            print(f"No threads in {shown(settings.db)} ({absent.note}).")
            return 0
        light = reading.threads(str(settings.db))
        if light is not None:
            return light
        from terminal import commands

        return asyncio.run(in_reader(settings, commands.list_threads))
    if not args.name:
        print(f"fsagent: threads {args.action} needs a thread name", file=sys.stderr)
        return 1
    require_store(settings.db, args.name)
    if args.action == "show":
        light = reading.show(str(settings.db), args.name)
        if light is not None:
            return light
    from terminal import commands

    async def act(store: Store, app: Graph) -> int:
        from core.threads.thread_names import existing_name

        name = await existing_name(store, args.name)  # before a hold, which registers it
        if args.action == "show":
            return await commands.show_thread(app, name)
        async with store.hold(name):
            if args.action == "rm":
                return await commands.remove_thread(store, app, name, ask=not args.yes)
            return await commands.reset_thread(store, app, name)

    return asyncio.run(in_reader(settings, act))
