"""The `fsagent` command line's table of contents: the parser's shape (every command, its own
arguments and the shared options it takes) and which module runs each command. What a command
does lives in `cli/`, one module named for it (`fsagent approve`: `cli/approve.py`); the
settings, the options and the launch every front-end shares are `cli/`'s too.

Start-up time is decided here and there. This module and `cli/` import only the standard
library and our light error modules at the top; each command imports what it needs when it
runs, so `fsagent --help` loads nothing heavy, our MCP server starts before the agent's own
heavy imports (the two processes import side by side), and the model client is imported only
when a prompt needs it.
"""

from __future__ import annotations

import sys

# Before anything else is imported (asyncio alone fails on Windows without its own modules):
# the sandbox acts through folder descriptors (`dir_fd`, O_NOFOLLOW), which Windows does not
# have, so another design would be needed there. Exit code 2: cannot start.
if sys.platform == "win32":
    print(
        "fsagent: native Windows is not supported yet (its sandbox acts through folder "
        "descriptors, which Windows does not have); run it in WSL, where it works",
        file=sys.stderr,
    )
    raise SystemExit(2)

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.approvals import approvals_command
from cli.approve import approve_command, deny_command
from cli.audit import audit_command
from cli.chat import chat_command
from cli.complaints import complain
from cli.migrate_db import migrate_db_command
from cli.options import (
    FOREIGN,
    OPTION_DEFAULTS,
    OPTION_GROUPS,
    Hidden,
    Options,
    Parser,
    VersionAction,
    add_approve_option,
    add_db_option,
    add_model_options,
    add_read_only_option,
    add_root_options,
    add_thread_option,
    add_verbose_option,
    usage_error,
)
from cli.regress import regress_command
from cli.serve import serve_command
from cli.settings import DEFAULT_SERVE_HOST, DEFAULT_SERVE_PORT, Settings, settings_from_args
from cli.threads import threads_command
from cli.undo import undo_command
from core.errors import ReplayMismatch, StartupError, ThreadError, first_leaf
from store.errors import StoreError, ThreadBusy, failure_of

# One table, in --help's epilog and in README ("Exit codes").
EXIT_CODES = (
    "exit codes: 0 finished; 1 error during the run; 2 cannot start (a usage error: a bad "
    "flag, command or thread name; the model server unreachable; a bad config, rules file or "
    "database); 3 stopped with an approval pending or an answer refused; 4 replay mismatch; "
    "130 ended by Ctrl-C."
)


