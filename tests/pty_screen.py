"""fsagent at a terminal, for tests: the real CLI on a pseudo-terminal it owns, and a terminal
emulator (pyte) reading what it prints, the way a person's screen would show it.

- The process is a session leader whose controlling terminal is the pty, so Ctrl-C typed
  into it is SIGINT for its foreground process group, as at a real terminal (a child that
  merely inherits the pty as stdin gets no signal from it).
- The emulator answers cursor position requests (prompt_toolkit asks), as terminals do.
- `raw` keeps every byte written, to look for escape codes; `screen_text()` is what the
  screen shows, with the lines scrolled off the top before it, each line as it was written:
  a row the terminal wrapped is joined to the next, so what a test reads never depends on
  where a line happens to wrap (the length of a temp path in it decides that).

fsagent (`[sys.executable, agent.py, ...]`, or another of our scripts run so) is forked on
the pty from the test worker's launcher (tests/launcher.py), which has the libraries
imported: a real process in a session of its own whose controlling terminal is the pty, with
its own argv, folder, environment and umask, our modules imported afresh, and its MCP server
forked by the same launcher (tests/server_stub.py). It skips the one to two CPU seconds of
imports an exec pays. The one switch is `forked`: a test about start-up, `python agent.py`
itself, or which processes a signal from the terminal reaches passes `exec_=True`, and
FSAGENT_TEST_EXEC_AGENTS=1 execs every one of a run (to compare, or to rule the fork out).
Any other command is exec'd as it is. tests/terminal/test_forked_terminal.py holds the two
side by side.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyte
from launcher import AGENT, LAUNCHER, SHELL_DEFAULTS, Launched, agents_execd

ROWS, COLUMNS = 40, 120
HANG_GUARD = 120  # seconds: see PtyScreen.wait_for
# core/tools/server_process.py: the forked agent's MCP server is forked by the launcher too.
SERVER_LAUNCHER_ENV = "FSAGENT_TEST_SERVER_LAUNCHER"
ENTER = "\r"  # what a terminal sends for the Enter key
CTRL_C = "\x03"
CTRL_D = "\x04"
UP = "\x1b[A"


class _Screen(pyte.HistoryScreen):
    """pyte's screen, which also marks each row the terminal wrapped (a `wrapped` attribute on
    the row itself, so the mark moves with the row as the screen scrolls into the history)."""

    def __init__(self, answer: Callable[[str], None]) -> None:
        super().__init__(COLUMNS, ROWS, history=5000)
        self.answer = answer
        self._drawing = False

    def write_process_input(self, data: str) -> None:
        self.answer(data)

    def draw(self, data: str) -> None:
        self._drawing = True
        try:
            super().draw(data)
        finally:
            self._drawing = False

    def carriage_return(self) -> None:
        # While drawing text, only the automatic wrap at the last column returns the carriage:
        # the row under the cursor goes on in the next one.
        if self._drawing:
            _mark(self.buffer[self.cursor.y], wrapped=True)
        super().carriage_return()

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        super().erase_in_line(how, private)
        if how in (0, 2):  # the row's end is erased: whatever wrapped there is gone
            _mark(self.buffer[self.cursor.y], wrapped=False)

    def erase_in_display(self, how: int = 0, *args: object, **kwargs: object) -> None:
        rows = {0: range(self.cursor.y, self.lines), 1: range(self.cursor.y)}.get(
            how, range(self.lines)
        )
        super().erase_in_display(how, *args, **kwargs)
        for y in rows:
            _mark(self.buffer[y], wrapped=False)


def _mark(row: Any, wrapped: bool) -> None:
    row.wrapped = wrapped  # pyte's rows are dicts, which take attributes


def _logical_lines(rows: list[Any], columns: int) -> list[str]:
    """The rows' text, each wrapped row joined to the next (kept whole: its last cell is text)."""
    lines: list[str] = []
    pending = ""
    for row in rows:
        text = "".join(row[x].data for x in range(columns))
        if getattr(row, "wrapped", False):
            pending += text
        else:
            lines.append((pending + text).rstrip())
            pending = ""
    if pending:
        lines.append(pending.rstrip())
    return lines


def forked(command: list[str], *, exec_: bool = False) -> bool:
    """Whether `command` is forked from the launcher rather than exec'd (the module's doc):
    one of our Python scripts, run by this interpreter."""
    ours = (
        len(command) >= 2
        and command[0] == sys.executable
        and command[1].endswith(".py")
        and Path(command[1]).resolve().is_relative_to(AGENT.parent)
    )
    return ours and not agents_execd(exec_)


class PtyScreen:
    def __init__(
        self, command: list[str], cwd: str, env: dict[str, str], *, exec_: bool = False
    ) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        environment = {"TERM": "xterm-256color", **env}
        self.process: subprocess.Popen[bytes] | Launched
        try:
            if forked(command, exec_=exec_):
                environment[SERVER_LAUNCHER_ENV] = LAUNCHER.started()
                self.process = LAUNCHER.on_terminal(
                    command[2:], slave, env=environment, cwd=cwd, script=command[1]
                )
            else:
                self.process = subprocess.Popen(
                    command,
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    cwd=cwd,
                    env=environment,
                    close_fds=True,
                    start_new_session=True,
                    preexec_fn=_take_terminal,
                )
        finally:
            os.close(slave)
        self.raw = b""
        self._lock = threading.Lock()
        self._screen = _Screen(lambda data: os.write(self.master, data.encode()))
        self._stream = pyte.ByteStream(self._screen)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the terminal has exited
                return
            if not data:
                return
            with self._lock:
                self.raw += data
                self._stream.feed(data)

    def screen_text(self) -> str:
        """The scrollback and the screen, as a person would read them: each line as written
        (wrapped rows joined), right-trimmed."""
        with self._lock:
            screen = self._screen
            rows = list(screen.history.top) + [screen.buffer[y] for y in range(screen.lines)]
            lines = _logical_lines(rows, screen.columns)
        return "\n".join(lines).rstrip("\n")

    def visible(self) -> str:
        """The screen alone: what is on it now."""
        with self._lock:
            return "\n".join(line.rstrip() for line in self._screen.display)

    # The deadlines are hang guards, never what a test waits on (as Agent.wait_for's in
    # conftest.py): at a load of 10-16 on 2 cores an exec'd fsagent's start, or a `threads rm`
    # started on the terminal, took more than 30 s to draw its question.
    def wait_for(self, text: str, after: int = 0, timeout: float = HANG_GUARD) -> int:
        """Where `text` appears in `screen_text()` after position `after`; the end of it."""
        deadline = time.monotonic() + timeout
        while (found := self.screen_text().find(text, after)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {text!r} within {timeout}s; the screen:\n{self.screen_text()[after:]}"
                )
            time.sleep(0.02)
        return found + len(text)

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = HANG_GUARD) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"not {what} within {timeout}s:\n{self.screen_text()}")
            time.sleep(0.02)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def enter(self, line: str) -> None:
        self.type(line + ENTER)

    def close(self, timeout: float = HANG_GUARD) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(timeout=5)
            os.close(self.master)


def _take_terminal() -> None:
    """In the child, before the exec: the signals as a shell's job has them, and the pty (its
    stdin) the controlling terminal of its new session (as tests/launcher.py's fork)."""
    for number in SHELL_DEFAULTS:
        signal.signal(number, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
