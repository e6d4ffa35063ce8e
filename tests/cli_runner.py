"""`fsagent ARGV` in the test process, as click's CliRunner runs a command: `agent.main(argv)`
with stdin, stdout and stderr of its own, the environment and folder it is given, and what it
changed of the process's state put back after it.

For the commands whose process is not what a test is about: `threads`, `approvals`, `audit`,
`undo`, the refusals of `approve` and `deny`. Where the process is (a crash, a kill, a signal,
a restart, Ctrl-C, a pty, what a command imports or how fast it starts, two processes at
once, `fsagent serve`, a session with a model), tests run the real CLI: `Workspace.run` (a
process forked by tests/launcher.py), `Workspace.start`, or `subprocess` itself.

What a process would have of its own, and a run here gets for its duration:

- stdin: the given text behind a text layer as the interpreter makes one for a pipe (UTF-8,
  universal newlines, not a terminal); stdout and stderr: UTF-8 text layers over buffers
  (stderr with backslashreplace, as Python's), decoded as subprocess's text mode decodes them.
  Python-level only: nothing our commands run writes to descriptors 1 and 2 but through
  sys.stdout and sys.stderr. The MCP server `undo` starts gets pipes and /dev/null
  (core/tools/server_process.py), except under --verbose, when it writes its log to
  descriptor 2: so --verbose is refused here (use `Workspace.run`).
- os.environ (replaced whole), the current folder, sys.argv and the umask.
- SIGINT, SIGTERM, SIGPIPE, SIGCHLD and SIGHUP: whatever a run sets is put back.
- The warning filters; the root logger as a new process has it (no handler, WARNING),
  so a library's warning reaches the run's stderr (logging's last resort), not pytest's
  log capture.
- Our modules' per-process state (PER_PROCESS, cli.background_imports.HEAVY_IMPORTED): empty
  or unset for the run, as in a new process, and as it was after it.
- Threads: one a run leaves running fails the run (it would outlive the command in this
  process, where a real one's exit would have ended it).

Our modules are imported once per test worker, not per run; their import-time state is what
import gives (the registry of slash commands, pure caches), the same in every run. asyncio.run
leaves the main thread with no current event loop, as every test's own asyncio.run does.

A run that hangs past `timeout` cannot be killed as a process is: the worker's stacks are
dumped and the worker exits (faulthandler), which pytest-xdist reports as a crashed test.
"""

from __future__ import annotations

import faulthandler
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
AGENT = REPO / "agent.py"

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP)
# Module-level state a new process starts without: module -> the attribute (a dict) emptied
# for a run and put back after it.
PER_PROCESS = {
    "core.context.models": "_found",  # the kind of server each base URL was found to be
}
# How long a thread a run started may take to end once the run is over (the asyncio child
# watcher's thread returns right after the process it waited for).
THREAD_GRACE_SECONDS = 5.0


def invoke(
    argv: list[str],
    *,
    input: str = "",  # noqa: A002 - as subprocess.run names it
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`fsagent ARGV` run here, as subprocess.run(capture_output=True, text=True) would
    return it. `env`: the whole environment (None: this process's as it is); `cwd`: the
    folder (None: this process's)."""
    import agent

    if "--verbose" in argv:
        raise ValueError("--verbose: the MCP server's log would bypass the capture; use run()")
    stdin = io.TextIOWrapper(io.BytesIO(input.encode("utf-8")), encoding="utf-8")
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", line_buffering=True)
    with process_state(argv, env, cwd), streams(stdin, stdout, stderr), deadline(timeout):
        code = exit_code(agent.main, argv)
        stdout.flush()
        stderr.flush()
    return subprocess.CompletedProcess(
        [sys.executable, str(AGENT), *argv], code, decoded(out.getvalue()), decoded(err.getvalue())
    )


def exit_code(main: Any, argv: list[str]) -> int:
    """What the process would exit with: main's return, a SystemExit's code (a message is
    printed, exit 1), or 1 with the traceback for an exception that escaped."""
    try:
        return int(main(argv))
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        return 1


@contextmanager
def streams(stdin: Any, stdout: Any, stderr: Any) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextmanager
def process_state(
    argv: list[str], env: Mapping[str, str] | None, cwd: Path | None
) -> Iterator[None]:
    from cli import background_imports

    environ, folder, args = dict(os.environ), os.getcwd(), sys.argv
    handlers = {number: signal.getsignal(number) for number in SIGNALS}
    mask = os.umask(0o022)
    os.umask(mask)
    root = logging.getLogger()
    log_handlers, log_level = root.handlers[:], root.level
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    threads = set(threading.enumerate())
    heavy = background_imports.HEAVY_IMPORTED.is_set()
    per_process = {name: dict(state) for name, state in module_state()}
    for _, state in module_state():
        state.clear()
    background_imports.HEAVY_IMPORTED.clear()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    sys.argv = [str(AGENT), *argv]
    try:
        with warnings.catch_warnings():
            yield
    finally:
        sys.argv = args
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(environ)
        for number, handler in handlers.items():
            if signal.getsignal(number) is not handler and handler is not None:
                signal.signal(number, handler)
        os.umask(mask)
        root.handlers[:] = log_handlers
        root.setLevel(log_level)
        for name, state in module_state():
            state.clear()
            state.update(per_process.get(name, {}))
        if heavy:
            background_imports.HEAVY_IMPORTED.set()
        else:
            background_imports.HEAVY_IMPORTED.clear()
        left = still_running(threads)
    if left:
        raise AssertionError(f"fsagent {' '.join(argv)} left threads running: {left}")


def module_state() -> Iterator[tuple[str, dict[Any, Any]]]:
    """PER_PROCESS's dicts, of the modules imported so far."""
    for name, attribute in PER_PROCESS.items():
        module = sys.modules.get(name)
        if module is not None:
            yield name, getattr(module, attribute)


def still_running(before: set[threading.Thread]) -> list[threading.Thread]:
    """The threads started since `before` that do not end within the grace period."""
    end = time.monotonic() + THREAD_GRACE_SECONDS
    started = [thread for thread in threading.enumerate() if thread not in before]
    for thread in started:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    return [thread for thread in started if thread.is_alive()]


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """A run still going after `seconds`: every thread's stack on stderr, and the worker
    exits (a process would have been killed)."""
    # Descriptor 2, not sys.stderr: that is the run's own buffer now.
    faulthandler.dump_traceback_later(seconds, exit=True, file=2)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def decoded(data: bytes) -> str:
    """As subprocess's text mode reads it: universal newlines."""
    return data.decode("utf-8", errors="strict").replace("\r\n", "\n").replace("\r", "\n")
