"""Real fsagent processes without paying for the libraries' import at every launch.

About 600 tests run the CLI as a piped session, and each launch spent one to three CPU
seconds importing langgraph, langchain and the MCP client before it read a line: more than
half of the suite's time. A launcher process (one per test worker) imports those libraries
once, and nothing of ours, then forks for every launch. The fork is a real process with the
test's pipes as its stdin, stdout and stderr, its own folder, environment and argv, its own
exit code and signals, which imports our modules afresh and runs `agent.py` as `python
agent.py ...` would. What it does not measure is the import itself, so the tests about
start-up (what a command imports, how fast a prompt appears) launch `sys.executable` as
before.

The launcher is single-threaded when it forks (checked at start): a fork of a process with
other threads could copy a lock one of them held.

A launch at a terminal (`Launcher.on_terminal`, tests/pty_screen.py) is the same fork given
one descriptor, a pseudo-terminal, which it makes its controlling terminal in a session of
its own (setsid, then TIOCSCTTY) and its stdin, stdout and stderr, as a process started on
that terminal has them: Ctrl-C typed there is SIGINT for its process group, isatty() is true
on all three, and the streams are built as the interpreter builds them for a terminal. The
launcher itself never has a terminal, a handler but SIGCHLD's, a connection or a thread.

Protocol, over a Unix socket per launch: the request is one JSON line (argv, env, cwd) with
the three descriptors (SCM_RIGHTS), or the terminal's one; the answer is the launched pid,
then its wait status, each one line. The launcher forks a waiter per launch, which forks the
process, so the launcher itself never blocks on a child.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
AGENT = REPO / "agent.py"
# Set to 1, every fsagent a test starts (Workspace.start, ServeProcess, a pty session) is the
# real exec'd interpreter: to compare, or to rule the fork out.
EXEC_AGENTS_ENV = "FSAGENT_TEST_EXEC_AGENTS"


def agents_execd(exec_: bool = False) -> bool:
    """Whether an fsagent a test starts is exec'd rather than forked from the launcher."""
    return exec_ or os.environ.get(EXEC_AGENTS_ENV, "") not in ("", "0")


# What every launch imports before it reads a line (cli.launch.open_agent and its callees):
# libraries only, so that our own modules' import-time state is each process's own.
PRELOADED = (
    "langgraph.graph",
    "langgraph.types",
    "langgraph.checkpoint.sqlite.aio",
    "langchain_openai",
    "langchain_core.messages",
    "langchain_core.tools",
    "langchain_mcp_adapters.tools",
    "mcp",
    "mcp.client.stdio",
    "httpx",
    "openai",
    "aiosqlite",
    "ormsgpack",
    "rich.console",
    "prompt_toolkit",
    # `fsagent serve`'s (tests/serving.py ServeProcess, ~35 a run): 0.08 CPU s a start.
    "fastapi",
    "fastapi.responses",
    "fastapi.staticfiles",
    "starlette.middleware.cors",
    "uvicorn",
    # What the libraries import late, on a session's first use: each launch paid these again
    # (~0.1 CPU s a session, a sixth of it), the first model request most (openai builds its
    # chat resources' pydantic models on the client's first `.chat`).
    "openai.resources.chat.completions.completions",
    "openai.lib.streaming.chat",
    "httpcore",
    "httpcore2",
    "h11",
    "jiter",
    "truststore",
    "tomllib",
    "langchain_core.tracers.context",
    "langchain_core.tracers.stdout",
    "langchain_core.tracers.run_collector",
    "langchain_core.messages.block_translators.langchain_v0",
    # The MCP server's (tests/server_stub.py): mcp_servers.filesystem's libraries. Not
    # anyio's backend, which anyio imports only when it runs: the server imports it itself
    # before its kernel sandbox closes the files (mcp_servers/preload.py), and a forked server
    # that found it imported already would no longer test that it does.
    "mcp.types",
    "mcp.server.fastmcp",
    "mcp.server.fastmcp.exceptions",
    "pydantic",
    "anyio",
    "anyio.from_thread",
    "anyio.lowlevel",
    "re2",
    "rich.logging",
    "ctypes",
)


