"""The `fsagent` command line: its flags and commands, the typed settings they make, and the
one place that wires the store, our MCP server's tools, the model and the graph together.

Start-up time is decided here. This module imports only the standard library and our light
error modules at the top; each command imports what it needs when it runs, so `fsagent
--help` loads nothing heavy, our MCP server starts before the agent's own heavy imports (the
two processes import side by side), and the model client is imported only when a prompt
needs it.
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
import asyncio
import dataclasses
import functools
import importlib
import io
import os
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol

from core.errors import ReplayMismatch, StartupError, ThreadError, first_leaf
from store.errors import StoreError, ThreadBusy, failure_of
from store.location import normalise, same_location, shown

if TYPE_CHECKING:
    from fastapi import FastAPI
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from core.approval.decisions import AnswerValue, ResumeValue
    from core.approval.policy import Policy
    from core.context.budget import Budget
    from core.context.context import ContextKeeper
    from core.context.models import ModelChoice
    from core.opening import ThreadParts
    from core.threads.threads import Graph
    from core.tools.tools import KernelSandbox, ToolServer
    from store.base import Store
    from terminal.early_prompt import EarlyPrompt
    from web.auth import Access

DEFAULT_BASE_URL = "http://localhost:1234/v1"
DEFAULT_SERVE_HOST = "127.0.0.1"
DEFAULT_SERVE_PORT = 8765
ApproveMode = Literal["ask", "yes", "no"]
APPROVE_MODES: tuple[ApproveMode, ...] = ("ask", "yes", "no")
# As core.context.constrained has them; here so --help imports nothing of the model's.
ConstrainMode = Literal["auto", "on", "off"]
CONSTRAIN_MODES: tuple[ConstrainMode, ...] = ("auto", "on", "off")

# One table, in --help's epilog and in README ("Exit codes").
EXIT_CODES = (
    "exit codes: 0 finished; 1 error during the run; 2 cannot start (a usage error: a bad "
    "flag, command or thread name; the model server unreachable; a bad config, rules file or "
    "database); 3 stopped with an approval pending or an answer refused; 4 replay mismatch; "
    "130 ended by Ctrl-C."
)


@dataclass(frozen=True)
class Settings:
    """What the flags and FSAGENT_* variables say, checked and typed."""

    base_url: str = DEFAULT_BASE_URL
    model: str | None = None  # None: the loaded chat model (core.context.models.discover)
    roots: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd(),))
    roots_given: bool = False  # --root was given; else a thread acts in its own roots
    other_root: bool = False  # act in --root although the thread was started in others
    db: str = field(default_factory=lambda: str(Path.cwd() / "threads.db"))  # path or URL
    db_note: str = ""  # said once on stderr: a ./threads.db found here, and how to move it
    thread: str = "default"
    verbose: bool = False
    read_only: bool = False
    require_kernel_sandbox: bool = False  # refuse a server the kernel does not hold (Landlock)
    strict: bool = False
    transcript: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    approve: ApproveMode = "ask"  # who decides writes no rule decides
    policy: Path | None = None  # None: fsagent.toml in the first root, if any
    plain: bool = False  # plain text in and out on a terminal too: no escape code at all

    context_length: int | None = None  # None: what the server says
    context_flag: str = "--context-length"  # how the person gave it, for messages
    max_tokens: int | None = None  # None: fits the budget (core.context.budget.default_max_tokens)
    hide_reasoning: bool = False
    text_calls: bool = True  # read tool calls a model wrote as text (core.context.text_calls)
    constrain_calls: ConstrainMode = "auto"  # calls fit a JSON schema (core.context.constrained)
    prompt: str | None = None  # -p: one turn, printed, then exit


@dataclass(frozen=True)
class ServeSettings:
    """`fsagent serve`'s own flags, and FSAGENT_ADMIN_TOKEN."""

    host: str = DEFAULT_SERVE_HOST
    port: int = DEFAULT_SERVE_PORT
    admin_token: str | None = None  # None: the admin API is off (403)
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()


# --- the parser --------------------------------------------------------------------------------

# Each option's value when it is not given. Every option is parsed with SUPPRESS defaults, so
# what a namespace holds is what the person typed; the config file and FSAGENT_* variables fill
# in the None ones (settings_from_args), these the rest.
OPTION_DEFAULTS: dict[str, Any] = {
    "base_url": None, "model": None, "root": None, "other_root": False, "db": None,
    "thread": None, "read_only": False, "require_kernel_sandbox": False, "approve": None,
    "policy": None, "verbose": False, "plain": False, "strict": False, "transcript": None,
    "context_length": None, "max_tokens": None, "hide_reasoning": False,
    "no_text_calls": False, "record": None, "replay": None, "prompt": None,
    "constrain_calls": None,
}  # fmt: skip


