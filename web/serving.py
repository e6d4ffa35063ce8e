"""Running the app under uvicorn: the listening socket, and a clean stop on SIGTERM or Ctrl-C.

uvicorn, told to stop, waits for every open response to finish; a turn that streams would
keep it waiting as long as the model talks. So the signal first cuts off every running turn
the way Ctrl-C cuts one at the terminal (each closes its thread and ends its stream), then
uvicorn stops as usual, and the command line closes the store and the MCP server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from fastapi import FastAPI

from core.errors import StartupError
from web.runs import Runs

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Past this, uvicorn cancels what still runs; cut-off turns end well before.
GRACEFUL_SECONDS = 30
STOPPING = "the server is stopping"
# A request's line and headers must arrive within this many seconds of the connection (or of
# the last response on it): a client trickling a header a minute holds no socket for good.
# uvicorn has no such limit (its keep-alive timer starts only after a first response), so
# `close_late_requests` keeps it; the body's own is web.bodies.BODY_SECONDS. The tests
# shorten both.
HEADER_SECONDS = float(os.environ.get("FSAGENT_HEADER_SECONDS") or 10)
# Headers past this size are refused (431) by h11 itself.
MAX_HEADER_BYTES = 64 * 1024


async def close_late_requests(server: uvicorn.Server, limit: float = HEADER_SECONDS) -> None:
    """Close each connection that has been without a request in progress for `limit`
    seconds: one whose request line and headers never end (h11 makes no request of them
    until they do), or that sits idle. A connection serving a request is left alone (the
    body's own limit, a stream's keep-alive); uvicorn's keep-alive timer still closes idle
    ones sooner. Checked every `limit / 4` seconds, so a late one lives at most 1.25x."""
    idle_since: dict[int, float] = {}
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(limit / 4)
        now = loop.time()
        seen = set()
        for protocol in list(server.server_state.connections):
            key = id(protocol)
            seen.add(key)
            cycle = getattr(protocol, "cycle", None)
            if cycle is not None and not cycle.response_complete:
                idle_since.pop(key, None)  # serving a request
                continue
            since = idle_since.setdefault(key, now)
            transport = getattr(protocol, "transport", None)
            if now - since >= limit and transport is not None and not transport.is_closing():
                transport.write(LATE)
                transport.close()
        for key in set(idle_since) - seen:
            del idle_since[key]


LATE = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything slow starts: a port in use is the news.
    Port 0 takes a free one (the socket says which)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    except OSError as error:
        sock.close()
        raise StartupError(
            f"cannot listen on {host}:{port}: {error.strerror}; pass another --host or --port"
        ) from error
    sock.set_inheritable(True)
    return sock


class Server(uvicorn.Server):
    """uvicorn's server, which cuts off the running turns when it is told to stop."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self.stopped_by: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
            self.on_stop()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn's own raises the signal again once it has stopped, which would end the
        # process before the store and the MCP server are closed; the exit code says it.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def run_server(app: FastAPI, sock: socket.socket, *, verbose: bool = False) -> int:
    """Serve until SIGTERM (exit code 0) or Ctrl-C (130)."""
    runs: Runs = app.state.runs
    loop = asyncio.get_running_loop()

    def on_stop() -> None:  # in the signal handler: hand it to the loop
        loop.call_soon_threadsafe(runs.cut_off_all, STOPPING)

    config = uvicorn.Config(
        app,
        log_level="info" if verbose else "warning",
        access_log=False,  # ours is one line per request, with the thread (web.access_log)
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    server = Server(config, on_stop)
    sweeper = asyncio.create_task(close_late_requests(server))
    try:
        await server.serve(sockets=[sock])
    finally:
        sweeper.cancel()
    return 130 if server.stopped_by == signal.SIGINT else 0
