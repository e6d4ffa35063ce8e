"""Start the real filesystem server over stdio and call it with the MCP SDK client.

`FilesystemServer` keeps one server process and one client session open on an event loop in
a background thread, so synchronous tests can share a server (starting one costs ~0.5 s).
`RawServer` speaks the JSON-RPC lines itself, for what the SDK client will not send: pings
mid-call, cancellations, bytes that are not JSON.
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
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent, Tool

REPO = Path(__file__).resolve().parent.parent
# mcp_servers/platform_calls.py: set, the server runs as if O_PATH and preadv did not exist.
PORTABLE_ENV = "FSAGENT_PORTABLE_CALLS"
# mcp_servers/kernel_sandbox.py: 0, the server runs without Landlock (its own checks alone).
LANDLOCK_ABI_ENV = "FSAGENT_LANDLOCK_ABI"
# mcp_servers/journal.py: where the server's journals live (the test's own data folder).
JOURNAL_ENV = "FSAGENT_JOURNAL_DIR"
PASSED = (PORTABLE_ENV, LANDLOCK_ABI_ENV, JOURNAL_ENV, "XDG_DATA_HOME")
CALL_TIMEOUT = 60.0


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
    ) -> None:
        self.parameters = server_parameters(roots, *flags, wrapper=wrapper, env=env)
        self.command = server_command(roots, *flags)
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close())
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
            async with stdio_client(self.parameters, errlog=self.stderr) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.opened.set_result(session)
                    await self.stop.wait()
        except BaseException as error:
            if not self.opened.done():
                self.opened.set_exception(error)
            raise

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
            self.stderr.close()

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
    ) -> None:
        self.process = subprocess.Popen(
            server_command(roots, *flags),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **env} if env else None,
        )
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
