"""Undo end to end: approved writes taken back by `fsagent undo` and `/undo`, through the real
CLI, the real MCP server on temp folders, a real SQLite thread file and the scripted LM
Studio stand-in (SIGKILLed where a crash is meant)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from conftest import Workspace, tree_snapshot
from core.threads.ledger import HOLD_MARKER, TEST_HOLD_ENV
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: undo must not need LM Studio


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Every undo test runs on both stores: undo records are the store's to keep."""
    return request.param


def rows(workspace: Workspace, query: str) -> list[tuple]:
    if workspace.database_url is not None:
        with psycopg.connect(workspace.database_url) as conn:
            return [tuple(row) for row in conn.execute(query).fetchall()]
    with sqlite3.connect(workspace.db) as conn:
        return conn.execute(query).fetchall()


def modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o7777 for p in folder.rglob("*")}


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "user"]


def audit(workspace: Workspace) -> list[dict]:
    result = workspace.invoke(NO_LLM, "", "audit", "--json", thread=None)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def write_turn(calls: list[dict], answer: str = "Done.") -> list[dict]:
    return [reply(tool_calls=calls), text(answer)]


def test_undo_takes_back_a_turn_of_every_write_tool(workspace: Workspace):
    root = workspace.root
    (root / "notes.md").write_text("alpha\nbeta\n")
    (root / "notes.md").chmod(0o640)
    (root / "keep.txt").write_text("keep me\r\nas I am\r\n")
    (root / "template.md").write_text("tmpl\n")
    (root / "old" / "sub").mkdir(parents=True)
    (root / "old" / "a.txt").write_text("aa\n")
    (root / "old" / "sub" / "c.txt").write_text("")
    (root / "drafts").mkdir()
    (root / "drafts" / "d1.md").write_text("draft one\n")
    (root / "src.txt").write_text("moved over\n")
    (root / "target.txt").write_text("replaced by the move\n")
    before, before_modes = tree_snapshot(root), modes(root)

    edits = [{"old_text": "beta", "new_text": "gamma"}]
    calls = [
        tool_call("write_file", {"path": "keep.txt", "content": "overwritten\n"}, id="c1"),
        tool_call("write_file", {"path": "new/deep/n.txt", "content": "fresh\n"}, id="c2"),
        tool_call("patch_file", {"path": "notes.md", "edits": edits}, id="c3"),
        tool_call("make_dir", {"path": "made/inner"}, id="c4"),
        tool_call("touch", {"path": "stamp"}, id="c5"),
        tool_call("copy", {"source": "template.md", "destination": "copies/t.md"}, id="c6"),
        tool_call("copy", {"source": "drafts", "destination": "backup/drafts"}, id="c6b"),
        tool_call("move", {"source": "drafts", "destination": "archive/2024/drafts"}, id="c7"),
        tool_call(
            "move", {"source": "src.txt", "destination": "target.txt", "overwrite": True}, id="c8"
        ),
        tool_call("delete", {"path": "old", "recursive": True}, id="c9"),
    ]
    script = [*write_turn(calls), text("Noted.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "tidy up\n", "--approve", "yes")
        assert wrote.returncode == 0, wrote.stderr
        assert not (root / "old").exists() and (root / "archive/2024/drafts/d1.md").exists()
        assert (root / "backup/drafts/d1.md").read_text() == "draft one\n"
        assert (root / "target.txt").read_text() == "moved over\n"

        undone = workspace.invoke(NO_LLM, "y\n", "undo", "t")
        after_undo = tree_snapshot(root)
        told = workspace.run(llm.base_url, "what happened?\n")
        shown = workspace.invoke(NO_LLM, "", "threads", "show", "t", thread=None)

    assert undone.returncode == 0, undone.stderr
    assert after_undo == before
    assert modes(root) == before_modes
    out = undone.stdout
    assert "↶ Undo turn 1: 10 change(s), newest first." in out
    # What it restores is shown before the question: diffs for content, words for the rest.
    assert "    restores notes.md to its content before patch_file:" in out
    assert "    -gamma\n    +beta" in out
    assert "    moves archive/2024/drafts back to drafts" in out
    assert "    makes folder old/ again, with its 2 files in 1 folder" in out
    assert "    removes folder new/deep/ (write_file created it) if it is empty" in out
    assert "  undo these changes? [y/n] y" in out
    # The steps as they run name paths as the plan does: relative to the root.
    assert "→ make_dir(path='old')" in out and "→ move(source='target.txt'" in out
    assert str(root) not in out and str(root.resolve()) not in out
    assert "↶ undone; the model is told: (fsagent) The person undid your changes of turn 1." in out
    # The model reads what was undone with the history of the thread.
    assert told.returncode == 0, told.stderr
    [note] = [t for t in user_texts(llm.requests[-1]) if t.startswith("(fsagent)")]
    assert "restored keep.txt to its content before write_file" in note
    assert "moved target.txt back to src.txt" in note
    # `threads show` prints fsagent's note as fsagent's, not as the person's words.
    assert "\nfsagent> The person undid your changes of turn 1." in shown.stdout
    assert "you> (fsagent)" not in shown.stdout
    rows = audit(workspace)
    undo_rows = [r for r in rows if r["decision"] == "undo"]
    assert undo_rows and {r["by"] for r in undo_rows} == {"piped"}
    assert len([r for r in rows if r["decision"] == "approve"]) == 10


def test_a_new_file_written_twice_in_one_message_is_taken_back_whole(workspace: Workspace):
    # The first write's record comes from the judge's plan (the file absent, its folder
    # there); the second's may not: the plan was made before the first write ran.
    (workspace.root / "sub").mkdir()
    before = tree_snapshot(workspace.root)
    calls = [
        tool_call("write_file", {"path": "sub/new.txt", "content": "one\n"}, id="c1"),
        tool_call("write_file", {"path": "sub/new.txt", "content": "two\n"}, id="c2"),
        tool_call("touch", {"path": "sub/new.txt"}, id="c3"),
    ]
    with FakeLLM(write_turn(calls), auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "write it\n", "--approve", "yes")
    assert wrote.returncode == 0, wrote.stderr
    assert (workspace.root / "sub" / "new.txt").read_text() == "two\n"

    undone = workspace.invoke(NO_LLM, "y\n", "undo", "t")

    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "cannot" not in undone.stdout
    assert "restores sub/new.txt to its content before write_file" in undone.stdout
    assert tree_snapshot(workspace.root) == before


def test_undo_refuses_a_file_changed_since_and_force_restores_it(workspace: Workspace):
    (workspace.root / "a.txt").write_text("old\n")
    calls = [tool_call("write_file", {"path": "a.txt", "content": "new\n"}, id="c1")]
    with FakeLLM(write_turn(calls), auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "change a\ny\n")
    assert wrote.returncode == 0, wrote.stderr
    (workspace.root / "a.txt").write_text("edited outside\n")

    refused = workspace.invoke(NO_LLM, "", "undo", "t")
    assert (workspace.root / "a.txt").read_text() == "edited outside\n"
    forced = workspace.invoke(NO_LLM, "y\n", "undo", "t", "--force")

    assert refused.returncode == 1
    # The diff shows what restoring would lose, and nothing was asked or run.
    assert "    -edited outside\n    +old" in refused.stdout
    assert "⚠ a.txt changed since write_file (its sha256 is not the one write_file left)" in (
        refused.stdout
    )
    assert "✗ Nothing was undone: files changed since the write" in refused.stdout
    assert "undo these changes?" not in refused.stdout
    assert forced.returncode == 0, forced.stderr
    assert "(--force: restored anyway)" in forced.stdout
    assert (workspace.root / "a.txt").read_text() == "old\n"
    [row] = [r for r in audit(workspace) if r["decision"] == "undo"]
    assert row["reason"] == "undoes write_file c1 of turn 1, forced"


def test_undo_at_the_prompt_after_a_restart_and_twice_does_nothing(workspace: Workspace):
    (workspace.root / "todo.md").write_text("- milk\n")
    edit = [{"old_text": "- milk\n", "new_text": "- milk\n- eggs\n"}]
    script = [
        *write_turn([tool_call("patch_file", {"path": "todo.md", "edits": edit}, id="c1")]),
        text("Fine."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "add eggs\ny\n")
        assert (workspace.root / "todo.md").read_text() == "- milk\n- eggs\n"
        # A new process: the thread, its records and the files are all it has.
        session = workspace.run(llm.base_url, "/undo\ny\n/undo\nanything else?\n")
        (workspace.root / "todo.md").write_text("- bread\n")
        again = workspace.invoke(NO_LLM, "y\n", "undo", "t")

    assert wrote.returncode == 0, wrote.stderr
    assert session.returncode == 0, session.stderr
    assert session.stdout.count("undo these changes? [y/n] y") == 1
    assert "Nothing to undo: the changes of turn 1 were undone already" in session.stdout
    [note] = [t for t in user_texts(llm.requests[-1]) if t.startswith("(fsagent)")]
    assert "restored todo.md to its content before patch_file" in note
    assert again.returncode == 0, again.stderr
    assert "Nothing to undo" in again.stdout
    assert (workspace.root / "todo.md").read_text() == "- bread\n"


def test_an_undo_killed_after_its_step_ran_is_finished_without_running_it_again(
    workspace: Workspace,
):
    (workspace.root / "log.txt").write_text("first\n")
    args = {"path": "log.txt", "content": "second\n", "mode": "append"}
    script = [*write_turn([tool_call("write_file", args, id="c1")]), text("Understood.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "log it\ny\n").returncode == 0
        undo = workspace.start(NO_LLM, "undo", "t", env={TEST_HOLD_ENV: "done"})
        undo.send("y")
        undo.wait_for(f"{HOLD_MARKER} 'done'")
        undo.kill()
        assert (workspace.root / "log.txt").read_text() == "first\n"
        (workspace.root / "log.txt").write_text("edited after the crash\n")

        finished = workspace.run(NO_LLM, "", "undo", "t")
        told = workspace.run(llm.base_url, "and now?\n")

    assert finished.returncode == 0, finished.stderr
    assert told.returncode == 0, told.stderr
    assert "The undo of turn 1 was cut off; finishing it." in finished.stdout
    # The step ran before the kill; its ledger row says so, and it did not run again.
    assert (workspace.root / "log.txt").read_text() == "edited after the crash\n"
    ledger = rows(workspace, "SELECT status FROM fsagent_ledger WHERE message_id LIKE 'undo-%'")
    runs = rows(workspace, "SELECT status FROM fsagent_undo_runs")
    assert ledger == [("done",)] and runs == [("done",)]
    assert len([r for r in audit(workspace) if r["decision"] == "undo"]) == 1
    notes = [t for t in user_texts(llm.requests[-1]) if t.startswith("(fsagent)")]
    assert len(notes) == 1 and "restored log.txt" in notes[0]


def test_what_cannot_be_undone_is_said_before_the_person_approves(workspace: Workspace):
    (workspace.root / "logo.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (workspace.root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (workspace.root / "run.sh").chmod(0o755)
    (workspace.root / "big.txt").write_text("x" * 1000 + "\n" + "y" * (1024 * 1024) + "\n")
    calls = [
        tool_call("write_file", {"path": "logo.bin", "content": "not a logo\n"}, id="c1"),
        tool_call("delete", {"path": "run.sh"}, id="c2"),
        tool_call("write_file", {"path": "big.txt", "content": "small\n"}, id="c3"),
    ]
    with FakeLLM(write_turn(calls), auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "clean up\ny\ny\ny\n")
        undone = workspace.invoke(NO_LLM, "y\n", "undo", "t")

    assert wrote.returncode == 0, wrote.stderr
    out = wrote.stdout
    binary = out.index("⚠ cannot be undone: what it replaces cannot be kept: it is a binary file")
    assert binary < out.index("write_file? [y/n/e/a/r/?] y")
    assert (
        "⚠ undo would not restore everything: run.sh would come back with mode 0o644, not 0o755"
    ) in out
    assert "⚠ cannot be undone: it would keep 1,049,578 bytes, over the limit of 1,048,576" in out
    # The writes ran all the same, after approval.
    assert (workspace.root / "logo.bin").read_text() == "not a logo\n"
    assert (workspace.root / "big.txt").read_text() == "small\n"

    assert undone.returncode == 0, undone.stderr
    assert "✗ cannot be undone: what it replaces cannot be kept: it is a binary file" in (
        undone.stdout
    )
    assert (workspace.root / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert (workspace.root / "logo.bin").read_text() == "not a logo\n"
    assert os.stat(workspace.root / "run.sh").st_mode & 0o777 == 0o644


def test_undo_names_a_call_or_a_turn_and_needs_an_idle_thread(workspace: Workspace):
    (workspace.root / "a.txt").write_text("A\n")
    script = [
        *write_turn([tool_call("write_file", {"path": "a.txt", "content": "A2\n"}, id="c1")]),
        *write_turn([tool_call("write_file", {"path": "b.txt", "content": "B\n"}, id="c2")]),
        reply(tool_calls=[tool_call("write_file", {"path": "c.txt", "content": "C\n"})]),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "one\n", "--approve", "yes").returncode == 0
        assert workspace.run(llm.base_url, "two\n", "--approve", "yes").returncode == 0
        unknown = workspace.invoke(NO_LLM, "", "undo", "t", "--call", "c9")
        no_turn = workspace.invoke(NO_LLM, "", "undo", "t", "--turn", "7")
        first = workspace.invoke(NO_LLM, "y\n", "undo", "t", "--turn", "1")
        by_call = workspace.invoke(NO_LLM, "y\n", "undo", "t", "--call", "c2")
        paused = workspace.run(llm.base_url, "three\n")
        waiting = workspace.invoke(NO_LLM, "y\n", "undo", "t")

    assert unknown.returncode == 1
    assert "no write call c9 ran in this thread; the calls are c2, c1" in unknown.stderr
    assert no_turn.returncode == 1
    assert "turn 7 ran no approved write; turns with writes: 1, 2" in no_turn.stderr
    assert first.returncode == 0, first.stderr
    assert (workspace.root / "a.txt").read_text() == "A\n"
    assert by_call.returncode == 0, by_call.stderr
    assert not (workspace.root / "b.txt").exists()
    assert paused.returncode == 3
    assert waiting.returncode == 1
    assert "thread 't' is waiting for approval; open it" in waiting.stderr