# --- the launcher process ------------------------------------------------------------------


def serve(path: str) -> None:
    """Import the libraries, then launch a process for every request on `path`."""
    for module in PRELOADED:
        __import__(module)
    # What the imports made is kept out of every collection in the launches: each is a fork
    # that would otherwise walk the whole preloaded heap at its first full collection (and
    # copy every page it touches), 0.3-1.2 s of a server's stop under load where one fell
    # just before its exit. As gc.freeze's documentation advises before a fork without exec.
    gc.collect()
    gc.freeze()
    if threading.active_count() != 1:
        raise SystemExit(f"launcher: an import started a thread ({threading.enumerate()})")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    signal.signal(signal.SIGCHLD, lambda *_: reap())
    while True:
        try:
            connection, _ = listener.accept()
        except InterruptedError:
            continue
        with connection:
            message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                wait_for_launch(connection, json.loads(message), fds)
            for fd in fds:
                os.close(fd)


def reap() -> None:
    with_children = True
    while with_children:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        with_children = pid != 0


def wait_for_launch(connection: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """The waiter: fork the launch, say its pid, wait for it and say its status."""
    pid = os.fork()
    if pid == 0:
        connection.close()
        launch(request, fds)
    for fd in fds:
        os.close(fd)
    connection.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    connection.sendall(f"{status}\n".encode())
    os._exit(0)


# The text layer of the standard streams, as the interpreter makes it (CPython's create_stdio).
STDIO_ENCODING = sys.stdout.encoding
STDIO_ERRORS = sys.stdout.errors


def stdio(fd: int, mode: str, errors: str, *, unbuffered: bool) -> Any:
    """A standard stream as the interpreter makes it: stdin always buffered; stdout and
    stderr unbuffered under PYTHONUNBUFFERED (written through), else line-buffered at a
    terminal, and stderr always; newlines read as they come ("\n", no translation of "\r")."""
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "r":
        buffered: Any = io.BufferedReader(raw)
    else:
        buffered = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered,
        STDIO_ENCODING,
        errors,
        newline="\n",
        line_buffering=not unbuffered and (raw.isatty() or fd == 2),
        write_through=unbuffered,
    )


def launch(request: dict[str, Any], fds: list[int]) -> None:
    """Become `python agent.py ARGV...` in the request's folder and environment, on its pipes
    or, for a request of kind "tty", on its terminal; or for a request of kind "server"
    (tests/server_stub.py), `python -m mcp_servers.filesystem ...`."""
    try:
        if request.get("kind") == "tty":
            take_terminal(fds[0])
        else:
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
        os.chdir(request["cwd"])
        if "umask" in request:  # the test's, not the launcher's (a server's new files)
            os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        # The signals as the interpreter sets them at start.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        unbuffered = bool(request["env"].get("PYTHONUNBUFFERED"))
        sys.stdin = stdio(0, "r", STDIO_ERRORS, unbuffered=unbuffered)
        sys.stdout = stdio(1, "w", STDIO_ERRORS, unbuffered=unbuffered)
        sys.stderr = stdio(2, "w", "backslashreplace", unbuffered=unbuffered)
        # What a library reaches for as "the process's own" streams (prompt_toolkit's output
        # falls back to them): these, never the launcher's.
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        import runpy

        if request.get("kind") == "server":
            # Nothing of the launcher's beyond the three: an open descriptor outlives the
            # server's Landlock, and `python -m` would not have it (close_fds).
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            module, argv = server_argv(request["argv"])
            # As `python -m` sets it: the folder first, then PYTHONPATH's.
            extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            sys.path[0:1] = [os.getcwd(), *extra]
            sys.argv = [module, *argv]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            # agent.py, or a test's own script run the same way (tests/tty_probe.py).
            script = request.get("script", str(AGENT))
            sys.argv = [script, *request["argv"]]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if exit_.code is not None and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:
        # As the interpreter ends on a Ctrl-C nothing caught: the traceback, then death by
        # SIGINT (a shell's 130), not an exit code of 1.
        traceback.print_exc()
        finish(request)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finish(request)
    os._exit(code)


