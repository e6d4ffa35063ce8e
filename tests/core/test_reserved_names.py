"""A write through the filesystem server's own names (`.fsagent-...`, issue 40) is refused by
the judge without asking anyone, whatever the mode: `move(important.db ->
.fsagent-0123456789abcdef.tmp)` reads as a rename and is a delete (the server hides such
names from every listing). The real CLI, the real MCP server on a temp folder, the LM Studio
stand-in."""

from __future__ import annotations

import pytest

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call

HIDDEN = ".fsagent-0123456789abcdef.tmp"
RESERVED = "goes through a name the filesystem server keeps for its own entries"


@pytest.mark.parametrize("mode", ["ask", "yes"])
def test_a_rename_to_a_reserved_name_is_refused_without_asking(workspace: Workspace, mode: str):
    (workspace.root / "important.db").write_text("the data\n")
    calls = [
        tool_call("move", {"source": "important.db", "destination": HIDDEN}, id="call_move"),
        tool_call("write_file", {"path": f"docs/{HIDDEN}", "content": "x\n"}, id="call_write"),
    ]
    with FakeLLM([reply(tool_calls=calls), text("Refused.")], auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, "--approve", mode)
        agent.send("tidy up")
        agent.send("quit")
        assert agent.finish(timeout=120) == 0, agent.stdout
        answers = tool_messages(llm.requests_with_tools()[1])

    assert "Approval needed" not in agent.stdout
    assert [answer["tool_call_id"] for answer in answers] == ["call_move", "call_write"]
    for answer in answers:
        assert RESERVED in answer["content"] and "choose another name" in answer["content"]
    assert (workspace.root / "important.db").read_text() == "the data\n"
    assert not (workspace.root / HIDDEN).exists()
    assert not (workspace.root / "docs").exists()
