"""MCP's stdio framing (one JSON-RPC message per line) over the pipes of a server process we
started ourselves (see core.tools.server_process), as the streams `mcp.ClientSession` expects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import types
from mcp.shared.message import SessionMessage

from core.tools.server_process import stop_server


@contextlib.asynccontextmanager
async def session_streams(process: asyncio.subprocess.Process) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams `mcp.ClientSession` takes, over the server's stdout/stdin.
    On exit the server is stopped."""
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)

    async def server_to_session() -> None:
        assert process.stdout is not None
        async with to_session:
            while True:
                try:
                    line = await process.stdout.readline()
                except ValueError:
                    # One message over LINE_LIMIT (another server's 50 MB answer): the pipe
                    # cannot be read in step again, so the session ends here (its waiting
                    # calls fail, each in one line) and the server is stopped; the process
                    # and every other server go on.
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    break
                if not line:
                    break
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except ValueError as error:  # the session reports it; the pipe goes on
                    await to_session.send(error)
                    continue
                await to_session.send(SessionMessage(message))

    async def session_to_server() -> None:
        assert process.stdin is not None
        async with from_session:
            async for session_message in from_session:
                data = session_message.message.model_dump_json(by_alias=True, exclude_none=True)
                process.stdin.write(data.encode() + b"\n")
                await process.stdin.drain()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server_to_session)
        tasks.start_soon(session_to_server)
        try:
            yield read_stream, write_stream
        finally:
            await stop_server(process)
            tasks.cancel_scope.cancel()
