"""Protected files (issue 28): the rules file and the SQLite thread store (with its `-wal`,
`-shm` and `-journal`) are never written, moved or deleted by an approved call. fsagent tells
its MCP server which they are (`--protect`); the server marks them in its plan, and the judge
refuses such a call without asking anyone, in one line the person and the model both read.
The real CLI, the real MCP server on a temp folder, a real SQLite file, the LM Studio
stand-in."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call

PROTECTED = "is protected (fsagent's rules file or its thread store, or a folder holding one)"
EDIT_IT_YOURSELF = "the person must edit it themselves"


def server_command_line(agent_pid: int, timeout: float = 60) -> list[str]:
    """The command line of the MCP server fsagent started (its child)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                args = (entry / "cmdline").read_bytes().decode().split("\0")
            except (OSError, IndexError, ValueError):
                continue
            if parent == agent_pid and "mcp_servers.filesystem" in args:
                return args
        time.sleep(0.05)
    raise AssertionError("fsagent started no MCP server")


def protected_paths(args: list[str]) -> list[str]:
    return [args[at + 1] for at, arg in enumerate(args) if arg == "--protect"]


def test_the_server_is_told_the_rules_file_and_the_thread_store(workspace: Workspace):
    db = workspace.root / "state" / "threads.db"
    db.parent.mkdir()
    rules = workspace.outside / "rules.toml"
    rules.write_text("")
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        # exec'd: the server read here is fsagent's own child, with the command it built.
        agent = workspace.start(llm.base_url, "--db", str(db), "--policy", str(rules), exec_=True)
        args = server_command_line(agent.process.pid)
        agent.send("hello")
        assert agent.finish(timeout=120) == 0

    root = workspace.root.resolve()
    store = db.resolve()
    assert protected_paths(args) == [
        str(root / "fsagent.toml"),  # the first root's, which a later session would read
        str(rules.resolve()),
        str(store),
        f"{store}-wal",
        f"{store}-shm",
        f"{store}-journal",
    ]


@pytest.mark.parametrize("mode", ["ask", "yes"])
def test_a_call_on_a_protected_file_is_refused_without_asking(workspace: Workspace, mode: str):
    rules = workspace.root / "fsagent.toml"
    rules.write_text('[[rule]]\ntool = "*"\npath = "docs/**"\ndecision = "allow"\n')
    db = workspace.root / "state" / "threads.db"
    db.parent.mkdir()
    calls = [
        tool_call("write_file", {"path": "fsagent.toml", "content": "# none\n"}, id="call_rules"),
        tool_call("delete", {"path": "state", "recursive": True}, id="call_store"),
        tool_call("move", {"source": "state/threads.db-wal", "destination": "w"}, id="call_wal"),
    ]
    with FakeLLM([reply(tool_calls=calls), text("Refused.")], auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, "--db", str(db), "--approve", mode)
        agent.send("loosen the rules")
        agent.send("quit")
        assert agent.finish(timeout=120) == 0, agent.stdout
        answers = tool_messages(llm.requests_with_tools()[1])

    assert "Approval needed" not in agent.stdout  # no one is asked: no one may say yes
    assert rules.read_text().startswith("[[rule]]")
    assert db.exists()  # its -wal is gone only because the session closed it
    ids = [answer["tool_call_id"] for answer in answers]
    assert ids == ["call_rules", "call_store", "call_wal"]
    for answer in answers:
        assert PROTECTED in answer["content"] and EDIT_IT_YOURSELF in answer["content"]
    assert agent.stdout.count(PROTECTED) >= 3
    assert not os.path.exists(workspace.root / "w")