class Parser(argparse.ArgumentParser):
    """argparse, with every usage error in one line (what, and where to look) and exit 2,
    never the usage block; a mistyped command gets the nearest one, a prompt typed without
    -p is told about -p."""

    def error(self, message: str) -> NoReturn:
        refused = UNKNOWN_COMMAND.match(message)
        if refused and self.prog == "fsagent":
            usage_error(unknown_command(refused["value"], list(COMMAND_NAMES)))
        command = self.prog.removeprefix("fsagent").strip()
        usage_error(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")


def usage_error(line: str) -> NoReturn:
    """A usage error: its one line on stderr, exit 2."""
    print(f"fsagent: {line}", file=sys.stderr)
    raise SystemExit(2)


# argparse's wording for a word that is no command (Python 3.11 to 3.13).
UNKNOWN_COMMAND = re.compile(r"argument COMMAND: invalid choice: (?P<value>'.*?'|\".*?\")")
COMMAND_NAMES = (
    "threads", "approvals", "approve", "deny", "undo", "audit", "serve", "regress", "migrate-db",
)  # fmt: skip


def unknown_command(quoted: str, commands: list[str]) -> str:
    import ast
    import difflib
    import shlex

    word = str(ast.literal_eval(quoted))  # argparse shows it as repr() does
    close = difflib.get_close_matches(word, commands, n=1)
    if close and " " not in word.strip():
        return f"unknown command '{word}'; did you mean '{close[0]}'?"
    return f"unknown command '{word}'; to send it as a prompt: fsagent -p {shlex.quote(word)}"


def build_parser() -> argparse.ArgumentParser:
    """`fsagent [options]` talks; `fsagent COMMAND [options]` works on the thread store.

    After its name a command takes only the options it uses (its --help lists those); any
    option may come before the name, as a shared setting each command reads only if it uses
    it (as the FSAGENT_* variables are).
    """
    parser = Parser(
        prog="fsagent",
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


SUPPRESS = argparse.SUPPRESS


class VersionAction(argparse.Action):
    """--version, read only when asked: importlib.metadata alone costs --help ~0.1 s."""

    def __init__(self, option_strings: list[str], dest: str = SUPPRESS, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=SUPPRESS, help="print fsagent's version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"fsagent {package_version()}")
        parser.exit()


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's); a checkout run without
    installing it reads pyproject.toml itself."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fsagent")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


class Options(Protocol):
    """Where options are added: a parser, or `Hidden`."""

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action: ...

    def add_mutually_exclusive_group(self, *, required: bool = False) -> Any: ...


FOREIGN = "foreign:"  # the dest prefix of an option given after a command that does not take it


@dataclass
class Hidden:
    """Options a command parses but does not take: out of its --help, and stored apart
    (FOREIGN), so that one given after the command's name is refused (parse_command_line)
    while the same option given before the name, for every command, is not."""

    target: Any  # a parser, or a group of one

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        flag = max(names, key=len)
        dest = FOREIGN + flag
        action: argparse.Action = self.target.add_argument(
            *names, **{**kwargs, "help": SUPPRESS, "dest": dest}
        )
        return action

    def add_mutually_exclusive_group(self, *, required: bool = False) -> Hidden:
        # No group: options refused anyway need none, and a group of hidden options alone
        # trips argparse's usage formatter (an AssertionError in Python 3.11).
        return self


def add_verbose_option(parser: Options) -> None:
    parser.add_argument(
        "--verbose", action="store_true", default=SUPPRESS, help="show tracebacks and server logs"
    )


def add_db_option(parser: Options) -> None:
    parser.add_argument(
        "--db",
        default=SUPPRESS,
        metavar="PATH|URL",
        help="where threads are kept: a SQLite file, or a postgresql:// URL shared by any "
        "number of fsagent processes (env FSAGENT_DB, or DATABASE_URL when it is a "
        "postgresql:// URL; then the config file's db; then ./threads.db if there is one; "
        "default $XDG_DATA_HOME/fsagent/threads.db, ~/.local/share/fsagent/threads.db)",
    )


def add_model_options(parser: Options) -> None:
    parser.add_argument(
        "--base-url",
        default=SUPPRESS,
        help="the model server's OpenAI-compatible URL: LM Studio, llama.cpp or Ollama (env "
        f"FSAGENT_BASE_URL, or the config file's base_url; default {DEFAULT_BASE_URL}; "
        "http:// is assumed without a scheme, /v1 without a path)",
    )
    parser.add_argument(
        "--model",
        default=SUPPRESS,
        help="model name (env FSAGENT_MODEL, or the config file's model; default: the chat "
        "model the server has loaded)",
    )
    parser.add_argument(
        "--context-length",
        type=positive_int,
        default=SUPPRESS,
        metavar="N",
        help="the model's context in tokens, for a server that does not say (env "
        "FSAGENT_CONTEXT_LENGTH; when both speak the smaller wins)",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=SUPPRESS,
        metavar="N",
        help="the longest reply, in tokens (or the config file's max_tokens; default: an "
        "eighth of the context, at most 1024; 1024 when the context is unknown)",
    )
    parser.add_argument(
        "--no-text-calls",
        action="store_true",
        default=SUPPRESS,
        help="do not read tool calls a model writes as text (<tool_call> tags, bare or "
        "fenced JSON) as calls; show them as its answer",
    )
    parser.add_argument(
        "--constrain-calls",
        choices=CONSTRAIN_MODES,
        default=SUPPRESS,
        help="make each step's output fit a JSON schema of the tools offered (or an answer), "
        "so a small model's calls are valid: on, off, or auto (default: on when the server "
        "says the model has no tool support, or once it has written calls as text or "
        "malformed them twice in a thread); env FSAGENT_CONSTRAIN_CALLS",
    )


def add_root_options(parser: Options) -> None:
    parser.add_argument(
        "--root",
        action="append",
        type=root_path,
        default=SUPPRESS,
        metavar="DIR",
        help="a folder the agent may use (repeatable; default: the thread's own roots, or "
        "the current folder for a new thread)",
    )
    parser.add_argument(
        "--other-root",
        action="store_true",
        default=SUPPRESS,
        help="act in the --root given although the thread was started with other roots "
        "(without it: asked at a terminal, refused from a pipe)",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        default=SUPPRESS,
        metavar="FILE",
        help="approval rules (TOML, [[rule]] tables; default: fsagent.toml in the first root)",
    )
    parser.add_argument(
        "--require-kernel-sandbox",
        action="store_true",
        default=SUPPRESS,
        help="refuse to start unless the kernel holds the MCP server to the roots (Landlock, "
        "Linux 5.13+); without it the server's own checks alone do",
    )


def add_approve_option(parser: Options) -> None:
    parser.add_argument(
        "--approve",
        choices=APPROVE_MODES,
        default=SUPPRESS,
        help="who decides writes that no rule decides: ask you (default), yes to all, "
        "or no to all (read-only sessions, CI); a deny rule holds in every mode (or the "
        "config file's approve)",
    )


def add_read_only_option(parser: Options) -> None:
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=SUPPRESS,
        help="offer the model no write tool at all (the server registers none)",
    )


def add_thread_option(parser: Options) -> None:
    # None when not given, not "default", so audit can tell "no --thread" (every thread).
    parser.add_argument(
        "--thread",
        default=SUPPRESS,
        help="the conversation's name (a session's default: default; audit's: every thread)",
    )


def add_terminal_options(parser: Options) -> None:
    """What only a session at the terminal uses."""
    parser.add_argument(
        "--plain",
        action="store_true",
        default=SUPPRESS,
        help="plain text on a terminal too: no colour, status line, Markdown or line "
        "editing (as with TERM=dumb, and whenever the output is not a terminal; NO_COLOR=1 "
        "takes only the colour away)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        default=SUPPRESS,
        help="stop (exit 3) when a piped prompt line looks like an answer to an approval",
    )
    parser.add_argument(
        "--transcript",
        type=Path,
        default=SUPPRESS,
        metavar="FILE",
        help="write one JSON event per line: what a regression run compares",
    )
    parser.add_argument(
        "--hide-reasoning",
        action="store_true",
        default=SUPPRESS,
        help="do not show a reasoning model's thinking (it is never sent back to it)",
    )
    replay = parser.add_mutually_exclusive_group()
    replay.add_argument(
        "--record",
        type=Path,
        default=SUPPRESS,
        metavar="FILE",
        help="save every model request's essentials and the model's response (a cassette)",
    )
    replay.add_argument(
        "--replay",
        type=Path,
        default=SUPPRESS,
        metavar="FILE",
        help="answer from a cassette instead of the model server; exit 4 when the run "
        "drifts from it",
    )


# Every option any command takes, in --help's order; the top level (a session) takes them all.
OPTION_GROUPS: tuple[Callable[[Options], None], ...] = (
    add_db_option, add_verbose_option, add_model_options, add_root_options,
    add_approve_option, add_thread_option, add_read_only_option, add_terminal_options,
)  # fmt: skip


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


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens above 0")
    return value


def context_from_env(environ: Mapping[str, str]) -> int | None:
    text = environ.get("FSAGENT_CONTEXT_LENGTH", "").strip()
    if not text:
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as error:
        raise StartupError(f"FSAGENT_CONTEXT_LENGTH: {error}") from None


def constrain_mode(value: str) -> ConstrainMode:
    """--constrain-calls, or FSAGENT_CONSTRAIN_CALLS, which argparse does not check."""
    for mode in CONSTRAIN_MODES:
        if value.strip().lower() == mode:
            return mode
    raise StartupError(
        f"FSAGENT_CONSTRAIN_CALLS: {value!r} is not auto, on or off; set one of them or unset it"
    )


def settings_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Settings:
    """The settings: each from its flag, else its FSAGENT_* variable, else the config file
    (core.user_config), else the default."""
    from core.user_config import load_config
    from store.location import choose_location

    environ = os.environ if environ is None else environ
    config = load_config(environ)
    config_name = str(config.path)
    context_length, context_flag = args.context_length, "--context-length"
    if context_length is None:
        context_length, context_flag = context_from_env(environ), "FSAGENT_CONTEXT_LENGTH"
    base_url, base_from = args.base_url, "--base-url"
    if base_url is None and environ.get("FSAGENT_BASE_URL"):
        base_url, base_from = environ["FSAGENT_BASE_URL"], "FSAGENT_BASE_URL"
    if base_url is None and config.get("base_url"):
        base_url, base_from = config.get("base_url"), f"{config_name}: base_url"
    db = choose_location(args.db, environ, config.get("db"), f"{config_name}: db")
    return Settings(
        base_url=api_base_url(base_url or DEFAULT_BASE_URL, base_from),
        model=args.model or environ.get("FSAGENT_MODEL") or config.get("model"),
        roots=tuple(Path(root).expanduser() for root in (args.root or [Path.cwd()])),
        roots_given=bool(args.root),
        other_root=args.other_root,
        db=normalise(db.location),
        db_note=db.note,
        thread=args.thread or "default",
        verbose=args.verbose,
        read_only=args.read_only,
        require_kernel_sandbox=args.require_kernel_sandbox,
        strict=args.strict,
        transcript=args.transcript,
        record=args.record,
        replay=args.replay,
        approve=args.approve or config.get("approve") or "ask",
        policy=Path(args.policy).expanduser() if args.policy else None,
        plain=args.plain,
        context_length=context_length,
        context_flag=context_flag,
        max_tokens=args.max_tokens or config.get("max_tokens"),
        hide_reasoning=args.hide_reasoning,
        text_calls=not args.no_text_calls,
        constrain_calls=constrain_mode(
            args.constrain_calls or environ.get("FSAGENT_CONSTRAIN_CALLS") or "auto"
        ),
        prompt=args.prompt,
    )


def api_base_url(given: str, where: str = "--base-url") -> str:
    """The OpenAI-compatible base a server answers at. Without a scheme
    (`localhost:5599`), http:// is meant: these servers serve plain http on the loopback. A
    bare host and port (`http://localhost:11434`, as Ollama's docs give it) gets `/v1`, where
    LM Studio, llama.cpp and Ollama all serve chat completions. What is no http(s) URL of a
    host is refused, named."""
    from urllib.parse import urlsplit

    url = given.strip()
    if "://" not in url:
        url = f"http://{url}"
    url = url.rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise StartupError(
            f"{where} {given!r}: not a model server's URL; pass one like {DEFAULT_BASE_URL}"
        )
    if not parts.path:
        return f"{url}/v1"
    return url


# --- running -----------------------------------------------------------------------------------


def complain(error: object) -> None:
    """The one line an error gets on stderr. It may quote a thread name, a path or a
    server's words: made visible (core.text), so it cannot write to the screen itself."""
    from core.text import visible

    print(f"fsagent: {visible(str(error))}", file=sys.stderr)


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


# --- talking to the agent ----------------------------------------------------------------------


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


# Set once import_heavy is done: the prompt's completion of `/` commands waits for it.
HEAVY_IMPORTED = threading.Event()


def import_heavy() -> None:
    """What a chat imports after its prompt is up: on a thread, so that the prompt's own loop
    still echoes what the person types (imports hold the interpreter's lock, but it passes
    between threads every few milliseconds)."""
    import agent_graph  # noqa: F401
    import core.context.chat_model  # noqa: F401
    import core.opening  # noqa: F401
    import core.tools.tools  # noqa: F401
    import display  # noqa: F401
    import store.sqlite  # noqa: F401

    HEAVY_IMPORTED.set()


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


def make_data_folder(location: str) -> None:
    """The data folder (store.location.data_location) is made when a session first keeps a
    thread there; a --db of the person's own names a folder that must exist."""
    from store.location import data_location

    data = data_location(os.environ)
    if Path(location) == data:
        data.parent.mkdir(parents=True, exist_ok=True)


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


def open_terminal(
    screen: str,
    transcript: Any,
    redactions: list[tuple[str, str]],
    stdin: Any = None,
    imported: threading.Event | None = None,
) -> Any:
    """The person's terminal: a TTY's with line editing, a status line and Markdown, or the
    plain one (a pipe, --plain, TERM=dumb) that writes no escape code unless it colours a
    diff on a terminal. NO_COLOR takes the colour away from either, and nothing else."""
    if screen == "tty":
        from terminal.tty import TtyTerminal

        commands = SlashHelp(imported)
        return TtyTerminal(transcript=transcript, redactions=redactions, commands=commands)
    from terminal.console import Terminal, colour_wanted

    color = screen == "color" and colour_wanted()
    if stdin is not None:
        return Terminal(
            stdin=stdin, piped=True, transcript=transcript, redactions=redactions, color=color
        )
    return Terminal(transcript=transcript, redactions=redactions, color=color)


class SlashHelp(Mapping[str, str]):
    """`/name` -> its help, for completion at the prompt. The commands' modules import most
    of the agent: before an early prompt's imports are done (`ready` unset) there is nothing
    to complete yet, rather than an import that would hold the prompt's loop (and the model
    server's question, whose timeouts run on it) until the other thread's imports end."""

    def __init__(self, ready: threading.Event | None = None) -> None:
        self.ready = ready

    def _commands(self) -> Mapping[str, Any]:
        if self.ready is not None and not self.ready.is_set():
            return {}
        import terminal.undo  # noqa: F401  (imported, it registers /undo)
        from terminal.slash import COMMANDS

        return COMMANDS

    def __getitem__(self, name: str) -> str:
        return str(self._commands()[name].help)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._commands()))

    def __len__(self) -> int:
        return len(self._commands())


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
class LoadedModel:
    """The model chosen, with its context and reply budget, and a function that builds its
    client (at the first prompt)."""

    choice: ModelChoice
    budget: Budget | None  # None: the context length is unknown
    max_tokens: int
    chat_model: Callable[[], BaseChatModel]


