"""A project's servers at start: each entry of the first root's fsagent.toml the person has not
accepted as written now (a new one, or one changed since) is asked about at a terminal,
showing exactly what would run (core.servers.what_runs), and started only on a yes; from a
pipe it is never started, and one line says how to accept it. docs/other-servers.md, "A
project's servers are accepted once".

The question is a deciding one: keys typed before it is drawn (while fsagent started) are
dropped and counted, as at an approval (terminal.typeahead, through terminal.commands.confirm).
A no is not kept: the entry is asked about again at the next start.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cli.complaints import complain

if TYPE_CHECKING:
    from core.servers.config import ServerSpec

YES = ("y", "yes")


def settle(
    waiting: Sequence[ServerSpec],
    record_file: Path,
    roots: Sequence[Path],
    *,
    accept_all: bool,
) -> list[ServerSpec]:
    """The waiting entries the person accepts now (each yes recorded): all of them with
    --accept-project-servers; at a terminal, those they say yes to; from a pipe, none."""
    from core.servers import acceptance

    record = acceptance.read_record(record_file)
    accepted = []
    for spec in waiting:
        changed = acceptance.was_changed(spec, record)
        if accept_all or (sys.stdin.isatty() and asked(spec, changed, roots)):
            acceptance.accept(spec, record_file)
            complain(
                f"{spec.where()}: accepted; the yes is kept in {record_file} (fsagent "
                f"servers revoke {spec.name} takes it back)"
            )
            accepted.append(spec)
        elif sys.stdin.isatty():
            complain(f"{spec.where()}: not started: not accepted (asked again at the next start)")
        else:
            complain(refusal(spec, changed, record_file))
    return accepted


def refusal(spec: ServerSpec, changed: bool, record_file: Path) -> str:
    """The one line of a project's entry not started from a pipe: why, and how to accept."""
    was = " changed since you accepted it and" if changed else ""
    return (
        f"{spec.where()}:{was} not started: a project's server starts only once you accept "
        f"it (run fsagent at a terminal to be asked, or `fsagent servers accept {spec.name}`, "
        f"or --accept-project-servers; {record_file} keeps the yes)"
    )


def question_lines(spec: ServerSpec, changed: bool, roots: Sequence[Path]) -> list[str]:
    import os

    from core.servers.launch import is_confined
    from core.servers.what_runs import what_runs

    how = "changed since you accepted it" if changed else "new"
    return [
        f"{spec.where()}: a project's MCP server ({how}) would run:",
        *what_runs(spec, roots, os.environ, confined=is_confined(spec)),
    ]


def asked(spec: ServerSpec, changed: bool, roots: Sequence[Path]) -> bool:
    """The person's yes at the terminal, to this entry as written (an empty answer, end of
    input: no)."""
    from core.text import visible
    from terminal.commands import confirm
    from terminal.console import put

    for line in question_lines(spec, changed, roots):
        put(visible(line, keep=""))
    answer = confirm(f"Start {spec.name}, and remember this yes for it as written? [y/N] ")
    return answer.strip().lower() in YES
