"""`fsagent approvals`: every pending approval in the store."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from cli.reader import in_reader

if TYPE_CHECKING:
    from cli.settings import Settings


def approvals_command(args: argparse.Namespace, settings: Settings) -> int:
    from store import missing
    from terminal import reading

    if missing(settings.db) is not None:
        print("No pending approvals.")
        return 0
    light = reading.approvals(str(settings.db))  # None: read it through the graph
    if light is not None:
        return light
    from terminal import commands

    return asyncio.run(in_reader(settings, commands.list_approvals))
