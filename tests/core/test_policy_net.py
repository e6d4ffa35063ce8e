"""Rules and grants as the person relies on them, through the real CLI, the real MCP server on
a temp folder, a real SQLite file and the LM Studio stand-in. Each case once survived a
mutation pass over the whole suite (issue 19): a grant matched by string prefix, and the
last matching rule winning over a stronger one."""

from __future__ import annotations

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call


def write(path: str, call_id: str) -> dict:
    return reply(tool_calls=[tool_call("write_file", {"path": path, "content": "x\n"}, id=call_id)])


def test_a_grant_for_a_folder_does_not_cover_a_sibling_that_starts_with_its_name(
    workspace: Workspace,
):
    (workspace.root / "docs").mkdir()
    (workspace.root / "docs-private").mkdir()
    script = [
        write("docs/a.md", "c1"),
        write("docs/b.md", "c2"),  # the grant covers it: runs without asking
        write("docs-private/keys.md", "c3"),  # not inside docs/: asked, and the pipe ends
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "write the notes\na\n")

    assert result.returncode == 3, result.stdout + result.stderr  # left waiting for a person
    assert (workspace.root / "docs" / "a.md").read_text() == "x\n"
    assert (workspace.root / "docs" / "b.md").read_text() == "x\n"
    assert not (workspace.root / "docs-private" / "keys.md").exists()
    assert result.stdout.count("Approval needed") == 2
    assert "[1/1] write_file(path='docs-private/keys.md'" in result.stdout


RULES = """
[[rule]]
tool = "*"
path = "secrets/**"
decision = "deny"

[[rule]]
tool = "*"
path = "**"
decision = "allow"
"""


def test_a_deny_beats_a_later_allow_on_everything(workspace: Workspace):
    (workspace.root / "fsagent.toml").write_text(RULES)
    (workspace.root / "secrets").mkdir()
    calls = [
        tool_call("write_file", {"path": "secrets/key.txt", "content": "k\n"}, id="c1"),
        tool_call("write_file", {"path": "notes.txt", "content": "n\n"}, id="c2"),
    ]
    with FakeLLM([reply(tool_calls=calls), text("Done.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "write both\n")

    assert result.returncode == 0, result.stdout + result.stderr
    assert not (workspace.root / "secrets" / "key.txt").exists()
    assert (workspace.root / "notes.txt").read_text() == "n\n"  # the allow does hold elsewhere
    assert "Approval needed" not in result.stdout  # both decided by the rules
    denied, allowed = tool_messages(llm.requests_with_tools()[1])
    assert denied["tool_call_id"] == "c1" and "rule 1" in denied["content"]
    assert allowed["tool_call_id"] == "c2" and '"new_sha256"' in allowed["content"]
