"""Undo's checks that once survived a mutation pass over the whole suite (issue 19): a file
edited while the undo waits for its yes is left alone (each step checks its path again just
before it runs), and one changed file of several is enough to refuse the whole undo. The real
CLI, the real MCP server on a temp folder, a real SQLite file and the LM Studio stand-in."""

from __future__ import annotations

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: undo must not need LM Studio


def write(path: str, content: str, call_id: str) -> dict:
    return tool_call("write_file", {"path": path, "content": content}, id=call_id)


def test_a_file_edited_while_the_undo_waits_for_its_yes_is_left_alone(workspace: Workspace):
    (workspace.root / "a.txt").write_text("old\n")
    script = [reply(tool_calls=[write("a.txt", "new\n", "c1")]), text("Done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "change a\ny\n").returncode == 0
    assert (workspace.root / "a.txt").read_text() == "new\n"

    undo = workspace.start(NO_LLM, "undo", "t")
    # The plan is checked and shown before the question is read: the file is as the write
    # left it then.
    undo.wait_for("[1/1] write_file(", timeout=120)  # a loaded machine starts slowly
    undo.wait_for("+old", timeout=120)
    (workspace.root / "a.txt").write_text("edited while the undo waited\n")
    undo.send("y")
    code = undo.finish()

    assert code == 1, undo.stdout
    assert "a.txt changed since the undo was planned; nothing changed" in undo.stdout
    assert (workspace.root / "a.txt").read_text() == "edited while the undo waited\n"


def test_one_changed_file_of_several_refuses_the_whole_undo(workspace: Workspace):
    for name in ("a.txt", "b.txt", "c.txt"):
        (workspace.root / name).write_text(f"old {name}\n")
    calls = [write(name, f"new {name}\n", f"c_{name[0]}") for name in ("a.txt", "b.txt", "c.txt")]
    with FakeLLM([reply(tool_calls=calls), text("Done.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "change them\ny\ny\ny\n").returncode == 0
    (workspace.root / "b.txt").write_text("edited outside\n")

    refused = workspace.invoke(NO_LLM, "y\n", "undo", "t")

    assert refused.returncode == 1, refused.stdout
    assert "⚠ b.txt changed since write_file" in refused.stdout
    assert "✗ Nothing was undone: files changed since the write" in refused.stdout
    assert "undo these changes?" not in refused.stdout  # nothing was even asked
    assert (workspace.root / "a.txt").read_text() == "new a.txt\n"
    assert (workspace.root / "b.txt").read_text() == "edited outside\n"
    assert (workspace.root / "c.txt").read_text() == "new c.txt\n"