COMMAND_NAMES = (
    "threads", "approvals", "approve", "deny", "undo", "audit", "serve", "regress", "migrate-db",
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """`fsagent [options]` talks; `fsagent COMMAND [options]` works on the thread store.

    After its name a command takes only the options it uses (its --help lists those); any
    option may come before the name, as a shared setting each command reads only if it uses
    it (as the FSAGENT_* variables are).
    """
    parser = Parser(
        prog="fsagent",
        commands=COMMAND_NAMES,
        description="A terminal agent for a local LLM that changes files only with your consent.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "-p",
        "--prompt",
        default=argparse.SUPPRESS,
        metavar="PROMPT",
        help="send one prompt, print the run, exit (exit codes as a piped run; approvals are "
        "asked at a terminal, follow --approve in a pipe)",
    )
    for add in OPTION_GROUPS:
        add(parser)
    parser.set_defaults(run=chat_command)
    store_options = (add_db_option, add_verbose_option)
    commands = parser.add_subparsers(
        title="commands", metavar="COMMAND", dest="command", parser_class=Parser
    )

    def command(
        name: str,
        help: str,
        run: Callable[[argparse.Namespace, Settings], int],
        *options: Callable[[Options], None],
    ) -> Any:
        sub = commands.add_parser(name, help=help, description=help, epilog=EXIT_CODES)
        for add in options:
            add(sub)
        # The others are parsed too (so `--transcript x.jsonl` is read as one option and its
        # value), kept out of the command's --help, and refused when given.
        for add in OPTION_GROUPS:
            if add not in options:
                add(Hidden(sub))
        sub.set_defaults(run=run)
        return sub

    regress = command(
        "regress", "replay every recorded case in DIR and compare transcripts", regress_command
    )
    regress.add_argument(
        "cases",
        type=Path,
        metavar="DIR",
        nargs="?",
        help="a case folder, or a folder of them (default: the examples fsagent comes with)",
    )
    regress.add_argument("--show", action="store_true", help="print each run's session as it goes")
    regress.add_argument(
        "--update",
        action="store_true",
        help="write each run's transcript and exit code as the expected ones (after a review)",
    )

    audit = command(
        "audit",
        "print every approval decision (who decided what, and why)",
        audit_command,
        *store_options,
        add_thread_option,
    )
    audit.add_argument("--json", action="store_true", help="print the rows as a JSON array")

    threads = command(
        "threads",
        "list threads; show, rm or reset one (threads show NAME)",
        threads_command,
        *store_options,
    )
    threads.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "show", "rm", "reset"),
        help="list (default) every thread; show NAME prints its conversation; rm NAME deletes "
        "it; reset NAME cancels its pending approval or cut-off run",
    )
    threads.add_argument("name", nargs="?", help="the thread, for show, rm and reset")
    threads.add_argument("-y", "--yes", action="store_true", help="rm without asking")

    command(
        "approvals",
        "list every pending approval in the thread file",
        approvals_command,
        *store_options,
    )

    migrate = command(
        "migrate-db",
        "copy every thread, with its pending approvals, ledger and audit, from one store to "
        "another (a SQLite file to Postgres, or back)",
        migrate_db_command,
        add_verbose_option,
    )
    migrate.add_argument("source", metavar="FROM", help="a SQLite file or a postgresql:// URL")
    migrate.add_argument(
        "target", metavar="TO", help="a SQLite file or a postgresql:// URL (created when new)"
    )

    # approve and deny run the thread on: the model, its tools and the approval mode.
    resuming = (*store_options, add_model_options, add_root_options, add_approve_option)
    approve = command(
        "approve",
        "approve a waiting thread's calls from any shell; the thread runs on",
        approve_command,
        *resuming,
    )
    approve.add_argument("name", help="the waiting thread")
    approve.add_argument(
        "--call",
        action="append",
        dest="calls",
        metavar="ID",
        help="approve only this call (repeatable); every other call of the batch is "
        "rejected, so nothing is left half-decided",
    )
    approve.add_argument(
        "--yes",
        action="store_true",
        help="approve after printing the previews without asking (needed when stdin is not "
        "a terminal)",
    )
    approve.add_argument(
        "--answer",
        metavar="TEXT",
        help="answer the model's question (ask_person) with TEXT; without it, the model is "
        "told no one can answer",
    )

    deny = command(
        "deny",
        "reject a waiting thread's calls from any shell; the model is told why",
        deny_command,
        *resuming,
    )
    deny.add_argument("name", help="the waiting thread")
    deny.add_argument(
        "--call",
        action="append",
        dest="calls",
        metavar="ID",
        help="the call to reject with --reason (repeatable); the batch is one pause, so "
        "every call in it is rejected",
    )
    deny.add_argument("--reason", default="", help="why, told to the model")

    undo = command(
        "undo",
        "take back the last turn's approved changes (or a call's, or a turn's); shows the "
        "diffs and asks first (needs the MCP server, not the model server)",
        undo_command,
        *store_options,
        add_root_options,
    )
    undo.add_argument("name", help="the thread")
    which = undo.add_mutually_exclusive_group()
    which.add_argument("--call", metavar="ID", help="undo only this write call")
    which.add_argument("--turn", type=int, metavar="N", help="undo the writes of the N-th request")
    undo.add_argument(
        "--force",
        action="store_true",
        help="restore files even if they changed since the write (see the diff first)",
    )
    serve = command(
        "serve",
        "serve the agent over HTTP: a chat API, an admin API for approvals (bearer token "
        "from FSAGENT_ADMIN_TOKEN) and an inbox page at /",
        serve_command,
        *resuming,
        add_read_only_option,
    )
    serve.add_argument(
        "--host",
        default=DEFAULT_SERVE_HOST,
        help=f"the address to listen on (default {DEFAULT_SERVE_HOST}); any other than "
        "loopback needs FSAGENT_ADMIN_TOKEN, and then every endpoint takes it",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_SERVE_PORT,
        help=f"the port (default {DEFAULT_SERVE_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="NAME",
        help="another name clients reach the server by, accepted in the Host header "
        "(behind a proxy; repeatable)",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        metavar="ORIGIN",
        help="let pages from ORIGIN (e.g. https://tools.example) call the API; off unless "
        "given (repeatable)",
    )
    return parser


def parse_command_line(argv: list[str] | None) -> argparse.Namespace:
    """The namespace of what was typed, every option then given its default. A usage error
    is one line and SystemExit(2)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command = getattr(args, "command", None)
    where = f"fsagent {command}" if command else "fsagent"
    foreign = [name.removeprefix(FOREIGN) for name in vars(args) if name.startswith(FOREIGN)]
    if foreign:
        usage_error(f"{command} does not take {', '.join(foreign)} (see {where} --help)")
    if extra:
        # After its name a command parses only its own options: the rest land here.
        taken = f"{command} does not take" if command else "unrecognized arguments:"
        usage_error(f"{taken} {' '.join(extra)} (see {where} --help)")
    if command and getattr(args, "prompt", None) is not None:
        usage_error(f"-p sends a prompt to a session, not to {command} (see {where} --help)")
    if command == "threads" and args.action != "list" and not args.name:
        action = args.action
        usage_error(f"threads {action} needs a thread name: fsagent threads {action} NAME")
    for name, value in OPTION_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_command_line(argv)
    try:
        settings = settings_from_args(args)
    except StartupError as refused:
        complain(refused)
        return 2
    if settings.db_note:
        complain(settings.db_note)
    try:
        return int(args.run(args, settings))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as raised:
        error = first_leaf(raised)
        # A thread file that cannot be written (a full disk, a read-only mount), wherever it
        # was met: the store's one line, as at start.
        error = failure_of(error, settings.db) or error
        if isinstance(error, StartupError | StoreError):
            complain(error)
            return 2
        if isinstance(error, ReplayMismatch):
            complain(f"replay mismatch at {error}")
            return 4
        if isinstance(error, ThreadError | ThreadBusy):
            complain(error)
            return 1
        if settings.verbose:
            raise
        from core.error_lines import describe_error

        complain(describe_error(error, settings.base_url))
        return 1


def cli() -> None:
    """The `fsagent` command: `main`, then exit without the interpreter's teardown.

    When `main` returns, the thread store, the transcript and the server are closed already;
    tearing down the hundreds of modules langchain imports costs ~0.4 s on every run (a
    piped regression run pays it each time) and does nothing for the person.
    """
    from terminal.broken_pipe import quiet_on_broken_pipe

    quiet_on_broken_pipe()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Run the importable module's cli, not this __main__ copy, so there is one `agent`
    # module whatever imports it.
    from agent import cli

    cli()