@dataclass
class Agent:
    app: Graph
    tools: list[BaseTool]
    policy: Policy
    server: ToolServer
    choice: ModelChoice
    context: ContextKeeper
    parts: ThreadParts  # what core.opening opens each thread of this agent with


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
    from core.opening import ThreadParts
    from core.tools.tool_groups import ALLOWED_TOOLS
    from core.tools.tool_schemas import offered_tools
    from core.tools.tools import open_tool_server

    # LM Studio's answer before the server's handshake: a refusal takes a fraction of a
    # second, the server's start-up seconds.
    loaded = await launched.model_ready
    require = settings.require_kernel_sandbox
    async with open_tool_server(launched.process, require_kernel_sandbox=require) as server:
        if not in_banner:
            say_kernel_sandbox(server.kernel_sandbox, settings.verbose, server.recovery)
        # The model may always ask the person, but not in the read-only agent.
        tools = server.tools if settings.read_only else with_ask_person(server.tools)
        # The same tools in every request of the thread (core.context.context says why).
        offered = offered_tools(tools, ALLOWED_TOOLS if settings.read_only else None)
        context = ContextKeeper(
            loaded.chat_model,
            offered,
            budget=loaded.budget,
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
            yield Agent(app, tools, launched.policy, server, loaded.choice, context, parts)
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


def root_path(text: str) -> Path:
    """--root's value: an empty one would be the current folder by accident (Path("") is
    "."), so it is refused; say `--root .` for that."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty path; pass the folder the agent may use (--root . for this one)"
        )
    return Path(text)


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


def check_roots(roots: tuple[Path, ...]) -> list[Path]:
    """Resolve roots up front so a typo is a clear start-up error, not a server crash."""
    resolved = []
    for root in roots:
        if not root.is_dir():
            raise StartupError(
                f"--root {root}: {not_a_folder(root)}; pass an existing folder the agent may use"
            )
        resolved.append(root.resolve())
    return resolved


def not_a_folder(path: Path) -> str:
    """What is at `path`, which is not a folder, in a few words."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a broken symlink" if path.is_symlink() else "no such folder"
    except OSError as error:
        return f"cannot be reached ({error.strerror})"
    kinds = [
        (stat.S_ISREG, "a file, not a folder"),
        (stat.S_ISFIFO, "a named pipe, not a folder"),
        (stat.S_ISSOCK, "a socket, not a folder"),
        (stat.S_ISCHR, "a device, not a folder"),
        (stat.S_ISBLK, "a device, not a folder"),
    ]
    return next((kind for test, kind in kinds if test(mode)), "not a folder")


async def load_model(settings: Settings) -> LoadedModel:
    """The model the server has loaded, its context, and its client as a function that
    builds it at the first prompt.

    The server is asked now which model it serves and with how much context (core.context.models);
    the client itself (langchain_openai imports all of the openai SDK) is imported at the
    first prompt, or on a terminal in the background while the person types. Under --replay
    the model is a cassette's and touches no network.
    """
    if settings.replay:
        from core.context.cassette import ReplayChatModel, load_cassette
        from core.context.models import ModelChoice

        header, steps = load_cassette(settings.replay)
        replay = ReplayChatModel(steps=steps, model_name=str(header.get("model", "replay")))
        recorded = header.get("context_length")
        context = settings.context_length or (recorded if isinstance(recorded, int) else None)
        source = settings.context_flag if settings.context_length else "the cassette"
        choice = ModelChoice(replay.model_name, context, source, "replay")
        return budgeted(choice, reply_limit(settings, choice), lambda: replay)
    from core.context.models import (
        ModelChoiceError,
        ServerUnreachable,
        discover,
        unreachable_message,
    )

    try:
        choice = await discover(
            settings.base_url,
            settings.model,
            settings.context_length,
            override_name=settings.context_flag,
        )
    except ServerUnreachable as error:
        raise StartupError(unreachable_message(settings.base_url)) from error
    except ModelChoiceError as error:
        raise StartupError(str(error)) from error
    max_tokens = reply_limit(settings, choice)

    @functools.cache
    def chat_model() -> BaseChatModel:
        from core.context.chat_model import make_chat_model

        callbacks = None
        if settings.record:
            from core.context.cassette import Recorder

            callbacks = [Recorder(settings.record, choice.name, choice.context_length)]
        return make_chat_model(settings.base_url, choice.name, callbacks, max_tokens=max_tokens)

    return budgeted(choice, max_tokens, chat_model)


def reply_limit(settings: Settings, choice: ModelChoice) -> int:
    from core.context.budget import MAX_REPLY_TOKENS, default_max_tokens

    if settings.max_tokens is not None:
        return settings.max_tokens
    if choice.context_length is None:
        return MAX_REPLY_TOKENS
    return default_max_tokens(choice.context_length)


def budgeted(
    choice: ModelChoice, max_tokens: int, chat_model: Callable[[], BaseChatModel]
) -> LoadedModel:
    """The model with its budget; a reply limit that leaves no room for a prompt is a
    start-up error."""
    from core.context.budget import Budget

    budget = None
    if choice.context_length is not None:
        try:
            budget = Budget.for_context(choice.context_length, max_tokens)
        except ValueError:
            raise StartupError(
                f"--max-tokens {max_tokens}: the model's context is {choice.context_length} "
                f"tokens ({choice.context_source}), which leaves no room for a request; "
                "pass a smaller --max-tokens"
            ) from None
    return LoadedModel(choice, budget, max_tokens, chat_model)


def import_while_waiting(screen: str) -> None:
    """On a terminal, import what comes next on a thread while this one waits for the MCP
    server's handshake. Started earlier, a thread would only slow the imports before it:
    imports hold the interpreter's lock, and only a wait lets two run side by side."""
    if sys.stdin.isatty():
        # The model's client, for the first prompt: a person reads the banner and types; a
        # pipe's first line is there at once, and a `quit` would only wait for the import.
        import_in_background("core.context.chat_model")
    if screen == "tty":
        # Line editing, the status line and Markdown. A pipe or --help never imports them.
        import_in_background("terminal.tty")


def import_in_background(module: str) -> None:
    """Import a module on a thread; a later import of it waits for this one to finish."""
    threading.Thread(target=importlib.import_module, args=(module,), daemon=True).start()


def open_transcript(path: Path | None) -> Any:
    if path is None:
        return nullcontext(None)
    try:
        return path.open("w", encoding="utf-8")
    except OSError as error:
        raise StartupError(f"--transcript {path}: {error.strerror}") from error


def root_redactions(roots: tuple[Path, ...]) -> list[tuple[str, str]]:
    """Temp folders differ from run to run; a transcript names them by role instead."""
    names = ["<root>"] + [f"<root{n}>" for n in range(2, len(roots) + 1)]
    pairs = [(os.path.realpath(root), name) for root, name in zip(roots, names, strict=True)]
    pairs += [(str(root), name) for root, name in zip(roots, names, strict=True)]
    return sorted(set(pairs), key=lambda pair: -len(pair[0]))


# --- the thread store without the model or the tools -------------------------------------------


class NoModel:
    """Stands in for the chat model in a graph that is only read or updated, never run."""

    def bind_tools(self, *args: Any, **kwargs: Any) -> NoModel:
        return self

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this graph only reads threads; it has no model")


def reading_graph(store: Store) -> Graph:
    """The graph's shape without LM Studio or the MCP server, for commands that read or
    reset threads: the state's channels rebuild messages from stored deltas, and its node
    names tell which paused steps this version can resume."""
    from agent_graph import build_graph

    return build_graph(NoModel, [], store.checkpointer)  # type: ignore[arg-type]


@asynccontextmanager
async def open_reader(settings: Settings) -> AsyncIterator[tuple[Store, Graph]]:
    from store import open_store

    async with open_store(settings.db) as store:
        yield store, reading_graph(store)


@asynccontextmanager
async def held_reader(settings: Settings, given: str) -> AsyncIterator[tuple[Store, Graph, str]]:
    """The reader on an existing thread, held: the store, the graph and the thread's stored
    name. A name that is no thread is refused before the hold, which would register it."""
    from core.threads.thread_names import existing_name

    async with open_reader(settings) as (store, reader):
        name = await existing_name(store, given)
        async with store.hold(name):
            yield store, reader, name


async def check_resumable(store: Store, thread: str) -> None:
    """Refuse, loudly, a thread paused where this version cannot resume it."""
    from core.threads.threads import cannot_resume_message, view_thread

    view = await view_thread(reading_graph(store), thread)
    if view is not None and view.problem:
        raise StartupError(cannot_resume_message(view))


def require_store(location: str, name: str) -> None:
    from store import missing

    absent = missing(location)
    if absent is not None:
        raise ThreadError(f"no thread named '{name}': {absent.sentence}")


# --- the commands ------------------------------------------------------------------------------


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


async def in_reader(settings: Settings, act: Callable[[Store, Graph], Any]) -> int:
    async with open_reader(settings) as (store, app):
        return int(await act(store, app))


def approve_command(args: argparse.Namespace, settings: Settings) -> int:
    require_store(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=True))


