"""`fsagent migrate-db FROM TO`: every thread copied from one store to another."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from core.errors import StartupError
from store.location import normalise, same_location, shown

if TYPE_CHECKING:
    from cli.settings import Settings


def migrate_db_command(args: argparse.Namespace, settings: Settings) -> int:
    """Copy every thread of FROM into TO; FROM is only read (and each thread held while it
    is copied)."""
    from store import missing

    source, target = normalise(args.source), normalise(args.target)
    if same_location(source, target):
        raise StartupError(f"migrate-db: FROM and TO are the same store ({shown(source)})")
    absent = missing(source)
    if absent is not None:
        raise StartupError(f"migrate-db: {absent.sentence}; pass the store to copy from")

    async def migrate() -> int:
        from store import open_store
        from store.copy import copy_store

        async with open_store(source) as old, open_store(target) as new:
            copied = await copy_store(old, new)
            threads = len(copied.threads)
            print(f"Copied {threads} thread{'s' * (threads != 1)} from {old.location} to "
                  f"{new.location}:")  # fmt: skip
            for name, checkpoints in copied.threads.items():
                print(f"  {name}: {checkpoints} checkpoints")
            print(f"  {copied.ledger_rows} ledger rows, {copied.audit_rows} audit rows")
        return 0

    return asyncio.run(migrate())
