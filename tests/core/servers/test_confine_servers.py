"""Real third-party MCP servers under core/servers/confine.py: they start, answer, and write
only where they may. `mcp-server-time` (PyPI, a Python venv server: the test extras install
it) and `@modelcontextprotocol/server-memory` (npm, a Node server: package.json's
devDependencies, installed by the Makefile's node-modules target), which writes its
knowledge graph to MEMORY_FILE_PATH: in the state folder it may, anywhere else it may not.

These are what the read list of sandbox_rules.py was found by (the system's folders, /etc's
files, the devices, the venv with its base Python, node_modules); and a Node server runs on
libuv's AF_UNIX socketpairs, which the socket filter keeps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from server_calls import call_server

from mcp_servers.kernel_sandbox import kernel_abi

REPO = Path(__file__).resolve().parents[3]
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
MEMORY_SERVER = REPO / "node_modules" / ".bin" / "mcp-server-memory"
KERNEL_ABI, _ = kernel_abi()
pytestmark = pytest.mark.skipif(KERNEL_ABI < 6, reason="these tests need Landlock ABI 6")


def confined(state: Path, *command: str | Path) -> list[str]:
    assert Path(command[0]).exists(), f"{command[0]} is missing: `make test` installs it"
    return [
        sys.executable,
        "-m",
        "core.servers.confine",
        "--verbose",
        "--state",
        str(state),
        "--",
        *map(str, command),
    ]


def test_the_time_server_answers_confined(tmp_path: Path) -> None:
    calls = [("get_current_time", {"timezone": "Europe/Paris"})]
    session = call_server(confined(tmp_path / "state", TIME_SERVER), calls)
    [answer] = session.answers
    assert "get_current_time" in session.tools
    assert not answer.is_error, answer.text
    assert json.loads(answer.text)["timezone"] == "Europe/Paris"
    assert "held by Landlock ABI" in session.stderr


ADA = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}]}


def test_the_memory_server_writes_its_file_in_its_state_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    memory = state / "memory.jsonl"
    session = call_server(
        confined(state, MEMORY_SERVER),
        [("create_entities", ADA), ("read_graph", {})],
        env={"MEMORY_FILE_PATH": str(memory)},
    )
    created, graph = session.answers
    assert not created.is_error, created.text
    assert "Ada" in graph.text
    assert json.loads(memory.read_text().splitlines()[0])["name"] == "Ada"


def test_the_memory_server_cannot_write_its_file_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    session = call_server(
        confined(tmp_path / "state", MEMORY_SERVER),
        [("create_entities", ADA)],
        env={"MEMORY_FILE_PATH": str(outside / "memory.jsonl")},
    )
    [created] = session.answers
    assert created.is_error and "EACCES" in created.text
    assert list(outside.iterdir()) == []


def test_node_starts_a_child_over_libuv_socketpairs(tmp_path: Path) -> None:
    """libuv gives a child process its stdio as AF_UNIX stream socketpairs: the socket
    filter keeps those (a server that runs git or a shell does this)."""
    script = "console.log(require('child_process').execFileSync('echo', ['child ran']).toString())"
    done = subprocess.run(
        [sys.executable, "-m", "core.servers.confine", "--", "node", "-e", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child ran"
