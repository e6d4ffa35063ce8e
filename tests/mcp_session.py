"""Start the real filesystem server over stdio and call it with the MCP SDK client.

`FilesystemServer` keeps one server process and one client session open on an event loop in
a background thread, so synchronous tests can share a server (starting one costs ~0.5 s).
`RawServer` speaks the JSON-RPC lines itself, for what the SDK client will not send: pings
mid-call, cancellations, bytes that are not JSON.

Both fork the server from the worker's launcher (tests/launcher.py), which has the MCP SDK
imported: a launch by `python -m` spent 0.48 of its 0.65 s importing it, and the server
suite launches ~1,000. The fork is still a real process of its own (its pid, its pipes,
SIGKILL kills it), imports our modules afresh under the test's environment and umask, and
sets up its own Landlock and seccomp filter: the launcher runs none of our code. `popen` is
the one place that decides; the real exec is kept where it is the point: a wrapper
(setpriv, prlimit: other credentials or limits), `exec_=True` (start-up itself, the banner,
memory peaks, which a fork shares with the launcher), and FSAGENT_TEST_EXEC_SERVERS=1 for a
whole run (to compare, or to rule the fork out).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from launcher import LAUNCHER, Launched
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, JSONRPCMessage, TextContent, Tool

REPO = Path(__file__).resolve().parent.parent
# mcp_servers/platform_calls.py: set, the server runs as if O_PATH and preadv did not exist.
PORTABLE_ENV = "FSAGENT_PORTABLE_CALLS"
# mcp_servers/kernel_sandbox.py: 0, the server runs without Landlock (its own checks alone).
LANDLOCK_ABI_ENV = "FSAGENT_LANDLOCK_ABI"
# mcp_servers/journal.py: where the server's journals live (the test's own data folder).
JOURNAL_ENV = "FSAGENT_JOURNAL_DIR"
PASSED = (PORTABLE_ENV, LANDLOCK_ABI_ENV, JOURNAL_ENV, "XDG_DATA_HOME")
CALL_TIMEOUT = 60.0
# Set (to anything but 0), every server of the suite is exec'd as `python -m` (see above).
EXEC_ENV = "FSAGENT_TEST_EXEC_SERVERS"
LINE_LIMIT = 16 * 1024 * 1024  # as core/tools/server_process.py reads the server's lines
EXIT_GRACE_SECONDS = 2.0  # as the SDK's stdio_client waits, after stdin is closed


def forked(*, wrapper: Sequence[str] = (), exec_: bool = False) -> bool:
    """Whether a server is forked from the launcher rather than exec'd (the module's doc)."""
    return not wrapper and not exec_ and os.environ.get(EXEC_ENV, "") in ("", "0")


def popen(
    roots: Sequence[Path | str],
    *flags: str,
    env: dict[str, str] | None = None,
    exec_: bool = False,
    stdin: Any = subprocess.PIPE,
    stdout: Any = subprocess.PIPE,
    stderr: Any = None,
) -> subprocess.Popen[bytes] | Launched:
    """The server on `roots`, started as subprocess.Popen(server_command(...), cwd=REPO,
    env=os.environ + `env`) starts it: forked from the launcher, or exec'd (see `forked`)."""
    command = server_command(roots, *flags)
    environment = {**os.environ, **(env or {})}
    if forked(exec_=exec_):
        return LAUNCHER.spawn(
            command[1:], env=environment, cwd=REPO, stdin=stdin, stdout=stdout, stderr=stderr
        )
    return subprocess.Popen(
        command, cwd=REPO, stdin=stdin, stdout=stdout, stderr=stderr, env=environment
    )


def server_command(roots: Sequence[Path | str], *flags: str) -> list[str]:
    return [sys.executable, "-m", "mcp_servers.filesystem", *flags, *map(str, roots)]


