"""One line per request on stderr: time, method, path, status, duration and thread, never a
body or an argument. Also the last stop for an error no route handled: the client gets a 500
with one line, and the log a traceback only with --verbose."""

from __future__ import annotations

import re
import sys
import time
import traceback
from typing import TextIO
from urllib.parse import unquote

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

THREAD_IN_PATH = re.compile(r"^/api/(?:admin/approvals|threads)/([^/]+)")
PATH_SHOWN = 200


def printable(text: str, limit: int = PATH_SHOWN) -> str:
    """A path as a log line may show it: control characters escaped (a path is the client's
    text, and a newline in it must not forge a second line), cut visibly."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return shown if len(shown) <= limit else f"{shown[:limit]}…"


def thread_of(path: str) -> str | None:
    found = THREAD_IN_PATH.match(path)
    return unquote(found.group(1)) if found else None


class AccessLog:
    def __init__(self, app: ASGIApp, *, verbose: bool = False, out: TextIO | None = None) -> None:
        self.app = app
        self.verbose = verbose
        self.out = out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status: list[int] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            self.log_error(scope, error)
            if not status:
                response = JSONResponse(
                    {"error": f"internal error: {type(error).__name__}: {error}"[:300]}, 500
                )
                await response(scope, receive, sending)
        finally:
            self.log(scope, status[0] if status else 0, time.monotonic() - started)

    def log(self, scope: Scope, status: int, seconds: float) -> None:
        path = scope.get("path", "")
        thread = thread_of(path)
        line = (
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} {scope.get('method')} {printable(path)} "
            f"{status or '-'} {seconds:.3f}s"
        )
        if thread is not None:
            line += f" thread={printable(thread, 80)}"
        self.write(line)

    def log_error(self, scope: Scope, error: Exception) -> None:
        self.write(f"fsagent serve: error in {scope.get('method')} {printable(scope['path'])}: "
                   f"{type(error).__name__}: {printable(str(error))}")  # fmt: skip
        if self.verbose:
            traceback.print_exc(file=self.out or sys.stderr)

    def write(self, line: str) -> None:
        print(line, file=self.out or sys.stderr, flush=True)
