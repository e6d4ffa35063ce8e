"""Settings, the LM Studio chat model, and the MCP tools the agent works with.

Everything heavy (langchain, the MCP SDK) is imported inside the functions that need it, so
`fsagent --help` and the first prompt do not pay for what they do not use.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_servers.tool_names import READ_TOOL_NAMES, WRITE_TOOL_NAMES

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool
    from langchain_openai import ChatOpenAI

PROJECT_DIR = Path(__file__).resolve().parent
DEFAULT_BASE_URL = "http://localhost:1234/v1"

# The write tools (each one waits for approval) and the read tools, as our server names them.
WRITE_TOOLS: frozenset[str] = WRITE_TOOL_NAMES
ALLOWED_TOOLS: frozenset[str] = READ_TOOL_NAMES

# Each group is an agent node (`agent_<group>`) bound to these tools. `general` gets every tool.
# Groups only narrow what the model is offered; approval is decided by tool name, never by group.
TOOL_GROUPS: dict[str, frozenset[str] | None] = {
    # Files and folders: every tool but the searches.
    "filesystem": (ALLOWED_TOOLS - {"search_files", "grep"}) | WRITE_TOOLS,
    "search": frozenset(
        {
            "list_allowed_roots",
            "list_directory",
            "directory_tree",
            "search_files",
            "grep",
            "read_file",
            "get_file_info",
        }
    ),
    "general": None,  # None means every loaded tool
}
ROUTES: tuple[str, ...] = tuple(TOOL_GROUPS)


class StartupError(Exception):
    """Something stops fsagent from starting; the message is the one line the person sees."""


class ThreadError(Exception):
    """A thread cannot be used as asked (unknown, open elsewhere, not waiting); exit code 1.
    The message is the one line the person sees, and nothing was changed."""


@dataclass
class Settings:
    base_url: str = DEFAULT_BASE_URL
    model: str | None = None
    roots: list[Path] = field(default_factory=lambda: [Path.cwd()])
    db: Path = field(default_factory=lambda: Path.cwd() / "threads.db")
    thread: str = "default"
    verbose: bool = False
    read_only: bool = False
    strict: bool = False
    transcript: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    approve: str = "ask"  # ask | yes | no: who decides writes no rule decides
    policy: Path | None = None  # --policy FILE; None: fsagent.toml in the first root, if any


APPROVE_MODES: tuple[str, ...] = ("ask", "yes", "no")

EXIT_CODES = (
    "exit codes: 0 finished; 1 error during the run; 2 cannot start (bad flags, LM Studio "
    "unreachable, bad policy or database); 3 stopped with an approval pending or an answer "
    "refused; 4 replay mismatch."
)


def build_parser() -> argparse.ArgumentParser:
    """`fsagent [options]` talks; `fsagent COMMAND [options]` works on the thread file.

    Every command takes the same options, before or after its name; options given after the
    name are parsed with SUPPRESS defaults so they never overwrite those given before it.
    """
    parser = argparse.ArgumentParser(
        prog="fsagent",
        description="A terminal agent for a local LLM that changes files only with your consent.",
        epilog=EXIT_CODES,
    )
    add_agent_options(parser)
    parser.set_defaults(command=None)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        sub = commands.add_parser(
            command.name, help=command.help, description=command.help, epilog=EXIT_CODES
        )
        add_agent_options(sub, suppress=True)
        command.load("add_arguments")(sub)
        sub.set_defaults(command=command.name)
    return parser


def add_agent_options(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--base-url",
        default=default(os.environ.get("FSAGENT_BASE_URL", DEFAULT_BASE_URL)),
        help="LM Studio's OpenAI-compatible server (env FSAGENT_BASE_URL; "
        f"default {DEFAULT_BASE_URL})",
    )
    parser.add_argument(
        "--model",
        default=default(os.environ.get("FSAGENT_MODEL")),
        help="model name (env FSAGENT_MODEL; default: the first model the server lists)",
    )
    parser.add_argument(
        "--root",
        action="append",
        type=Path,
        default=default(None),
        metavar="DIR",
        help="a folder the agent may use (repeatable; default: the current folder)",
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=default(Path(os.environ.get("FSAGENT_DB", "threads.db"))),
        help="the SQLite file that keeps threads (env FSAGENT_DB; default ./threads.db)",
    )
    # None, not "default", so a command can tell "no --thread" (every thread) from a name.
    parser.add_argument(
        "--thread", default=default(None), help="conversation name (default: default)"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=default(False),
        help="offer the model no write tool at all (the server registers none)",
    )
    parser.add_argument(
        "--approve",
        choices=APPROVE_MODES,
        default=default("ask"),
        help="who decides writes that no rule decides: ask you (default), yes to all, "
        "or no to all (read-only sessions, CI); a deny rule holds in every mode",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="approval rules (TOML, [[rule]] tables; default: fsagent.toml in the first root)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=default(False),
        help="show tracebacks and server logs",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        default=default(False),
        help="stop (exit 3) when a piped prompt line looks like an answer to an approval",
    )
    parser.add_argument(
        "--transcript",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="write one JSON event per line: what a regression run compares",
    )
    replay = parser.add_mutually_exclusive_group()
    replay.add_argument(
        "--record",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="save every model request's essentials and the model's response (a cassette)",
    )
    replay.add_argument(
        "--replay",
        type=Path,
        default=default(None),
        metavar="FILE",
        help="answer from a cassette instead of LM Studio; exit 4 when the run drifts from it",
    )


@dataclass(frozen=True)
class Command:
    """A subcommand, implemented by `module` as `add_arguments(parser)` and
    `run(args, settings) -> exit code`. Named here so `fsagent --help` lists every command;
    imported only when used."""

    name: str
    help: str
    module: str
    # One module may serve several commands under its own function names.
    functions: tuple[str, str] = ("add_arguments", "run")

    def load(self, function: str) -> Any:
        import importlib

        name = dict(zip(("add_arguments", "run"), self.functions, strict=True))[function]
        return getattr(importlib.import_module(self.module), name)


COMMANDS: list[Command] = [
    Command("regress", "replay every recorded case in DIR and compare transcripts", "regress"),
    Command("audit", "print every approval decision (who decided what, and why)", "audit"),
    Command(
        "threads", "list threads; show, rm or reset one (threads show NAME)", "thread_commands"
    ),
    Command(
        "approvals",
        "list every pending approval in the thread file",
        "thread_commands",
        ("add_approvals_arguments", "run_approvals"),
    ),
    Command(
        "approve",
        "approve a waiting thread's calls from any shell; the thread runs on",
        "thread_commands",
        ("add_decision_arguments", "run_approve"),
    ),
    Command(
        "deny",
        "reject a waiting thread's calls from any shell; the model is told why",
        "thread_commands",
        ("add_decision_arguments", "run_deny"),
    ),
]


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(
        base_url=args.base_url.rstrip("/"),
        model=args.model,
        roots=[Path(r).expanduser() for r in (args.root or [Path.cwd()])],
        db=Path(args.db).expanduser(),
        thread=args.thread or "default",
        verbose=args.verbose,
        read_only=args.read_only,
        strict=args.strict,
        transcript=args.transcript,
        record=args.record,
        replay=args.replay,
        approve=args.approve,
        policy=Path(args.policy).expanduser() if args.policy else None,
    )


def check_roots(roots: list[Path]) -> list[Path]:
    """Resolve roots up front so a typo is a clear start-up error, not a server crash."""
    resolved = []
    for root in roots:
        if not root.is_dir():
            raise StartupError(
                f"--root {root}: no such folder; pass an existing folder the agent may use"
            )
        resolved.append(root.resolve())
    return resolved


# --- the model -------------------------------------------------------------------------------


def unreachable_message(base_url: str) -> str:
    return (
        f"cannot reach LM Studio at {base_url}: start LM Studio's local server "
        "(Developer tab > Start Server) or pass --base-url"
    )


async def first_listed_model(base_url: str) -> str:
    """Ask the server which models it serves; LM Studio lists the loaded ones first."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(f"{base_url}/models")
            response.raise_for_status()
            models = response.json().get("data") or []
    except (httpx.HTTPError, ValueError) as error:
        raise StartupError(unreachable_message(base_url)) from error
    if not models:
        raise StartupError(
            f"LM Studio at {base_url} lists no model: load one in LM Studio or pass --model"
        )
    return str(models[0]["id"])


