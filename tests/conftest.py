"""Shared fixtures: a workspace (a sandbox root, a folder outside it, a thread store) and the
real `fsagent` CLI run against it: as a subprocess (`run`, `start`), or in this process
(`invoke`, tests/cli_runner.py) where the process is not what a test is about.

The store is a SQLite file unless a test module asks for Postgres through the `store_kind`
fixture (tests/core/test_threads.py runs every test on both). One throwaway Postgres server
(tests/pg_server.py) serves the whole run: the first test that needs it starts it, under a
file lock every xdist worker shares; the controller stops it when the run ends. A server that
cannot start fails those tests, loudly: none is skipped.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import waits_profile
from launcher import LAUNCHER, Launched, agents_execd

import cli_runner
from pg_server import Server, ServerError, start_server, stop_orphans

REPO = Path(__file__).resolve().parent.parent
AGENT = REPO / "agent.py"
# The folder the run's Postgres server lives in, set by the controller for its workers.
POSTGRES_DIR_ENV = "FSAGENT_TEST_POSTGRES_DIR"
POSTGRES_DIR_PREFIX = "fsagent-test-pg-"
# core/tools/server_process.py: the server of a piped session is forked by the launcher.
SERVER_LAUNCHER_ENV = "FSAGENT_TEST_SERVER_LAUNCHER"
# Set to 1, every Workspace.start execs the interpreter, as `exec_=True` does for one: to
# compare, or to rule the fork out.


def agent_env() -> dict[str, str]:
    """The environment of a person who set nothing: no FSAGENT_* variable leaks in."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FSAGENT_") and k != "DATABASE_URL"
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("EDITOR", None)
    env.pop("VISUAL", None)
    return env


@dataclass
class Workspace:
    root: Path
    outside: Path
    db: Path  # the SQLite file, when the store is one
    database_url: str | None = None  # a Postgres database instead
    processes: list[subprocess.Popen[str] | Launched] = field(default_factory=list)

    @property
    def location(self) -> str:
        """What --db says."""
        return self.database_url or str(self.db)

    def store_created(self) -> bool:
        """Whether anything made the store: the file, or our tables in the database."""
        if self.database_url is None:
            return self.db.exists()
        return "fsagent_migrations" in postgres_tables(self.database_url)

    def command(self, base_url: str, *args: str, thread: str | None = "t") -> list[str]:
        """The CLI on this workspace; thread=None leaves --thread out (every thread)."""
        return [
            sys.executable,
            str(AGENT),
            "--base-url",
            base_url,
            "--root",
            str(self.root),
            "--db",
            self.location,
            *(["--thread", thread] if thread else []),
            *args,
        ]

    def run(
        self,
        base_url: str,
        stdin: str = "",
        *args: str,
        thread: str | None = "t",
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        # A real process, forked from one that has the libraries imported (tests/launcher.py),
        # whose MCP server is forked from there too (tests/server_stub.py).
        command = self.command(base_url, *args, thread=thread)
        launcher = LAUNCHER.started()
        return LAUNCHER.run(
            command[2:],
            input=stdin,
            timeout=timeout,
            cwd=self.root,
            env={**agent_env(), SERVER_LAUNCHER_ENV: launcher, **(env or {})},
        )

    def invoke(
        self,
        base_url: str,
        stdin: str = "",
        *args: str,
        thread: str | None = "t",
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """What `run` returns for the same arguments, from `agent.main` in this process
        (tests/cli_runner.py): for the commands whose process is not what the test is about."""
        command = self.command(base_url, *args, thread=thread)
        return cli_runner.invoke(
            command[2:],
            input=stdin,
            timeout=timeout,
            cwd=self.root,
            env={**agent_env(), SERVER_LAUNCHER_ENV: LAUNCHER.started(), **(env or {})},
        )

    def start(
        self,
        base_url: str,
        *args: str,
        thread: str = "t",
        env: dict[str, str] | None = None,
        exec_: bool = False,
    ) -> RunningAgent:
        """fsagent left running, its output read as it comes: forked from the worker's
        launcher as `run` is (a real process of its own that SIGKILL and SIGINT reach, its
        MCP server forked too), or with `exec_=True` (or FSAGENT_TEST_EXEC_AGENTS=1 for a
        whole run) the interpreter exec'd, for a test whose point is what the exec'd
        command does itself (its server's command line, its imports)."""
        command = self.command(base_url, *args, thread=thread)
        process: subprocess.Popen[str] | Launched
        if agents_execd(exec_):
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=self.root,
                env={**agent_env(), **(env or {})},
            )
        else:
            launcher = LAUNCHER.started()
            process = LAUNCHER.spawn(
                command[2:],
                kind="agent",
                env={**agent_env(), SERVER_LAUNCHER_ENV: launcher, **(env or {})},
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        self.processes.append(process)
        return RunningAgent(process)


class RunningAgent:
    """An agent process whose output is read as it comes, so a test can act mid-run."""

    def __init__(self, process: subprocess.Popen[str] | Launched) -> None:
        self.process = process
        # A forked agent's pipes are bytes (Launched); read and write them as Popen's text
        # mode does (UTF-8, universal newlines).
        self.stdin: IO[str] = text_stream(process.stdin, write=True)
        self.stdout_stream: IO[str] = text_stream(process.stdout, write=False)
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.stdout_stream:
            self.output.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.output)

    def send(self, line: str) -> None:
        self.stdin.write(line + "\n")
        self.stdin.flush()

    # The deadlines are hang guards, never what a test waits on: a start under a heavy load
    # (other suites on the same cores) may take many times its quiet time.
    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stdout:
            if self.process.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"agent exited before {text!r}:\n{self.stdout}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout}s:\n{self.stdout}")
            time.sleep(0.02)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def interrupt(self) -> None:
        """Ctrl-C, as the terminal sends it."""
        self.process.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 120) -> int:
        self.stdin.close()
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code


