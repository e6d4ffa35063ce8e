"""The options every command may take, added to a parser (`add_*_option`), and the parser
itself: every usage error one line and exit 2, a mistyped command told the nearest one.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from cli.settings import APPROVE_MODES, CONSTRAIN_MODES, DEFAULT_BASE_URL, positive_int

if TYPE_CHECKING:
    pass


# Each option's value when it is not given. Every option is parsed with SUPPRESS defaults, so
# what a namespace holds is what the person typed; the config file and FSAGENT_* variables fill
# in the None ones (settings_from_args), these the rest.
OPTION_DEFAULTS: dict[str, Any] = {
    "base_url": None, "model": None, "root": None, "other_root": False, "db": None,
    "thread": None, "read_only": False, "require_kernel_sandbox": False, "approve": None,
    "policy": None, "verbose": False, "plain": False, "strict": False, "transcript": None,
    "context_length": None, "max_tokens": None, "hide_reasoning": False,
    "no_text_calls": False, "record": None, "replay": None, "prompt": None,
    "constrain_calls": None, "mcp_config": None, "accept_project_servers": False,
    "no_instructions": False,
}  # fmt: skip


class Parser(argparse.ArgumentParser):
    """argparse, with every usage error in one line (what, and where to look) and exit 2,
    never the usage block; a mistyped command gets the nearest one, a prompt typed without
    -p is told about -p. `commands`: the names the top level offers, for that nearest one."""

    def __init__(self, *args: Any, commands: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = commands

    def error(self, message: str) -> NoReturn:
        refused = UNKNOWN_COMMAND.match(message)
        if refused and self.prog == "fsagent":
            usage_error(unknown_command(refused["value"], list(self.commands)))
        command = self.prog.removeprefix("fsagent").strip()
        usage_error(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")


def usage_error(line: str) -> NoReturn:
    """A usage error: its one line on stderr, exit 2."""
    print(f"fsagent: {line}", file=sys.stderr)
    raise SystemExit(2)


# argparse's wording for a word that is no command (Python 3.11 to 3.13).
UNKNOWN_COMMAND = re.compile(r"argument COMMAND: invalid choice: (?P<value>'.*?'|\".*?\")")


def unknown_command(quoted: str, commands: list[str]) -> str:
    import ast
    import difflib
    import shlex

    word = str(ast.literal_eval(quoted))  # argparse shows it as repr() does
    close = difflib.get_close_matches(word, commands, n=1)
    if close and " " not in word.strip():
        return f"unknown command '{word}'; did you mean '{close[0]}'?"
    return f"unknown command '{word}'; to send it as a prompt: fsagent -p {shlex.quote(word)}"


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

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
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
    parser.add_argument(
        "--no-instructions",
        action="store_true",
        default=SUPPRESS,
        help="do not send the project's AGENTS.md files (the first root's and its parents' up "
        "to the repository's top) to the model",
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
    parser.add_argument(
        "--mcp-config",
        type=Path,
        default=SUPPRESS,
        metavar="FILE",
        help='your other MCP servers as LM Studio, Claude and Cursor write them ({"mcpServers": '
        "...}); beside [mcp_servers.NAME] in config.toml (docs/other-servers.md)",
    )
    parser.add_argument(
        "--accept-project-servers",
        action="store_true",
        default=SUPPRESS,
        help="start the servers the first root's fsagent.toml adds, and remember that yes for "
        "each entry as written (deleting the record takes it back; docs/other-servers.md)",
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


def root_path(text: str) -> Path:
    """--root's value: an empty one would be the current folder by accident (Path("") is
    "."), so it is refused; say `--root .` for that."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty path; pass the folder the agent may use (--root . for this one)"
        )
    return Path(text)
