"""MCP over stdio, answering every line it cannot decode with a JSON-RPC error.

The SDK's `stdio_server` turns bytes that are not UTF-8 into U+FFFD without a word, and a line
it cannot parse (a lone surrogate such as `\\ud800`, cut-off JSON, a message that is not
JSON-RPC) into a log notification: the request that sent it never gets an answer, so its
client waits for good. Here each line is decoded strictly; a line that fails gets an error
answer with the request's id when one can be read from it (`null` when none can), and the
server goes on with the next line. A line longer than MAX_LINE_BYTES is refused the same way
without being held in memory, and so is a line holding more JSON values than a request may
(`request_limits.py`), before its JSON is built.

Backpressure: the requests read and not yet answered are counted, with their size. While too
many are in flight (their answers are being worked out, or cannot be written because the
client does not read them), no more lines are read, so memory stays bounded whatever the client
sends or leaves unread.

Cancels (`notifications/cancelled`) are handled here and never reach the SDK (`cancels.py` says
why): a request still waiting for its answer is answered "Request cancelled" at once, its call
is told to stop, and the answer its handler makes later is dropped, so every request gets
exactly one answer. A cancel of an answered or unknown request, a second one, or one whose
request id cannot be read changes nothing.

A client that leaves (stdin closed, stdout a broken pipe) ends the server quietly. A client
that closes our stdout with no answer left to write is seen too (`watch_for_hang_up`): a
server that learnt of it only at its next answer waited on stdin for good.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import re
import select
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcp_servers import race_hook
from mcp_servers.cancels import Cancels, RequestId
from mcp_servers.request_limits import MAX_LINE_BYTES, too_large

logger = logging.getLogger("fsagent.filesystem")

MAX_IN_FLIGHT = 64  # requests read and not yet answered
IN_FLIGHT_WEIGHT = 48 * 1024 * 1024  # their bytes, plus VALUE_WEIGHT for each JSON mark
VALUE_WEIGHT = 256  # about what one parsed JSON value costs in memory, in bytes
PARSE_ON_THE_LOOP_UP_TO = 1024 * 1024  # longer lines are checked and parsed in a thread
UTF8_STEP = 1024 * 1024  # a line is checked as UTF-8 this many bytes at a time
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
CANCELLED = 0  # the code the MCP SDK answers a cancelled request with
CANCEL_METHOD = "notifications/cancelled"
ANSWERS = (types.JSONRPCResponse, types.JSONRPCError)
# The id of a request whose JSON does not parse, read from its text (the first "id" member).
ID_IN_TEXT = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\\r\n]|\\.){0,200}")')


def request_id(line: bytes, parse: bool = True) -> int | str | None:
    """The id of the request on `line`, if one can be read from it; without `parse` it is
    looked for in the text only (a line refused for its size is never parsed)."""
    try:
        if not parse:
            raise ValueError("not parsed")
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


def error_line(line: bytes, code: int, message: str, parse: bool = True) -> bytes:
    answer: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id(line, parse),
        "error": {"code": code, "message": message},
    }
    return json.dumps(answer).encode("utf-8") + b"\n"


def not_utf8_at(line: bytes) -> int | None:
    """The offset of the first byte of `line` that is not UTF-8, or None. Checked a step at a
    time, so a long line never exists as a str as well (up to four times its size)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    for start in range(0, len(line), UTF8_STEP):
        pending = len(decoder.getstate()[0])  # bytes of a character cut at the last step
        try:
            decoder.decode(line[start : start + UTF8_STEP], final=start + UTF8_STEP >= len(line))
        except UnicodeDecodeError as error:
            return start - pending + error.start
    return None


def decode(line: bytes) -> types.JSONRPCMessage | bytes:
    """The message on `line`, or the error line that answers it."""
    bad_byte = not_utf8_at(line)
    if bad_byte is not None:
        reason = f"Parse error: the request is not UTF-8 (byte {bad_byte})"
        return error_line(line, PARSE_ERROR, reason)
    refused = too_large(line)
    if refused is not None:
        return error_line(line, INVALID_REQUEST, refused, parse=False)
    try:
        return types.JSONRPCMessage.model_validate_json(line)
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


class ClientGone(Exception):
    """The client no longer reads our answers (stdout is a broken pipe)."""


class LineWriter:
    """Whole lines to stdout, one writer at a time."""

    def __init__(self, stdout: BinaryIO) -> None:
        self.stdout = anyio.wrap_file(stdout)
        self.lock = anyio.Lock()

    async def write(self, line: bytes) -> None:
        async with self.lock:
            try:
                await self.stdout.write(line)
                await self.stdout.flush()
            except (BrokenPipeError, ConnectionResetError):
                raise ClientGone() from None


