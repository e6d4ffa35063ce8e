"""The person's other MCP servers started and held: each enabled server's session opened
(stdio: a process of ours; streamable HTTP: a client), its tools listed and named for the
model (`git__git_status`), one line for any server that cannot be used.

A server that fails to start, does not answer `initialize` in its `startup_timeout`, exits,
or answers garbage is one line naming it (`OtherServer.problem`); its tools are not offered,
and the session and the other servers go on. A server that dies later answers each call with
one line naming it (the graph's tools step turns the error into the call's answer).

A stdio server is started as ours is (core/tools/server_process.py): its own process group,
out of the terminal's Ctrl-C, its stderr shown only with --verbose, stopped by closing its
stdin, then terminate, then kill. Its argv goes through `confined_argv`, the one place the
kernel sandbox (core/servers/confine.py, where the kernel has Landlock) is put around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

from core.errors import StartupError, first_leaf
from core.servers import gate, pins, sandbox_rules
from core.servers.config import ServerSpec, exposed_name, filled_headers
from core.servers.confine import launcher_argv
from core.text import visible
from core.tools.mcp_stdio import session_streams
from core.tools.server_process import LINE_LIMIT
from mcp_servers.kernel_sandbox import abi_cap, kernel_abi
from store.location import xdg_folder

DESCRIPTION_CHARS = 120  # the router's one line of a server
ANSWER_CHARS = 256 * 1024  # another server's answer, at most, as our server caps its reads


def confined_argv(
    spec: ServerSpec,
    roots: Sequence[Path],
    state_dir: Path,
    *,
    read_only: bool = False,
    present: bool | None = None,
) -> list[str]:
    """The argv a stdio server is started with: the kernel sandbox around its command
    (core/servers/confine.py: writes only to the roots and its own state folder, no network
    unless `network = true`) when `sandbox = true` and the kernel can hold it (`present`, by
    default whether it has Landlock); the plain command otherwise. The one place that
    decides it. `read_only`: every tool it has is proven read-only (pinned so), so it gets
    no write right at all: its roots to read, no state folder."""
    plain = [spec.command, *spec.args]
    if not spec.sandbox or not (kernel_holds() if present is None else present):
        return plain
    if read_only:
        return launcher_argv(plain, reads=roots, network=spec.network)
    return launcher_argv(plain, writes=roots, state=state_dir, network=spec.network)


def kernel_holds() -> bool:
    """Whether this kernel can put a server in the sandbox: Landlock, at any ABI
    (`FSAGENT_LANDLOCK_ABI=0` says none, for tests, as it does for our own server)."""
    return kernel_abi()[0] > 0 and abi_cap() != 0


def pinned_read_only(spec: ServerSpec, data_folder: Path) -> bool:
    """Whether every tool of the server, as pinned, is annotated read-only: then the
    sandbox gives it no write right, so an annotation that lies cannot write. A server never
    pinned (its first use) is not."""
    pinned = pins.load_pins(pins.pin_file(data_folder, spec.name))
    if not pinned:
        return False
    return all(
        (definition.get("annotations") or {}).get("readOnlyHint") is True
        for definition in pinned.values()
    )


def is_confined(spec: ServerSpec) -> bool:
    """Whether `confined_argv` puts the kernel sandbox around this server."""
    return spec.transport == "stdio" and spec.sandbox and kernel_holds()


def state_folder(spec: ServerSpec, environ: Mapping[str, str]) -> Path:
    """The folder a server may write besides the roots (its caches, a memory file), the
    sandbox's rule: `$XDG_STATE_HOME/fsagent/servers/NAME` (core/servers/sandbox_rules.py)."""
    return sandbox_rules.state_folder(spec.name, environ)


def make_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)


class CancellingSession(ClientSession):
    """A session that tells the server when a request it waits on is cancelled (Ctrl-C, a
    run cut off): MCP's `notifications/cancelled` with the request's id, so the server can
    stop its work. The SDK's client (1.x) only stops waiting."""

    async def send_request(self, request: Any, result_type: Any, *args: Any, **kwargs: Any) -> Any:
        # The id the SDK gives this request: read before it is taken, with no await between.
        request_id = self._request_id
        try:
            return await super().send_request(request, result_type, *args, **kwargs)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self.send_notification(cancelled(request_id))
            raise


