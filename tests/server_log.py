"""The filesystem server's stderr log (run with --verbose), read line by line by a thread of its
own, so a test can wait for the line that says a step happened (no sleep, no timing).
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading

import pytest

# Only a guard against a log line that never comes (the test then fails, saying so).
NEVER_SEEN_SECONDS = 60.0
SLOTS = re.compile(r"tool slots: (\d+) of \d+ taken, (\d+) of them stopping \((\w+): ([\w ]+)\)")


class Log:
    """The server's stderr, line by line, read by a thread of its own."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        self.stream = process.stderr
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        for line in self.stream:
            self.lines.put(line.decode(errors="replace"))

    def until(self, wanted: re.Pattern[str] | str) -> re.Match[str]:
        """The next line that matches `wanted` (every line before it is passed over)."""
        pattern = re.compile(wanted) if isinstance(wanted, str) else wanted
        while True:
            try:
                line = self.lines.get(timeout=NEVER_SEEN_SECONDS)
            except queue.Empty:
                pytest.fail(f"the server never logged {pattern.pattern!r}")
            found = pattern.search(line)
            if found:
                return found

    def slots_after(self, tool: str, event: str) -> int:
        """Once `tool`'s slot has seen `event`, the first count of 0 slots taken: every
        change of the count is logged in the loop's order, so what comes after a line is
        later. Fails (at the guard) when the count never comes back to 0."""
        while (found := self.until(SLOTS)).group(3, 4) != (tool, event):
            pass
        while int(found.group(1)) != 0:
            found = self.until(SLOTS)
        return int(found.group(2))
