"""The server's test-only pause (mcp_servers/race_hook.py), from the test's side: a write tool
stops right before it acts on each checked entry, the test changes the tree there, then lets
it go. No sleep, no timing: the server waits on a FIFO until the test writes `go`.

    with paused_server(tmp_path, root) as (server, pauses):
        call = pauses.start(server, "delete", path="big.bin", expect=...)
        pauses.reached("delete", "path")   # the server waits here
        ...swap the entry...
        result = pauses.finish(call)       # every later pause is let go at once

The same FIFOs serve the server's other hook (FSAGENT_TEST_RELEASE_PAUSE, before a call hands
its slot back) and the inbox stream's (FSAGENT_TEST_INBOX_PAUSE): `next_line` and `go` only.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_session import FilesystemServer, Result, as_result

PAUSE_ENV = "FSAGENT_TEST_PAUSE"
# Only a guard against a server that never pauses (the test then fails, saying so); a test
# that passes never waits on it.
NEVER_PAUSED_SECONDS = 60.0
STOP = b"stop\n"


class Pauses:
    """The two FIFOs of the hook, created before the server starts and held read-write."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        os.mkfifo(folder / "paused")
        os.mkfifo(folder / "go")
        self.folder = folder
        self.paused = os.open(folder / "paused", os.O_RDWR)
        self.go_fd = os.open(folder / "go", os.O_RDWR)
        self.seen: list[str] = []
        self.answerer: threading.Thread | None = None

    @property
    def env(self) -> dict[str, str]:
        return {PAUSE_ENV: str(self.folder)}

    def start(self, server: FilesystemServer, tool: str, **arguments: Any) -> Future[Any]:
        """Call a tool without waiting for its answer."""
        call = server.session.call_tool(tool, arguments)
        return asyncio.run_coroutine_threadsafe(call, server.loop)

    def next_line(self) -> str:
        ready, _, _ = select.select([self.paused], [], [], NEVER_PAUSED_SECONDS)
        assert ready, f"the server never paused (seen so far: {self.seen})"
        line = b""
        while not line.endswith(b"\n"):
            line += os.read(self.paused, 1)
        text = line.decode().rstrip("\n")
        self.seen.append(text)
        return text

    def reached(self, tool: str, argument: str) -> None:
        """Wait until the server pauses before acting on `argument` of `tool`; every
        earlier pause (another argument's) is let go."""
        wanted = f"paused {tool} {argument}"
        while (line := self.next_line()) != wanted:
            self.go()
        assert line == wanted

    def go(self) -> None:
        os.write(self.go_fd, b"go\n")

    def finish(self, call: Future[Any]) -> Result:
        """Let this pause go, and every later one, and return the call's answer."""
        self.go()
        self.answerer = threading.Thread(target=self.answer_all, daemon=True)
        self.answerer.start()
        try:
            return as_result(call.result(timeout=NEVER_PAUSED_SECONDS))
        finally:
            os.write(self.paused, STOP)
            self.answerer.join(timeout=NEVER_PAUSED_SECONDS)

    def answer_all(self) -> None:
        while True:
            line = b""
            while not line.endswith(b"\n"):
                line += os.read(self.paused, 1)
            if line == STOP:
                return
            self.seen.append(line.decode().rstrip("\n"))
            self.go()

    def close(self) -> None:
        os.close(self.paused)
        os.close(self.go_fd)


@contextmanager
def paused_server(
    tmp_path: Path, root: Path, *flags: str
) -> Iterator[tuple[FilesystemServer, Pauses]]:
    pauses = Pauses(tmp_path / "pause")
    try:
        with FilesystemServer([root], *flags, env=pauses.env) as server:
            yield server, pauses
    finally:
        pauses.close()
