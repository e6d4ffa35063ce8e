"""MCP over stdio, answering every line it cannot decode with a JSON-RPC error.

The SDK's `stdio_server` turns bytes that are not UTF-8 into U+FFFD without a word, and a line
it cannot parse (a lone surrogate such as `\\ud800`, cut-off JSON, a message that is not
JSON-RPC) into a log notification: the request that sent it never gets an answer, so its
client waits for good. Here each line is decoded strictly; a line that fails gets an error
answer with the request's id when one can be read from it (`null` when none can), and the
server goes on with the next line. A line longer than MAX_LINE_BYTES is refused the same way
without being held in memory.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

logger = logging.getLogger("fsagent.filesystem")

MAX_LINE_BYTES = 64 * 1024 * 1024
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
# The id of a request whose JSON does not parse, read from its text (the first "id" member).
ID_IN_TEXT = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\\r\n]|\\.){0,200}")')


def request_id(line: bytes) -> int | str | None:
    """The id of the request on `line`, if one can be read from it."""
    try:
        message = json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError:
        found = ID_IN_TEXT.search(line)
        if found is None:
            return None
        try:
            message = {"id": json.loads(found.group(1).decode("utf-8", "surrogateescape"))}
        except ValueError:
            return None
    if not isinstance(message, dict):
        return None
    found_id = message.get("id")
    if isinstance(found_id, bool) or not isinstance(found_id, int | str):
        return None
    if isinstance(found_id, str) and not found_id.isprintable():
        return None  # a lone surrogate or a control character cannot go back out as it is
    return found_id


def error_line(line: bytes, code: int, message: str) -> bytes:
    answer: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id(line),
        "error": {"code": code, "message": message},
    }
    return json.dumps(answer).encode("utf-8") + b"\n"


def decode(line: bytes) -> types.JSONRPCMessage | bytes:
    """The message on `line`, or the error line that answers it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        reason = f"Parse error: the request is not UTF-8 (byte {error.start})"
        return error_line(line, PARSE_ERROR, reason)
    try:
        return types.JSONRPCMessage.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            return error_line(line, PARSE_ERROR, f"Parse error: {first['msg']}")
        return error_line(line, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")


def encode(message: SessionMessage) -> bytes:
    try:
        return message.message.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"
    except (ValueError, UnicodeEncodeError) as error:  # never expected: answers are escaped
        logger.error("cannot encode an answer: %s", error)
        root = message.message.root
        answer_id = getattr(root, "id", None)
        answer = {
            "jsonrpc": "2.0",
            "id": answer_id if isinstance(answer_id, int | str) else None,
            "error": {"code": INTERNAL_ERROR, "message": "Internal error: answer not encodable"},
        }
        return json.dumps(answer).encode("utf-8") + b"\n"


class LineWriter:
    """Whole lines to stdout, one writer at a time."""

    def __init__(self, stdout: BinaryIO) -> None:
        self.stdout = anyio.wrap_file(stdout)
        self.lock = anyio.Lock()

    async def write(self, line: bytes) -> None:
        async with self.lock:
            await self.stdout.write(line)
            await self.stdout.flush()


async def read_lines(stdin: BinaryIO) -> AsyncIterator[tuple[bytes, bool]]:
    """(line, too_long) for each line of stdin; a line over MAX_LINE_BYTES is skipped to its
    end, and only its head is given, to read an id from."""

    async def readline() -> bytes:
        read = stdin.readline
        return await anyio.to_thread.run_sync(read, MAX_LINE_BYTES, abandon_on_cancel=True)

    while line := await readline():
        if line.endswith(b"\n") or len(line) < MAX_LINE_BYTES:
            yield line, False
            continue
        while (rest := await readline()) and not rest.endswith(b"\n"):
            pass
        yield line[:4096], True


@asynccontextmanager
async def stdio_streams(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[Any]]
]:
    """The (read, write) streams an MCP server runs on, over stdin and stdout."""
    writer = LineWriter(stdout or sys.stdout.buffer)
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_requests() -> None:
        async with incoming_writer:
            async for line, too_long in read_lines(stdin or sys.stdin.buffer):
                if too_long:
                    reason = f"Invalid Request: a request is limited to {MAX_LINE_BYTES:,} bytes"
                    await writer.write(error_line(line, INVALID_REQUEST, reason))
                    continue
                if not line.strip():
                    continue
                decoded = decode(line)
                if isinstance(decoded, bytes):
                    logger.warning("undecodable request: %s", decoded.decode().strip())
                    await writer.write(decoded)
                    continue
                await incoming_writer.send(SessionMessage(decoded))

    async def write_answers() -> None:
        async with outgoing_reader:
            async for message in outgoing_reader:
                await writer.write(encode(message))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_requests)
        tasks.start_soon(write_answers)
        # The session closes both streams when it ends, which ends both tasks.
        yield incoming, outgoing
