"""Start the real filesystem server over stdio and call it with the MCP SDK client.

`FilesystemServer` keeps one server process and one client session open on an event loop in
a background thread, so synchronous tests can share a server (starting one costs ~0.5 s).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent, Tool

REPO = Path(__file__).resolve().parent.parent
CALL_TIMEOUT = 60.0


def server_parameters(roots: Sequence[Path | str], *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_servers.filesystem", *flags, *map(str, roots)],
        cwd=str(REPO),
    )


@dataclass(frozen=True)
class Result:
    text: str
    is_error: bool


def as_result(result: CallToolResult) -> Result:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return Result(text="\n".join(texts), is_error=bool(result.isError))


class FilesystemServer:
    """One server process with one open session, usable from synchronous code."""

    def __init__(self, roots: Sequence[Path | str], *flags: str) -> None:
        self.parameters = server_parameters(roots, *flags)
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