def text_stream(stream: Any, *, write: bool) -> IO[str]:
    """A pipe of the agent's as text: Popen's own in text mode, or a Launched's bytes
    wrapped."""
    assert stream is not None
    if isinstance(stream, io.TextIOBase):
        return stream  # type: ignore[return-value]
    return io.TextIOWrapper(stream, encoding="utf-8", write_through=write)


@pytest.fixture(autouse=True)
def own_xdg_folders(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test, and every fsagent it starts, keeps its data folder (the default thread
    store), its config file and its history in temp folders of its own, never the real
    home's."""
    base = tmp_path_factory.mktemp("xdg")
    for variable, name in (("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"),
                           ("XDG_STATE_HOME", "state")):  # fmt: skip
        monkeypatch.setenv(variable, str(base / name))
    return base


@pytest.fixture
def store_kind() -> str:
    """The database a workspace keeps threads in; a module may parametrise it."""
    return "sqlite"


@pytest.fixture
def workspace(
    tmp_path: Path, store_kind: str, request: pytest.FixtureRequest
) -> Iterator[Workspace]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside, do not touch\n")
    url = request.getfixturevalue("postgres_url") if store_kind == "postgres" else None
    ws = Workspace(root=root, outside=outside, db=tmp_path / "threads.db", database_url=url)
    yield ws
    for process in ws.processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder made once a run and shared by its workers (a module fixture whose making is
    costly and whose result the tests only read): `make(folder)` runs in whichever worker
    asks first, under a lock the others wait on. It lives under the run's own temp folder
    (the workers' `popen-gwN` folders' parent), so its paths are as long as theirs."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / "made-once" / name
    folder.parent.mkdir(exist_ok=True)
    with (folder.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = folder.parent / f"{name}.made"
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed left
            folder.mkdir()
            make(folder)
            made.touch()
    return folder


def tool_messages(request: dict) -> list[dict]:
    """The tool results a model request carried, in order."""
    return [m for m in request["messages"] if m.get("role") == "tool"]


def tool_answers(requests: list[dict]) -> list[str]:
    """The text of every tool result the model was sent, request after request."""
    return [str(m.get("content")) for request in requests for m in tool_messages(request)]


def tree_snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(folder.rglob("*"))
    }


# --- the run's Postgres server -------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    waits_profile.register(config)  # FSAGENT_TEST_WAITS: where each test waits (opt-in)
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller made the folder, the environment names it
    parent = Path(tempfile.gettempdir())
    stop_orphans(parent, POSTGRES_DIR_PREFIX)
    folder = Path(tempfile.mkdtemp(prefix=POSTGRES_DIR_PREFIX, dir=parent))
    folder.chmod(0o755)  # the server runs as the postgres user and lives inside
    (folder / "owner").write_text(str(os.getpid()))
    os.environ[POSTGRES_DIR_ENV] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    folder = os.environ.pop(POSTGRES_DIR_ENV, None)
    if not folder:
        return
    state = Path(folder) / "server.json"
    if state.exists():
        Server.load(state).stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Server:
    """The run's one Postgres server, started by whichever worker needs it first."""
    folder = Path(os.environ[POSTGRES_DIR_ENV])
    state, failed = folder / "server.json", folder / "failed"
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if state.exists():
            return Server.load(state)
        if failed.exists():
            pytest.fail(f"the throwaway Postgres server did not start:\n{failed.read_text()}")
        try:
            server = start_server(folder / "cluster")
        except (ServerError, OSError, subprocess.SubprocessError) as error:
            failed.write_text(str(error))
            pytest.fail(f"the throwaway Postgres server did not start:\n{error}")
        server.save(state)
        return server


@pytest.fixture
def postgres_url(postgres: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own for one test, on the run's server."""
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40] + "_" + uuid.uuid4().hex[:8]
    url = postgres.create_database(name)
    yield url
    postgres.drop_database(name)


def postgres_tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    return {row[0] for row in rows}