def make_chat_model(base_url: str, model: str, callbacks: list[Any] | None = None) -> ChatOpenAI:
    return plain_json_chat_model()(
        callbacks=callbacks,
        base_url=base_url,
        api_key="lm-studio",  # LM Studio ignores the key, the client insists on one
        model=model,
        streaming=True,
        temperature=0,
        max_retries=0,  # a local server that is down stays down; say so at once
        timeout=600,
    )


@functools.cache
def plain_json_chat_model() -> type[ChatOpenAI]:
    """ChatOpenAI, sending the messages and tools as the plain JSON they already are.

    The openai client walks every request body through a type-driven transform before it
    sends it; with the whole history in every request, that walk was about half of our CPU
    per tool step, and it grows with the thread. `extra_body` is merged into the JSON as is,
    so the body on the wire is the same.
    """
    from langchain_openai import ChatOpenAI

    class PlainJSONChatOpenAI(ChatOpenAI):
        def _get_request_payload(self, input_: Any, *, stop: Any = None, **kwargs: Any) -> dict:
            payload = super()._get_request_payload(input_, stop=stop, **kwargs)
            plain = {key: payload.pop(key) for key in ("messages", "tools") if key in payload}
            payload["extra_body"] = {**(payload.get("extra_body") or {}), **plain}
            payload["messages"] = []  # required by the client's signature; extra_body wins
            return payload

    return PlainJSONChatOpenAI