def deny_command(args: argparse.Namespace, settings: Settings) -> int:
    require_store(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=False))


async def decide(args: argparse.Namespace, settings: Settings, *, approve: bool) -> int:
    """approve/deny: check the thread waits (without the model or the tools), then resume it
    as a session would."""
    from core.opening import open_thread
    from terminal import commands

    settings = dataclasses.replace(settings, thread=args.name)
    async with held_reader(settings, args.name) as (store, reader, args.name):
        settings = (await thread_roots(store, args.name, settings)).settings
        view = await commands.waiting_view(reader, args.name)
        calls = view.waiting
        reason = getattr(args, "reason", "")
        answer = getattr(args, "answer", None)
        approvals: ResumeValue | None = None  # the decisions, when it waits for approval
        decisions: ResumeValue | AnswerValue
        if view.kind == "question":
            answer = answer if approve else None
            decisions = commands.question_answers(calls, args.calls, answer, reason)
        elif answer is not None:
            raise ThreadError(
                f"thread '{args.name}' waits for approval of write calls, not for an answer; "
                "--answer answers a question"
            )
        else:
            decisions = approvals = commands.batch_decisions(calls, args.calls, approve, reason)
        async with launch(settings) as launched, open_agent(settings, launched, store) as agent:
            roots = launched.roots
            session = await open_thread(agent.parts, args.name, roots=roots, other_roots=True)
            # Approving writes: the person sees their previews first.
            if (
                approve
                and approvals is not None
                and not await commands.confirm_previews(session, calls, approvals, args.yes)
            ):
                return 3
            return await commands.decide(session, calls, decisions)


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