async def read_lines(stdin: BinaryIO) -> AsyncIterator[tuple[bytes, bool]]:
    """(line, too_long) for each line of stdin; a line over MAX_LINE_BYTES is skipped to its
    end, and only its head is given, to read an id from."""
    async with stdin_lines(stdin) as readline:
        while line := await readline():
            if line.endswith(b"\n") or len(line) < MAX_LINE_BYTES:
                yield line, False
                continue
            while (rest := await readline()) and not rest.endswith(b"\n"):
                pass
            yield line[:4096], True


def own_stdin() -> BinaryIO:
    """A reader of fd 0 of our own: the reading thread may be blocked in it when the
    interpreter exits, and `sys.stdin`, which the exit flushes, must not be the one it holds."""
    return open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115 (lives with the process)


@asynccontextmanager
async def stdin_lines(stdin: BinaryIO) -> AsyncIterator[Callable[[], Awaitable[bytes]]]:
    """A function that returns stdin's next line (b"" at its end), read by a thread of its own.

    The thread is a daemon: a read that blocks on a client that keeps stdin open but left
    otherwise (it closed our stdout) never keeps the server from exiting, as a worker thread
    of anyio's would. It reads one line ahead at most: lines are handed over one at a time.
    """
    handed, lines = anyio.create_memory_object_stream[bytes | OSError](0)
    token = anyio.lowlevel.current_token()

    def read_all() -> None:
        try:
            while line := stdin.readline(MAX_LINE_BYTES):
                anyio.from_thread.run(handed.send, line, token=token)
            anyio.from_thread.run(handed.send, b"", token=token)
        except OSError as error:
            with suppress(Exception):
                anyio.from_thread.run(handed.send, error, token=token)
        except Exception:  # noqa: BLE001 (the loop is gone or stopped reading: nothing to tell)
            return

    threading.Thread(target=read_all, name="fsagent-stdin", daemon=True).start()

    async def readline() -> bytes:
        line = await lines.receive()
        if isinstance(line, OSError):
            raise line
        return line

    with lines, handed:
        yield readline


HANG_UP = select.POLLERR | select.POLLHUP


def hung_up(fd: int) -> bool:
    """Wait until the reader of `fd` (a pipe or a socket) has gone; False at once when poll
    cannot watch `fd`. Asking for no event, only the ones poll always reports, a regular file
    or /dev/null is never ready: that wait lasts for good, in a daemon thread."""
    watch = select.poll()
    watch.register(fd, 0)
    while True:
        try:
            ready = watch.poll()
        except OSError:
            return False
        if any(events & HANG_UP for _, events in ready):
            return True
        if any(events & select.POLLNVAL for _, events in ready):
            return False


def watch_for_hang_up(stdout: BinaryIO, gone: anyio.Event) -> None:
    """Set `gone` once the client closes its end of our stdout, from a daemon thread of its
    own. Without it a client that closed our stdout after its last answer, keeping stdin
    open, was noticed only at the next answer: never, so the server waited on stdin for
    good (the answer and the close race: tests/mcp_servers/test_cancels.py). The thread
    hands the news to the loop without waiting for it (a loop already stopped is fine)."""
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's buffer): nothing to watch
        return
    loop = asyncio.get_running_loop()

    def watch() -> None:
        if hung_up(fd):
            with suppress(RuntimeError):  # the loop is closed: the server is stopping
                loop.call_soon_threadsafe(gone.set)

    threading.Thread(target=watch, name="fsagent-stdout-watch", daemon=True).start()


class InFlight:
    """The requests read and not yet answered: how many, and what they weigh."""

    def __init__(self) -> None:
        self.weights: dict[int | str, list[int]] = {}
        self.cancelled: dict[int | str, int] = {}  # answered cancelled; their answers to drop
        self.count = 0
        self.weight = 0
        self.changed = anyio.Event()

    def has_room(self, weight: int) -> bool:
        if self.count == 0:
            return True  # one request of any size the line cap lets through
        return self.count < MAX_IN_FLIGHT and self.weight + weight <= IN_FLIGHT_WEIGHT

    async def admit(self, request_id: int | str, weight: int) -> None:
        """Wait until there is room for one more request, then count it in."""
        while not self.has_room(weight):
            await self.changed.wait()
        self.weights.setdefault(request_id, []).append(weight)
        self.count += 1
        self.weight += weight

    def cancel(self, request_id: RequestId) -> int:
        """How many requests with this id are now answered as cancelled (0: none waits)."""
        waiting = len(self.weights.get(request_id, ())) - self.cancelled.get(request_id, 0)
        if waiting > 0:
            self.cancelled[request_id] = self.cancelled.get(request_id, 0) + waiting
        return max(waiting, 0)

    def was_cancelled(self, request_id: object) -> bool:
        """The request was answered as cancelled (its handler's answer will be dropped)."""
        return isinstance(request_id, int | str) and request_id in self.cancelled

    def goes_out(self, request_id: object) -> bool:
        """An answer to `request_id` is about to go out: counted as answered, and False when
        the request was answered as cancelled already (its room is freed only now, when its
        handler is really done)."""
        self.answered(request_id)
        if not isinstance(request_id, int | str) or request_id not in self.cancelled:
            return True
        self.cancelled[request_id] -= 1
        if not self.cancelled[request_id]:
            del self.cancelled[request_id]
        return False

    def answered(self, request_id: object) -> None:
        if not isinstance(request_id, int | str) or request_id not in self.weights:
            return
        waiting = self.weights[request_id]
        self.weight -= waiting.pop()
        self.count -= 1
        if not waiting:
            del self.weights[request_id]
        self.changed.set()
        self.changed = anyio.Event()