# What a shell gives a job it starts in the foreground of a terminal: these signals at their
# defaults. (A test run started with SIGINT ignored, as a shell's background job without job
# control is, hands that on to every process it starts, exec or not; an interpreter that starts
# with SIGINT ignored keeps it so, and Ctrl-C at its terminal would do nothing.)
SHELL_DEFAULTS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def take_terminal(fd: int) -> None:
    """In the launched process: a session of its own whose controlling terminal is `fd`, as
    stdin, stdout and stderr; no other descriptor (Popen's close_fds); the signals a shell
    resets (SIGINT then gets the interpreter's handler, as at its start)."""
    for number in SHELL_DEFAULTS:
        signal.signal(number, signal.SIG_DFL)
    os.setsid()
    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
    for target in (0, 1, 2):
        os.dup2(fd, target)
    os.close(fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))


def finish(request: dict[str, Any]) -> None:
    """What the interpreter does at its end before the process exits: for fsagent, wait for
    the threads that are not daemons and run the atexit handlers (a thread left running
    would hang `python agent.py` too); then flush the standard streams."""
    if request.get("kind") != "server":
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def server_argv(args: list[str]) -> tuple[str, list[str]]:
    """The module and its arguments from `-m MODULE ARGS...`: the server only."""
    if args[:2] != ["-m", "mcp_servers.filesystem"]:
        raise SystemExit(f"launcher: not the MCP server's command line: {args!r}")
    return args[1], args[2:]


# --- the tests' side -----------------------------------------------------------------------


class Launcher:
    """One launcher process, started on first use, stopped when the worker ends."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="fsagent-launcher-")
        self.path = os.path.join(self.folder, "socket")
        self.process: subprocess.Popen[str] | None = None

    def started(self) -> str:
        if self.process is None or self.process.poll() is not None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("FSAGENT_")}
            self.process = subprocess.Popen(
                [sys.executable, __file__, self.path],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert self.process.stdout is not None
            ready = self.process.stdout.readline().strip()
            if ready != "ready":
                raise RuntimeError(f"the test launcher did not start: {ready!r}")
            atexit.register(self.stop)
        return self.path

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def run(
        self,
        argv: list[str],
        *,
        input: str,  # noqa: A002 - as subprocess.run names it
        env: dict[str, str],
        cwd: Path,
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        """`python agent.py ARGV...` as subprocess.run(capture_output=True, text=True) runs it."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.started())
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode()
        socket.send_fds(connection, [request], [stdin_r, stdout_w, stderr_w])
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        answers = connection.makefile("r")
        pid = int(answers.readline())
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [
            threading.Thread(target=drain, args=(stdout_r, out), daemon=True),
            threading.Thread(target=drain, args=(stderr_r, err), daemon=True),
            threading.Thread(target=feed, args=(stdin_w, input.encode()), daemon=True),
        ]
        for reader in readers:
            reader.start()
        connection.settimeout(timeout)
        try:
            status = int(answers.readline())
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        finally:
            for reader in readers:
                reader.join(timeout=10)
            connection.close()
        code = os.waitstatus_to_exitcode(status)
        return subprocess.CompletedProcess(
            [sys.executable, str(AGENT), *argv],
            code,
            decoded(b"".join(out)),
            decoded(b"".join(err)),
        )

    def spawn(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        stdin: Any = subprocess.PIPE,
        stdout: Any = subprocess.PIPE,
        stderr: Any = None,
        kind: str = "server",
    ) -> Launched:
        """`python -m mcp_servers.filesystem ...` (argv from `-m`) forked, as subprocess.Popen
        starts it: each of stdin, stdout and stderr a pipe (subprocess.PIPE), /dev/null
        (subprocess.DEVNULL), a file or descriptor, or this process's own (None). With
        kind="agent", `python agent.py ARGV...` instead, as `run` launches it but left
        running (tests/conftest.py `Workspace.start`)."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.started())
        ends = [child_end(number, given) for number, given in enumerate((stdin, stdout, stderr))]
        request = {"kind": kind, "argv": argv, "env": env, "cwd": str(cwd), "umask": umask()}
        try:
            socket.send_fds(connection, [json.dumps(request).encode()], [fd for fd, _, _ in ends])
        finally:
            for fd, _, opened in ends:
                if opened:  # the child has its copy now; the caller's own stay open
                    os.close(fd)
        args = [sys.executable, *argv] if kind == "server" else [sys.executable, str(AGENT), *argv]
        return Launched(connection, args, *(ours for _, ours, _ in ends))

    def on_terminal(
        self,
        argv: list[str],
        terminal: int,
        *,
        env: dict[str, str],
        cwd: Path | str,
        script: Path | str = AGENT,
    ) -> Launched:
        """`python SCRIPT ARGV...` (agent.py unless said) forked on the pseudo-terminal
        `terminal` (its slave end, which the caller still closes), as Popen starts it there
        with start_new_session and the terminal made its controlling one: see the module's
        doc."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.started())
        request = {
            "kind": "tty",
            "script": str(script),
            "argv": argv,
            "env": env,
            "cwd": str(cwd),
            "umask": umask(),
        }
        socket.send_fds(connection, [json.dumps(request).encode()], [terminal])
        return Launched(connection, [sys.executable, str(script), *argv], None, None, None)