# --- the tools -------------------------------------------------------------------------------


def server_command(roots: list[Path], read_only: bool) -> tuple[str, list[str], dict[str, str]]:
    args = ["-m", "mcp_servers.filesystem"]
    if read_only:
        args.append("--read-only")
    args += [str(root) for root in roots]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_DIR), env.get("PYTHONPATH")]))
    return sys.executable, args, env


@asynccontextmanager
async def open_tools(
    roots: list[Path], *, read_only: bool = False, verbose: bool = False
) -> AsyncIterator[list[BaseTool]]:
    """Start our MCP server once and keep its one session open while the agent runs.

    `MultiServerMCPClient.get_tools()` would start a new server process for every call; a
    session held here makes a tool call one round trip on an open pipe. The process starts
    before the MCP SDK is imported here, so the two imports overlap (see mcp_stdio).
    """
    from mcp_stdio import session_streams, start_server

    command, args, env = server_command(roots, read_only)
    # The server logs to stderr; the person sees it only with --verbose.
    errlog = None if verbose else asyncio.subprocess.DEVNULL
    process = await start_server(command, args, env, str(roots[0]), errlog)
    from langchain_mcp_adapters.tools import load_mcp_tools
    from mcp import ClientSession

    async with session_streams(process) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield await load_mcp_tools(session)


def tools_for_group(tools: list[BaseTool], group: str) -> list[BaseTool]:
    names = TOOL_GROUPS[group]
    return [tool for tool in tools if names is None or tool.name in names]


def content_text(content: Any) -> str:
    """MCP results come as content blocks; models and people want the text."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict):
            parts.append(str(block.get("text", "")))
        else:
            parts.append(str(block))
    return "\n".join(parts)


async def _text_results(request: Any, execute: Any) -> Any:
    """Tool results as plain text, as our graph sends them: some local servers reject the
    content-block lists MCP results arrive as."""
    message = await execute(request)
    if hasattr(message, "content") and not isinstance(message.content, str):
        message.content = content_text(message.content)
    return message


def build_read_only_agent(
    model: ChatOpenAI, tools: list[BaseTool], checkpointer: Any, state_schema: Any
) -> Any:
    """The prebuilt ReAct agent over read tools only: nothing in it can change a file."""
    from langgraph.prebuilt import ToolNode, create_react_agent

    read_tools = [tool for tool in tools if tool.name in ALLOWED_TOOLS]
    return create_react_agent(
        model,
        ToolNode(read_tools, awrap_tool_call=_text_results),
        prompt=SYSTEM_PROMPT,
        checkpointer=checkpointer,
        state_schema=state_schema,
    )


SYSTEM_PROMPT = (
    "You are fsagent, a careful assistant that works on the person's files only through the "
    "tools you are given. Paths are relative to the first allowed folder unless absolute. "
    "Read before you change. Every change to a file is shown to the person, who approves, "
    "edits or rejects it: if a call is rejected, do not retry it; ask what they want instead. "
    "Answer briefly."
)