def cancelled(request_id: int) -> types.ClientNotification:
    params = types.CancelledNotificationParams(requestId=request_id, reason="cancelled")
    return types.ClientNotification(types.CancelledNotification(params=params))


@dataclass
class OtherServer:
    """One configured server as this process holds it: its tools (named for the model) and
    their definitions as listed, or the one line saying why it cannot be used."""

    spec: ServerSpec
    tools: list[BaseTool] = field(default_factory=list)
    listed: list[types.Tool] = field(default_factory=list)
    description: str = ""
    problem: str | None = None
    session: ClientSession | None = None
    process: asyncio.subprocess.Process | None = None
    notes: list[str] = field(default_factory=list)  # the pins' lines: what changed

    @property
    def name(self) -> str:
        return self.spec.name


def one_line(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """A server's own words as one short line for the router and the screen."""
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe(spec: ServerSpec, initialized: types.InitializeResult) -> str:
    info = initialized.serverInfo
    words = initialized.instructions or getattr(info, "title", None) or info.name
    return one_line(words or spec.name)


async def start_process(
    spec: ServerSpec,
    roots: Sequence[Path],
    data_folder: Path,
    environ: Mapping[str, str],
    verbose: bool,
) -> asyncio.subprocess.Process:
    state_dir = state_folder(spec, environ)
    read_only = pinned_read_only(spec, data_folder)
    argv = confined_argv(spec, roots, state_dir, read_only=read_only)
    errlog: IO[Any] | int | None = None if verbose else asyncio.subprocess.DEVNULL
    env, cwd = {**environ, **spec.env}, spec.cwd or str(roots[0])
    # Found here, not by the sandbox's launcher: its exec would fail where no one reads it,
    # and the session would say only that the connection closed.
    if not runnable(spec.command, env, cwd):
        raise StartupError(f"no such command {spec.command!r}")
    make_folder(state_dir)
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errlog,
            env=env,
            cwd=cwd,
            limit=LINE_LIMIT,
            process_group=0,  # out of the terminal's Ctrl-C, as ours (server_process.py)
        )
    except FileNotFoundError:
        raise StartupError(f"no such command {spec.command!r}") from None
    except OSError as error:
        raise StartupError(f"cannot run {spec.command!r}: {error.strerror or error}") from None


def runnable(command: str, env: Mapping[str, str], cwd: str) -> bool:
    """Whether `command` names a program the server's start can run: on its PATH, or a path
    from its working folder."""
    if "/" in command:
        return os.access(os.path.join(cwd, command), os.X_OK)
    return shutil.which(command, path=env.get("PATH", os.defpath)) is not None


async def open_one(
    spec: ServerSpec,
    stack: AsyncExitStack,
    roots: Sequence[Path],
    data_folder: Path,
    environ: Mapping[str, str],
    verbose: bool,
) -> OtherServer:
    """Open one server's session on `stack`; errors propagate (open_servers says them)."""
    process = None
    if spec.transport == "stdio":
        process = await start_process(spec, roots, data_folder, environ, verbose)
        read, write = await stack.enter_async_context(session_streams(process))
    else:
        headers = filled_headers(spec, environ)
        client = streamablehttp_client(spec.url, headers=headers, timeout=spec.startup_timeout)
        read, write, _ = await stack.enter_async_context(client)
    session = await stack.enter_async_context(CancellingSession(read, write))
    initialized = await asyncio.wait_for(session.initialize(), spec.startup_timeout)
    listed = (await asyncio.wait_for(session.list_tools(), spec.startup_timeout)).tools
    offered = [tool for tool in listed if spec.offers(tool.name)]
    held, said = pinned(spec, offered, data_folder)
    tools = []
    for tool, pin in zip(offered, held, strict=True):
        converted = named_tool(spec, session, tool)
        gate.mark(converted, gate.facts(spec.name, tool, pin))
        tools.append(converted)
    server = OtherServer(spec, tools, offered, describe(spec, initialized), None, session, process)
    server.notes = said
    return server


