"""The client's cancels (`notifications/cancelled`), handled here and never by the MCP SDK.

The SDK (1.30) cancels a request by cancelling the scope its handler runs in, and answers it
itself. A cancel that arrives once the handler has begun to answer (a call answered `busy:`
at once, or any call just finishing) lets that cancellation escape the handler:
`RequestResponder.__exit__` drops what the scope's `__exit__` returns (python-sdk#2610), the
server's task group takes it for its own and ends, and the next line read from stdin meets a
closed stream (`anyio.BrokenResourceError`): the server is gone. Such a cancel also answered a
call twice, its result and "Request cancelled" (python-sdk#2416).

So the transport (`stdio_transport.py`) keeps every cancel from the SDK. It answers a cancelled
request that is still waiting for its answer once, as the SDK would (error code 0, "Request
cancelled"), drops the answer its handler makes later, and cancels the call here: the runner
(`tool_runner.py`) stops waiting for its work, which stops at its next budget check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from mcp.server.lowlevel.server import request_ctx

RequestId = int | str


class Cancels:
    """The calls running for each request id, and the ids cancelled before their call began."""

    def __init__(self) -> None:
        self.running: dict[RequestId, list[anyio.CancelScope]] = {}
        self.early: Counter[RequestId] = Counter()

    def cancel(self, request_id: RequestId) -> None:
        """On the event loop: the client cancelled `request_id`, which is not answered yet."""
        scopes = self.running.get(request_id)
        if not scopes:
            self.early[request_id] += 1  # its call has not started: it stops as it starts
            return
        for scope in scopes:
            scope.cancel()

    def forget(self, request_id: RequestId) -> None:
        """The cancelled request's handler is done: a later request may use its id again."""
        self.early.pop(request_id, None)

    @contextmanager
    def watch(self, request_id: RequestId | None) -> Iterator[anyio.CancelScope]:
        """A scope around one call, cancelled when the client cancels its request."""
        with anyio.CancelScope() as scope:
            if request_id is None:  # not called through a session: nothing can cancel it
                yield scope
                return
            if self.early[request_id]:  # (reading a Counter adds no key)
                self.early[request_id] -= 1
                scope.cancel()
            self.running.setdefault(request_id, []).append(scope)
            try:
                yield scope
            finally:
                scopes = self.running[request_id]
                scopes.remove(scope)
                if not scopes:
                    del self.running[request_id]


def current_request_id() -> RequestId | None:
    """The id of the request the running handler answers, if it runs in a session."""
    try:
        return request_ctx.get().request_id
    except LookupError:
        return None