def server_parameters(
    roots: Sequence[Path | str],
    *flags: str,
    wrapper: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> StdioServerParameters:
    """`wrapper` is a command the server runs under (e.g. setpriv dropping a capability);
    `env`, variables the server gets beyond the passed ones."""
    command = [*wrapper, *server_command(roots, *flags)]
    environment = {**(passed_environment() or {}), **(env or {})} or None
    return StdioServerParameters(
        command=command[0], args=command[1:], cwd=str(REPO), env=environment
    )


def passed_environment() -> dict[str, str] | None:
    """The variables the server must see beyond the SDK's few: the MCP SDK starts a stdio
    server with only HOME, PATH and a handful more (mcp/client/stdio/__init__.py,
    DEFAULT_INHERITED_ENV_VARS), so the switches of the suite's passes (the portable calls;
    Landlock off, so the server's own containment is tested alone) are passed by name, and so
    is the test's data folder, where the server keeps its journals (never the real home's)."""
    passed = {name: os.environ[name] for name in PASSED if os.environ.get(name)}
    return passed or None


def children_running(*words: str) -> list[int]:
    """Pids of this process's children whose command line holds every word."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        args = [part.decode(errors="replace") for part in command]
        if parent == os.getpid() and all(word in args for word in words):
            found.append(int(entry.name))
    return found


def status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status, e.g. VmHWM (the peak resident memory)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Result:
    text: str
    is_error: bool


def as_result(result: CallToolResult) -> Result:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return Result(text="\n".join(texts), is_error=bool(result.isError))


class FilesystemServer:
    """One server process with one open session, usable from synchronous code."""

    def __init__(
        self,
        roots: Sequence[Path | str],
        *flags: str,
        wrapper: Sequence[str] = (),
        env: dict[str, str] | None = None,
        exec_: bool = False,
    ) -> None:
        self.parameters = server_parameters(roots, *flags, wrapper=wrapper, env=env)
        self.command = server_command(roots, *flags)
        self.forked: Launched | None = None
        if forked(wrapper=wrapper, exec_=exec_):
            # The environment the SDK's stdio_client gives the process it starts.
            environment = {**get_default_environment(), **(self.parameters.env or {})}
            self.forked = LAUNCHER.spawn(
                self.command[1:], env=environment, cwd=REPO, stderr=self.stderr_file()
            )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.opened: Future[ClientSession] = Future()
        self.stop: asyncio.Event | None = None
        self.lifetime = asyncio.run_coroutine_threadsafe(self.hold_session(), self.loop)
        self.session = self.opened.result(timeout=CALL_TIMEOUT)

    async def hold_session(self) -> None:
        # The SDK's task groups must be entered and left by the same task: this one.
        self.stop = asyncio.Event()
        try:
            transport = (
                stdio_client(self.parameters, errlog=self.stderr_file())
                if self.forked is None
                else forked_stdio(self.forked)
            )
            async with transport as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.opened.set_result(session)
                    await self.stop.wait()
        except BaseException as error:
            if not self.opened.done():
                self.opened.set_exception(error)
            raise

    def stderr_file(self) -> Any:
        """The server's stderr: a temp file, read by no one (the SDK hands it a real file)."""
        if not hasattr(self, "stderr"):
            self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close())
        return self.stderr

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CALL_TIMEOUT)

    def call(self, name: str, **arguments: Any) -> Result:
        return as_result(self.run(self.session.call_tool(name, arguments)))

    def ok(self, name: str, **arguments: Any) -> str:
        """Call a tool that must succeed; return its text."""
        result = self.call(name, **arguments)
        assert not result.is_error, f"{name} failed: {result.text}"
        return result.text

    def tools(self) -> list[Tool]:
        return self.run(self.session.list_tools()).tools

    @property
    def pid(self) -> int:
        """The server process (the one child of ours started with exactly these args)."""
        if self.forked is not None:
            return self.forked.pid
        (pid,) = children_running(*self.command[1:])
        return pid

    def close(self) -> None:
        if self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
        try:
            self.lifetime.result(timeout=CALL_TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=CALL_TIMEOUT)
            self.loop.close()
            self.stderr_file().close()

    def __enter__(self) -> FilesystemServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RawServer:
    """The server as a plain subprocess, spoken to one JSON-RPC line at a time. `env` adds
    variables to this process's (test switches); `stderr` is where its log goes (a file)."""

    def __init__(
        self,
        roots: Sequence[Path | str],
        *flags: str,
        env: dict[str, str] | None = None,
        stderr: Any = subprocess.DEVNULL,
        exec_: bool = False,
    ) -> None:
        self.process = popen(roots, *flags, env=env, exec_=exec_, stderr=stderr)
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.reader = threading.Thread(target=self.read_answers, daemon=True)
        self.reader.start()
        self.next_id = 0
        self.initialized = self.ask("initialize", self.hello())["result"]
        self.notify("notifications/initialized")

    @staticmethod
    def hello() -> dict[str, Any]:
        client = {"name": "raw-test", "version": "1"}
        return {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}

    @property
    def pid(self) -> int:
        return self.process.pid

    def read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(json.loads(line))

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; return its id (see `answer`)."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def call(self, name: str, **arguments: Any) -> int:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def cancel(self, request_id: int) -> None:
        self.notify("notifications/cancelled", {"requestId": request_id, "reason": "test"})

    def next_answer(self, timeout: float = CALL_TIMEOUT) -> dict[str, Any]:
        """The next answer (a response or an error) the server writes, notifications skipped."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            if "id" in message:
                return message

    def answer(self, request_id: int, timeout: float = CALL_TIMEOUT) -> dict[str, Any]:
        message = self.next_answer(timeout)
        assert message["id"] == request_id, f"expected the answer to {request_id}: {message}"
        return message

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer(self.request(method, params))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def tool_text(answer: dict[str, Any]) -> tuple[str, bool]:
    """(text, is_error) of a raw tools/call answer."""
    result = answer["result"]
    return "\n".join(block["text"] for block in result["content"]), bool(result.get("isError"))


@asynccontextmanager
async def forked_stdio(
    process: Launched,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The SDK's stdio_client over a process the launcher forked: its messages one JSON line
    each way, and at the end the same shutdown (stdin closed, then a grace period, then
    SIGTERM, then SIGKILL)."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), process.stdout)
    pipe, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, process.stdin)
    writer = asyncio.StreamWriter(pipe, protocol, None, loop)

    async def read_lines() -> None:
        try:
            async with read_writer:
                while line := await reader.readline():
                    try:
                        message = JSONRPCMessage.model_validate_json(line)
                    except Exception as error:  # as the SDK does: the session sees it
                        await read_writer.send(error)
                        continue
                    await read_writer.send(SessionMessage(message))
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def write_lines() -> None:
        try:
            async with write_reader:
                async for sent in write_reader:
                    text = sent.message.model_dump_json(by_alias=True, exclude_none=True)
                    writer.write(text.encode() + b"\n")
                    await writer.drain()
        except (anyio.ClosedResourceError, ConnectionError):
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        try:
            yield read_stream, write_stream
        finally:
            writer.close()  # MCP's shutdown: the server's stdin ends
            await asyncio.to_thread(ended, process)
            await read_stream.aclose()
            await write_stream.aclose()
            await read_writer.aclose()
            await write_reader.aclose()


def ended(process: Launched) -> None:
    """Wait for a server whose stdin is closed; terminate it, then kill it, if it stays."""
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            stop()
        try:
            process.wait(EXIT_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()