def child_end(number: int, given: Any) -> tuple[int, Any, bool]:
    """(the descriptor the child gets as `number`, our end of its pipe or None, whether
    the descriptor was opened here)."""
    if given == subprocess.PIPE:
        read, write = os.pipe()
        if number == 0:
            return read, open(write, "wb"), True  # noqa: SIM115 (the Launched's to close)
        return write, open(read, "rb"), True  # noqa: SIM115
    if given == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None, True
    if given is None:
        return number, None, False
    return (given if isinstance(given, int) else given.fileno()), None, False


def umask() -> int:
    """This process's umask, read without changing it (os.umask would, for every thread)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise RuntimeError("no Umask line in /proc/self/status")


class Launched:
    """A process the launcher forked, with as much of subprocess.Popen as the tests use. `pid`
    is the real process's (a signal sent there reaches it: SIGKILL kills it for real); its
    parent is the launcher's waiter, which says its wait status on `connection`."""

    def __init__(
        self, connection: socket.socket, args: list[str], stdin: Any, stdout: Any, stderr: Any
    ) -> None:
        self.args = args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.connection = connection
        self.buffer = b""
        self.lock = threading.Lock()
        self.returncode: int | None = None
        self.pid = int(self.line(None) or b"-1")

    def line(self, timeout: float | None) -> bytes | None:
        """The waiter's next line, or None when `timeout` runs out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.connection], [], [], left)
            if not ready:
                return None
            chunk = self.connection.recv(64)
            if not chunk:
                raise RuntimeError(f"the test launcher's waiter left without a word: {self.args}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def wait(self, timeout: float | None = None) -> int:
        with self.lock:
            if self.returncode is None:
                status = self.line(timeout)
                if status is None:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                self.returncode = os.waitstatus_to_exitcode(int(status))
                self.connection.close()
            return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, number: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def drain(fd: int, into: list[bytes]) -> None:
    with open(fd, "rb", closefd=True) as stream:
        while chunk := stream.read1(1 << 16):
            into.append(chunk)


def feed(fd: int, data: bytes) -> None:
    with open(fd, "wb", closefd=True) as stream:
        with contextlib.suppress(BrokenPipeError):
            stream.write(data)


def decoded(data: bytes) -> str:
    """As subprocess's text mode reads it: universal newlines."""
    return data.decode("utf-8", errors="strict").replace("\r\n", "\n").replace("\r", "\n")


LAUNCHER = Launcher()


if __name__ == "__main__":
    serve(sys.argv[1])
