"""Shared fixtures: a workspace (a sandbox root, a folder outside it, a thread file) and the
real `fsagent` CLI run as a subprocess against it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
AGENT = REPO / "agent.py"


def agent_env() -> dict[str, str]:
    """The environment of a person who set nothing: no FSAGENT_* variable leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSAGENT_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("EDITOR", None)
    env.pop("VISUAL", None)
    return env


@dataclass
class Workspace:
    root: Path
    outside: Path
    db: Path
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

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
            str(self.db),
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
        return subprocess.run(
            self.command(base_url, *args, thread=thread),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**agent_env(), **(env or {})},
        )

    def start(
        self, base_url: str, *args: str, thread: str = "t", env: dict[str, str] | None = None
    ) -> RunningAgent:
        process = subprocess.Popen(
            self.command(base_url, *args, thread=thread),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            env={**agent_env(), **(env or {})},
        )
        self.processes.append(process)
        return RunningAgent(process)


class RunningAgent:
    """An agent process whose output is read as it comes, so a test can act mid-run."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.output)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def wait_for(self, text: str, timeout: float = 30) -> None:
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

    def finish(self, timeout: float = 30) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside, do not touch\n")
    ws = Workspace(root=root, outside=outside, db=tmp_path / "threads.db")
    yield ws
    for process in ws.processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def tool_messages(request: dict) -> list[dict]:
    """The tool results a model request carried, in order."""
    return [m for m in request["messages"] if m.get("role") == "tool"]


def tree_snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(folder.rglob("*"))
    }
