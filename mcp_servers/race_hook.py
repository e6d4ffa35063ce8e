"""A test-only pause between a write tool's check and its act, so a test can change the tree
at exactly that point, with no sleep and no timing.

Set FSAGENT_TEST_PAUSE to a folder holding two FIFOs, `paused` and `go`, before the server
starts. Then, right before each act on a checked entry (capture.py), the server writes the line
`paused <tool> <argument>` to `paused` and waits for the line `go` on `go`. Both are opened at
start, before any root is served (so a restriction set up later, such as Landlock's, which
forbids opening anything outside the roots, cannot stop the hook), and read-write, so neither
open waits for the test's end of the FIFO.

Unset, the hook is one test of a module global per act: it costs nothing.
"""

from __future__ import annotations

import os
import threading

PAUSE_ENV = "FSAGENT_TEST_PAUSE"
GO = b"go\n"


class Hook:
    """The two FIFOs, held open; one paused call at a time."""

    def __init__(self, folder: str) -> None:
        flags = os.O_RDWR | os.O_CLOEXEC
        self.paused = os.open(os.path.join(folder, "paused"), flags)
        self.go = os.open(os.path.join(folder, "go"), flags)
        self.lock = threading.Lock()

    def pause(self, tool: str, argument: str) -> None:
        with self.lock:
            os.write(self.paused, f"paused {tool} {argument}\n".encode())
            answer = b""
            while not answer.endswith(b"\n"):
                answer += os.read(self.go, 1)
            if answer != GO:
                raise RuntimeError(f"{PAUSE_ENV}: expected 'go', read {answer!r}")


_hook: Hook | None = None


def open_from_environment() -> None:
    """Open the hook's FIFOs if FSAGENT_TEST_PAUSE names a folder; call it first thing."""
    global _hook
    folder = os.environ.get(PAUSE_ENV)
    if folder:
        _hook = Hook(folder)


def pause(tool: str, argument: str) -> None:
    """Wait here for the test, when the hook is set (never in normal use)."""
    if _hook is not None:
        _hook.pause(tool, argument)
