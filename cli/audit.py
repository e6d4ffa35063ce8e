"""`fsagent audit`: every approval decision, read from the store directly."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from store.location import shown

if TYPE_CHECKING:
    from cli.settings import Settings


def audit_command(args: argparse.Namespace, settings: Settings) -> int:
    """Reads the store directly: needs neither LM Studio nor the MCP server."""
    from store import missing
    from terminal import reading

    # As `threads` and `approvals`: nothing stored yet is nothing to list (exit 0), and
    # reading never creates the store.
    absent = missing(settings.db)
    if absent is not None:
        if args.json:
            print("[]")
            return 0
        where = f"thread '{args.thread}'" if args.thread else shown(settings.db)
        print(f"No decisions recorded in {where} ({absent.note}).")
        return 0

    light = reading.audit(str(settings.db), args.thread, args.json)  # None: a Postgres store
    if light is not None:
        return light

    async def audit() -> int:
        from store import open_store
        from terminal import commands

        async with open_store(settings.db) as store:
            return await commands.print_audit(store, args.thread, args.json)

    return asyncio.run(audit())
