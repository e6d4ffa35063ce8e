"""The stdio pipe to our MCP server, started before anything heavy is imported.

The MCP SDK's `stdio_client` can only start the server once the SDK itself is imported, and
the server then spends about as long importing the same SDK on the other core. Starting the
process with the standard library first lets both imports run side by side; this module then
speaks MCP's stdio framing (one JSON-RPC message per line) over the pipes the SDK's
`ClientSession` expects, as `stdio_client` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import IO, Any

# Reads are capped at 256 KiB of text per answer, and JSON escaping can double that; a line
# limit well above it keeps a large answer from being cut mid-message.
LINE_LIMIT = 16 * 1024 * 1024
EXIT_GRACE_SECONDS = 2.0


async def start_server(
    command: str, args: list[str], env: dict[str, str], cwd: str, errlog: IO[Any] | int
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=cwd,
        limit=LINE_LIMIT,
    )


@contextlib.asynccontextmanager
async def session_streams(process: asyncio.subprocess.Process) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams `mcp.ClientSession` takes, over the server's stdout/stdin.

    On exit the server's stdin is closed (MCP's shutdown signal); a server that has not left
    after a grace period is terminated, then killed.
    """
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)

    async def server_to_session() -> None:
        assert process.stdout is not None
        async with to_session:
            while line := await process.stdout.readline():
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


async def stop_server(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        try:
            await asyncio.wait_for(process.wait(), EXIT_GRACE_SECONDS)
            return
        except TimeoutError:
            continue
