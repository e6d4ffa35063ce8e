"""`fsagent regress [DIR]`: recorded cases replayed and their transcripts compared."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cli.settings import Settings


def regress_command(args: argparse.Namespace, settings: Settings) -> int:
    from terminal.regress import packaged_examples, run_cases

    cases = args.cases if args.cases is not None else packaged_examples()
    return run_cases(cases, show=args.show, update=args.update)
