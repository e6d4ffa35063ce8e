"""The app a test opens in its own process (`serving`, tests/serving.py) starts its MCP server
as a piped session does under test: through tests/server_stub.py, which has the worker's
launcher fork the real server, unless FSAGENT_TEST_EXEC_AGENTS=1 asks for the exec. The
server is real either way (a tool call reads the file), and the hook is set for as long as
the app is open only."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from launcher import EXEC_AGENTS_ENV

from conftest import SERVER_LAUNCHER_ENV, Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import serving


def children_command_lines() -> list[list[str]]:
    """The command lines of this process's children."""
    lines = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid():
                lines.append((entry / "cmdline").read_bytes().decode().split("\0")[:-1])
        except (OSError, IndexError):
            continue  # gone meanwhile
    return lines


def servers_started(workspace: Workspace) -> list[list[str]]:
    """The MCP server's command line while an app is open, after a turn that read a file
    through it."""
    (workspace.root / "notes.md").write_text("buy milk\n")
    script = [reply(tool_calls=[tool_call("read_file", {"path": "notes.md"})]), text("Milk.")]

    async def scenario() -> list[list[str]]:
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "what is in notes.md?")
                [result] = [data for kind, data in events if kind == "tool_result"]
                assert result["text"] == "buy milk\n" and not result["failed"]
                return [line for line in children_command_lines() if "mcp_servers.filesystem"
                        in line]  # fmt: skip

    return asyncio.run(scenario())


def test_the_apps_server_is_forked_by_the_launcher(workspace: Workspace):
    assert SERVER_LAUNCHER_ENV not in os.environ
    [line] = servers_started(workspace)
    assert Path(line[2]).name == "server_stub.py", line
    assert SERVER_LAUNCHER_ENV not in os.environ  # put back when the app closed


def test_the_apps_server_is_execd_when_agents_are(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(EXEC_AGENTS_ENV, "1")
    [line] = servers_started(workspace)
    assert line[1:3] == ["-m", "mcp_servers.filesystem"], line
    assert SERVER_LAUNCHER_ENV not in os.environ