def pinned(
    spec: ServerSpec, offered: Sequence[types.Tool], data_folder: Path
) -> tuple[list[pins.Pin], list[str]]:
    """Each offered tool held against its pin (pinned now on the server's first use), and a
    line for each that is not as pinned."""
    path = pins.pin_file(data_folder, spec.name)
    before = pins.load_pins(path)
    held = pins.hold(offered, before)
    if before is None:
        pins.record(path, offered)
    return held, pins.lines(spec.name, held, path)


def named_tool(spec: ServerSpec, session: ClientSession, tool: types.Tool) -> BaseTool:
    """The tool as the model sees it (`git__git_status`), whose failure to get an answer (the
    server exited, the pipe broke) is one line naming the server; an error the server
    answers stays its own answer."""
    converted = convert_mcp_tool_to_langchain_tool(session, tool, server_name=spec.name)
    converted.name = exposed_name(spec.name, tool.name)
    assert isinstance(converted, StructuredTool)
    call = converted.coroutine
    assert call is not None, "an MCP tool is called by its coroutine"

    async def guarded(**arguments: Any) -> Any:
        try:
            content, artifact = await call(**arguments)
            return capped(spec.name, content), artifact
        except ToolException:
            raise
        except Exception as error:
            leaf = first_leaf(error)
            why = visible(f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__)
            raise ServerGone(f"the MCP server {spec.name} gave no answer ({why})") from None

    converted.coroutine = guarded
    return converted


def capped(server: str, content: Any) -> Any:
    """An answer held to ANSWER_CHARS of text, as our server holds its own (its answers are
    capped at the source): a longer one is cut, and the model is told so."""
    blocks = content if isinstance(content, list) else [content]
    texts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in blocks]
    total = sum(len(text) for text in texts if isinstance(text, str))
    if total <= ANSWER_CHARS:
        return content
    joined = "".join(text for text in texts if isinstance(text, str))
    return (
        joined[:ANSWER_CHARS]
        + f"\n… cut: the MCP server {server} answered {total:,} characters; the first "
        f"{ANSWER_CHARS:,} are kept. Ask it for less."
    )


class ServerGone(Exception):
    """A call to another server that got no answer: the server exited or broke its pipe."""


def failure(spec: ServerSpec, error: BaseException) -> str:
    """The one line for a server that cannot be used."""
    error = first_leaf(error)
    if isinstance(error, TimeoutError):
        why = f"did not answer within {spec.startup_timeout:g}s (startup_timeout)"
    elif isinstance(error, StartupError):
        why = str(error)
    else:
        why = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return visible(f"MCP server {spec.name} ({spec.source}): not started: {why}; its tools are off")


@contextlib.asynccontextmanager
async def open_servers(
    specs: Sequence[ServerSpec],
    roots: Sequence[Path],
    data_folder: Path,
    environ: Mapping[str, str],
    *,
    verbose: bool = False,
) -> AsyncIterator[list[OtherServer]]:
    """Every enabled server opened, one after the other; each that cannot be used is kept
    with its `problem` line and no tools. On exit every server is stopped."""
    async with AsyncExitStack() as outer:
        servers = []
        for spec in specs:
            if not spec.enabled:
                continue
            stack = AsyncExitStack()
            try:
                server = await open_one(spec, stack, roots, data_folder, environ, verbose)
            except (Exception, BaseExceptionGroup) as error:
                # Its own contexts only, closed in the order they opened: the others go on.
                with contextlib.suppress(Exception, BaseExceptionGroup):
                    await stack.aclose()
                servers.append(OtherServer(spec, problem=failure(spec, error)))
                continue
            outer.push_async_callback(stack.aclose)
            servers.append(server)
        yield servers


async def server_problem(server: OtherServer) -> str | None:
    """Why a server that started cannot answer now; None when it answers a ping."""
    if server.problem:
        return server.problem
    if server.process is not None and server.process.returncode is not None:
        return f"MCP server {server.name} exited (code {server.process.returncode})"
    if server.session is None:
        return f"MCP server {server.name} has no session"
    try:
        await asyncio.wait_for(server.session.send_ping(), server.spec.startup_timeout)
    except Exception as error:
        return f"MCP server {server.name} does not answer: {type(error).__name__}: {error}"
    return None


def data_folder_of(environ: Mapping[str, str]) -> Path:
    return xdg_folder(environ, "XDG_DATA_HOME", ".local/share") / "fsagent"