def started_with(settings: Settings, launched: Launched) -> dict[str, Any]:
    """What a thread records at its first session (store migration 6)."""
    return {
        "roots": [str(root) for root in launched.roots],
        "approve": settings.approve,
        "policy": str(settings.policy.resolve()) if settings.policy else None,
    }


LEAVE_ROOT_OUT = "leave --root out to act in its roots"


@dataclass(frozen=True)
class InRoots:
    """The settings a thread acts on, and what the banner says of their roots."""

    settings: Settings
    note: str = ""  # "this thread's": the roots it was started with, taken without --root


async def thread_roots(
    store: Store, name: str, settings: Settings, *, way_back: str = LEAVE_ROOT_OUT
) -> InRoots:
    """A thread acts in the roots it was started with (store migration 6), for the chat,
    approve, deny and undo alike: without --root it takes those (and its rules file, unless
    --policy names one). Given other roots, it is refused with one line naming both, unless
    --other-root says to act in these, or the person says so at a terminal. A new thread, or
    one from before fsagent kept its roots, acts where it is told."""
    from core.opening import OtherRoots, check_roots

    recorded = await store.thread_settings(name)
    if not recorded or not recorded.get("roots"):
        return InRoots(settings)
    started = tuple(Path(root) for root in recorded["roots"])
    if not settings.roots_given:
        policy = settings.policy or (Path(recorded["policy"]) if recorded.get("policy") else None)
        return InRoots(dataclasses.replace(settings, roots=started, policy=policy), "this thread's")
    given = tuple(Path(os.path.realpath(root)) for root in settings.roots)  # noqa: ASYNC240
    try:
        await check_roots(store, name, given, other_roots=settings.other_root, way_back=way_back)
    except OtherRoots as refused:
        if not sys.stdin.isatty() or not other_roots_confirmed(str(refused)):
            raise
    return InRoots(settings)