def cancelled_id(message: types.JSONRPCNotification) -> RequestId | None:
    """The request id a cancel names, None when it names none that can be read."""
    params = message.params or {}
    found = params.get("requestId")
    if isinstance(found, bool) or not isinstance(found, int | str):
        logger.warning("a cancel without a request id (requestId: %.100r) was ignored", found)
        return None
    return found


def cancelled_line(request_id: RequestId) -> bytes:
    answer = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": CANCELLED, "message": "Request cancelled"},
    }
    return json.dumps(answer).encode("utf-8") + b"\n"


def weight_of(line: bytes) -> int:
    """What holding the request on `line` costs, about: its bytes and its parsed values."""
    return len(line) + VALUE_WEIGHT * (line.count(b",") + line.count(b":"))


@asynccontextmanager
async def stdio_streams(
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    cancels: Cancels | None = None,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[Any]]
]:
    """The (read, write) streams an MCP server runs on, over stdin and stdout."""
    stdout = stdout or sys.stdout.buffer
    writer = LineWriter(stdout)
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
    in_flight = InFlight()
    cancels = cancels or Cancels()

    async def cancel(message: types.JSONRPCNotification) -> None:
        request_id = cancelled_id(message)
        if request_id is None:
            return
        answered = in_flight.cancel(request_id)
        for _ in range(answered):
            cancels.cancel(request_id)
            await writer.write(cancelled_line(request_id))
        logger.info("cancel of request %s: %d answered as cancelled", request_id, answered)

    async def read_requests() -> None:
        async with incoming_writer:
            async for line, too_long in read_lines(stdin or own_stdin()):
                if too_long:
                    reason = (
                        f"Invalid Request: a request is limited to {MAX_LINE_BYTES:,} bytes; "
                        "split the work into smaller calls"
                    )
                    await writer.write(error_line(line, INVALID_REQUEST, reason))
                    continue
                if not line.strip():
                    continue
                if len(line) > PARSE_ON_THE_LOOP_UP_TO:  # the loop goes on answering meanwhile
                    decoded = await anyio.to_thread.run_sync(decode, line)
                else:
                    decoded = decode(line)
                if isinstance(decoded, bytes):
                    logger.warning("undecodable request: %s", decoded.decode()[:300].strip())
                    await writer.write(decoded)
                    continue
                root = decoded.root
                if isinstance(root, types.JSONRPCNotification) and root.method == CANCEL_METHOD:
                    await cancel(root)
                    continue
                if isinstance(root, types.JSONRPCRequest):
                    await in_flight.admit(root.id, weight_of(line))
                del line
                await incoming_writer.send(SessionMessage(decoded))

    async def write_answers() -> None:
        async with outgoing_reader:
            async for message in outgoing_reader:
                root = message.message.root
                if isinstance(root, ANSWERS) and in_flight.was_cancelled(root.id):
                    # A test can hold it here, the loop reading on (race_hook.py).
                    await race_hook.pause_before_dropping(root.id)
                # Decided before the write, so a cancel read meanwhile finds it answered.
                if isinstance(root, ANSWERS) and not in_flight.goes_out(root.id):
                    cancels.forget(root.id)
                    continue
                await writer.write(encode(message))

    watching = anyio.CancelScope()

    async def hang_up() -> None:
        """Ends when the client closes our stdout, answers or not (see watch_for_hang_up);
        cancelled when the session ends otherwise."""
        with watching:
            gone = anyio.Event()
            watch_for_hang_up(stdout, gone)
            await gone.wait()
            raise ClientGone()

    async def until_the_client_leaves(work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except ClientGone:  # the session ends as if stdin had closed
            logger.info("the client stopped reading answers (stdout closed); stopping")
            tasks.cancel_scope.cancel()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(until_the_client_leaves, read_requests)
        tasks.start_soon(until_the_client_leaves, write_answers)
        tasks.start_soon(until_the_client_leaves, hang_up)
        # The session closes both streams when it ends, which ends both tasks.
        try:
            yield incoming, outgoing
        finally:
            watching.cancel()