def other_roots_confirmed(refusal: str) -> bool:
    """At a terminal, the person decides whether a thread acts in roots it was not started
    with: `refusal` says which, and an empty answer (or end of input) is no."""
    from terminal.commands import confirm

    told = refusal.split(";", 1)[0]
    print(f"fsagent: {told}.", file=sys.stderr)
    return confirm("Act in the roots given for this session? [y/N] ").strip().lower() in (
        "y",
        "yes",
    )


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


# --- the HTTP service ---------------------------------------------------------------------------

# The terminal's own options: a server has no stdin to be strict about, and its runs are
# many threads' at once, not one transcript's or one cassette's.
TERMINAL_ONLY = ("transcript", "record", "replay", "strict", "thread")


def serve_settings_from_args(args: argparse.Namespace) -> ServeSettings:
    return ServeSettings(
        host=args.host,
        port=args.port,
        # A blank token is none: no bearer header could match it (the header is stripped).
        admin_token=os.environ.get("FSAGENT_ADMIN_TOKEN", "").strip() or None,
        allowed_hosts=tuple(args.allowed_hosts or ()),
        cors_origins=tuple(origin.rstrip("/") for origin in args.cors_origins or ()),
    )


def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    given = [name for name in TERMINAL_ONLY if getattr(args, name, None)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise StartupError(f"serve takes no {flags}: those are for a session at the terminal")
    return asyncio.run(serve(settings, serve_settings_from_args(args)))


async def serve(settings: Settings, serving: ServeSettings) -> int:
    from web.auth import Access
    from web.serving import listen, run_server

    access = Access(
        host=serving.host,
        port=serving.port,
        token=serving.admin_token,
        allowed_hosts=serving.allowed_hosts,
        cors_origins=serving.cors_origins,
    )
    if not access.loopback and not access.token:
        raise StartupError(
            f"serve --host {serving.host}: off loopback every endpoint needs a token, and "
            "FSAGENT_ADMIN_TOKEN is not set (or blank); set it, or serve on 127.0.0.1"
        )
    sock = listen(serving.host, serving.port)
    try:
        access = dataclasses.replace(access, port=sock.getsockname()[1])
        async with open_service(settings, access) as app:
            admin = "on" if access.token else "off (set FSAGENT_ADMIN_TOKEN to turn it on)"
            print(f"fsagent serve: {access.url} (inbox at /; admin API {admin})", flush=True)
            return await run_server(app, sock, verbose=settings.verbose)
    finally:
        sock.close()


@asynccontextmanager
async def open_service(settings: Settings, access: Access) -> AsyncIterator[FastAPI]:
    """The HTTP app on the store, the MCP server's tools, the model and the graph, as `chat`
    wires them for the terminal; every turn it still runs is cut off when it closes."""
    async with launch(settings) as launched:
        from core.context.models import server_problem
        from core.opening import open_thread
        from core.session import ThreadSession
        from store import open_store
        from web.app import Service, create_app

        make_data_folder(settings.db)
        async with open_store(settings.db) as store:
            async with open_agent(settings, launched, store) as agent:

                async def session(name: str) -> ThreadSession:
                    # A thread started on other roots is refused (409), unless --other-root.
                    return await open_thread(
                        agent.parts,
                        name,
                        roots=launched.roots,
                        started_with=started_with(settings, launched),
                        other_roots=settings.other_root,
                    )

                async def health() -> dict[str, str | None]:
                    model, tools = await asyncio.gather(
                        server_problem(settings.base_url), agent.server.problem()
                    )
                    return {"lm_studio": model, "mcp_server": tools}

                service = Service(store, agent.app, session, health, verbose=settings.verbose)
                app = create_app(service, access)
                try:
                    yield app
                finally:
                    await app.state.runs.shutdown("the server is stopping")


def regress_command(args: argparse.Namespace, settings: Settings) -> int:
    from terminal.regress import packaged_examples, run_cases

    cases = args.cases if args.cases is not None else packaged_examples()
    return run_cases(cases, show=args.show, update=args.update)


if __name__ == "__main__":
    # Run the importable module's cli, not this __main__ copy, so there is one `agent`
    # module whatever imports it.
    from agent import cli

    cli()
