"""A yes means exactly what was shown (issue 19), through the real CLI, the real MCP server
and the scripted LM Studio stand-in: rules judge the path the server acts on, a person's
decision is final whatever the rules say later, and an approval is bound to the state its
preview showed.

The server decodes `\\xNN` in path arguments (mcp_servers/names.py `parse`), so the reading
that counts is the server's own: these tests write the escapes as a model would.
"""

from __future__ import annotations

import json
from pathlib import Path

from launcher import LAUNCHER
from race_pause import Pauses

from conftest import SERVER_LAUNCHER_ENV, Workspace, agent_env, tool_messages
from core.changes.binding import EDIT_PAUSE_ENV
from fake_llm import FakeLLM, reply, text, tool_call

ALLOW_DOCS = '[[rule]]\ntool = "write_file"\npath = "docs/**"\ndecision = "allow"\n'
DENY_SECRETS = '[[rule]]\ntool = "*"\npath = "secrets/**"\ndecision = "deny"\n'
ALLOW_DELETES = '[[rule]]\ntool = "delete"\npath = "**"\ndecision = "allow"\n'


def write(path: str, content: str = "new\n", id: str | None = None) -> dict:
    return tool_call("write_file", {"path": path, "content": content}, id=id)


def delete(path: str, id: str) -> dict:
    return tool_call("delete", {"path": path}, id=id)


def test_an_escaped_slash_cannot_walk_an_allow_rule_onto_the_rules_file(workspace: Workspace):
    rules = workspace.root / "fsagent.toml"
    rules.write_text(ALLOW_DOCS)
    (workspace.root / "docs").mkdir()
    loosened = '[[rule]]\ntool = "*"\npath = "**"\ndecision = "allow"\n'
    script = [reply(tool_calls=[write("docs/..\\x2ffsagent.toml", loosened)]), text("Done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "tidy the docs\n")
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stderr
    assert rules.read_text() == ALLOW_DOCS
    assert "allowed by rule" not in result.stdout
    assert "names 'fsagent.toml'; write the path plainly" in result.stdout
    assert "Not done" in answer["content"] and "fsagent.toml" in answer["content"]


def test_an_escaped_letter_cannot_dodge_a_deny_rule_under_approve_yes(workspace: Workspace):
    (workspace.root / "fsagent.toml").write_text(DENY_SECRETS)
    (workspace.root / "secrets").mkdir()
    script = [reply(tool_calls=[write("secret\\x73/key.txt", "leaked\n")]), text("Done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "save the key\n", "--approve", "yes")

    assert result.returncode == 0, result.stderr
    assert not (workspace.root / "secrets" / "key.txt").exists()
    assert "✓ write_file" not in result.stdout


def test_a_rule_glob_judges_the_path_the_server_resolves(workspace: Workspace):
    # Without escapes the plan and our old resolution agree; a deny still holds by plan.
    (workspace.root / "fsagent.toml").write_text(DENY_SECRETS)
    (workspace.root / "secrets").mkdir()
    (workspace.root / "docs").mkdir()  # a plan resolves `..` through folders that exist
    script = [reply(tool_calls=[write("docs/../secrets/key.txt")]), text("Refused.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "save\n", "--approve", "yes")
    assert "denied by rule 1" in result.stdout
    assert not (workspace.root / "secrets" / "key.txt").exists()


def test_deny_stays_a_no_after_the_rules_are_changed_to_allow_deletes(workspace: Workspace):
    old = workspace.root / "old.log"
    old.write_text("keep me\n")
    script = [reply(tool_calls=[delete("old.log", "call_d")]), text("Kept it.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "remove old.log\n")
        assert paused.returncode == 3  # end of input at the approval: paused
        (workspace.root / "fsagent.toml").write_text(ALLOW_DELETES)
        denied = workspace.run(llm.base_url, "", "deny", "t", "--reason", "keep it")

    assert denied.returncode == 0, denied.stderr
    assert old.read_text() == "keep me\n"
    assert "allowed by rule" not in denied.stdout
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "the person rejected delete" in answer["content"]


def test_approve_call_keeps_the_others_rejected_after_the_rules_change(workspace: Workspace):
    (workspace.root / "a.log").write_text("a")
    (workspace.root / "b.log").write_text("b")
    calls = [delete("a.log", "call_a"), delete("b.log", "call_b")]
    with FakeLLM([reply(tool_calls=calls), text("One gone.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "remove both\n")
        (workspace.root / "fsagent.toml").write_text(ALLOW_DELETES)
        approved = workspace.run(llm.base_url, "", "approve", "t", "--call", "call_a", "--yes")

    assert approved.returncode == 0, approved.stderr
    assert not (workspace.root / "a.log").exists()
    assert (workspace.root / "b.log").read_text() == "b"


def test_a_rule_allowed_call_is_asked_again_when_the_rules_no_longer_allow_it(
    workspace: Workspace,
):
    rules = workspace.root / "fsagent.toml"
    rules.write_text(ALLOW_DOCS)
    (workspace.root / "docs").mkdir()
    calls = [write("docs/a.md", id="call_rule"), write("b.md", id="call_person")]
    with FakeLLM([reply(tool_calls=calls), text("Done.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "write both\n")  # docs/a.md allowed, b.md asked: paused
        rules.write_text("")  # the allow rule is gone while the thread waits
        resumed = workspace.run(llm.base_url, "y\n")

    assert resumed.returncode == 3, resumed.stdout  # asked about docs/a.md again, no answer
    assert "[1/1] write_file(path='docs/a.md'" in resumed.stdout
    assert not (workspace.root / "docs" / "a.md").exists()
    assert not (workspace.root / "b.md").exists()  # nothing ran: the batch still waits


def test_a_file_edited_between_the_preview_and_the_yes_is_not_written_over(
    workspace: Workspace,
):
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    script = [reply(tool_calls=[write("notes.md", "version 2\n")]), text("Told.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("update the notes")
        agent.wait_for(
            "+version 2", timeout=120
        )  # the diff the person reads; the answer is awaited
        notes.write_text("the person's own edit\n")
        agent.send("y")
        agent.send("quit")
        assert agent.finish(timeout=120) == 0
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert notes.read_text() == "the person's own edit\n"
    assert "precondition failed: 'notes.md' changed since it was previewed" in answer["content"]
    assert "precondition failed" in agent.stdout


def test_an_edit_typed_after_the_file_changed_is_drawn_again_and_asked_again(
    workspace: Workspace,
):
    """Issue 41 at the terminal, piped: the person reads the call's diff against v1, the
    file becomes v2 behind the agent's back, and `e: {json}` is refused (v2 intact, nothing
    run), the fresh diff drawn and the call asked again; the same edit then, with nothing
    changed since, writes the edited content."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    script = [reply(tool_calls=[write("notes.md", "the model's notes\n")]), text("Told.")]
    edit = "e: " + json.dumps({"path": "notes.md", "content": "the person's notes\n"})
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("update the notes")
        agent.wait_for("+the model's notes", timeout=120)  # v1's diff, the answer awaited
        notes.write_text("version 2\n")
        agent.send(edit)
        agent.wait_for("changed since you looked", timeout=120)
        agent.wait_for("-version 2", timeout=120)  # the fresh diff, before it asks again
        assert notes.read_text() == "version 2\n"
        assert len(llm.requests_with_tools()) == 1  # nothing resumed
        agent.send(edit)
        agent.wait_for("Told.", timeout=120)
        agent.send("quit")
        assert agent.finish(timeout=120) == 0
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert notes.read_text() == "the person's notes\n"
    assert "edited this write_file call" in answer["content"]
    assert agent.stdout.count("write_file? [y/n/e/a/r/?]") == 2


def test_an_edit_is_refused_when_its_file_changes_between_the_bindings_two_reads(
    workspace: Workspace, tmp_path: Path
):
    """The terminal's edit is checked against the call's preview, then its own arguments are
    planned: a file changed between those two reads (the binding paused there,
    FSAGENT_TEST_EDIT_PAUSE) is refused too, never run with a state no one was shown."""
    notes = workspace.root / "notes.md"
    notes.write_text("version 1\n")
    script = [reply(tool_calls=[write("notes.md", "the model's notes\n")]), text("Told.")]
    edit = "e: " + json.dumps({"path": "notes.md", "content": "the person's notes\n"})
    pauses = Pauses(tmp_path / "pause")
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, env={EDIT_PAUSE_ENV: str(pauses.folder)})
        agent.send("update the notes")
        agent.wait_for("+the model's notes", timeout=120)
        agent.send(edit)
        assert pauses.next_line() == "paused edit bound"  # the call's preview still holds
        notes.write_text("version 2\n")
        pauses.go()
        agent.wait_for("changed since you looked", timeout=120)
        agent.wait_for("-version 2", timeout=120)
        assert notes.read_text() == "version 2\n"
        assert len(llm.requests_with_tools()) == 1  # nothing resumed
        agent.send("n")
        agent.wait_for("Told.", timeout=120)
        agent.send("quit")
        assert agent.finish(timeout=120) == 0

    assert notes.read_text() == "version 2\n"


def test_a_deleted_file_replaced_by_a_folder_is_not_deleted(workspace: Workspace):
    old = workspace.root / "old.log"
    old.write_text("11 bytes...")
    script = [reply(tool_calls=[tool_call("delete", {"path": "old.log", "recursive": True})])]
    with FakeLLM([*script, text("Stopped.")], auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("remove old.log")
        agent.wait_for("deletes file old.log (11 bytes)", timeout=120)
        old.unlink()
        old.mkdir()
        for index in range(50):
            (old / f"{index}.txt").write_text("keep")
        agent.send("y")
        agent.send("quit")
        assert agent.finish(timeout=120) == 0

    assert len(list(old.iterdir())) == 50


def test_approve_prints_the_preview_and_needs_yes_from_a_pipe(workspace: Workspace):
    (workspace.root / "notes.md").write_text("version 1\n")
    script = [reply(tool_calls=[write("notes.md", "version 2\n")]), text("Updated.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "update\n")
        refused = workspace.run(llm.base_url, "", "approve", "t")
        approved = workspace.run(llm.base_url, "", "approve", "t", "--yes")

    assert refused.returncode == 3
    assert "-version 1" in refused.stdout and "+version 2" in refused.stdout
    assert refused.stderr.strip().splitlines() == [
        "fsagent: approve t: stdin is not a terminal, so no one read the previews above; "
        "pass --yes to approve them as shown. Nothing was run"
    ]
    assert approved.returncode == 0, approved.stderr
    assert "+version 2" in approved.stdout
    assert (workspace.root / "notes.md").read_text() == "version 2\n"


def test_approve_from_another_folder_acts_in_the_roots_the_thread_was_started_with(
    workspace: Workspace,
):
    other = workspace.outside / "elsewhere"
    other.mkdir()
    script = [reply(tool_calls=[write("hello.txt", id="call_h")]), text("Created.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "create hello.txt\n")
        command = workspace.command(llm.base_url, "approve", "t", "--yes", thread=None)
        without_root = [
            part for part in command if part != "--root" and part != str(workspace.root)
        ]
        # Run from the other folder (`run` runs in the root): forked by the worker's
        # launcher as `run` forks, stdin a pipe, so not a terminal: refused, not asked.
        env = {**agent_env(), SERVER_LAUNCHER_ENV: LAUNCHER.started()}
        refused = LAUNCHER.run(
            [*command[2:4], "--root", str(other), *command[6:]],
            input="",
            env=env,
            cwd=other,
            timeout=120,
        )
        approved = LAUNCHER.run(without_root[2:], input="", env=env, cwd=other, timeout=120)

    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"fsagent: thread 't' was started with --root {workspace.root.resolve()}, not --root "
        f"{other.resolve()}; leave --root out to act in its roots, or pass --other-root to "
        "act in these"
    ]
    assert approved.returncode == 0, approved.stderr
    assert (workspace.root / "hello.txt").read_text() == "new\n"
    assert not (other / "hello.txt").exists()


def test_previews_count_whole_folders_name_links_and_keep_the_destination(workspace: Workspace):
    many = workspace.root / "many"
    many.mkdir()
    for index in range(1500):
        (many / f"f{index}.txt").write_text("x")
    (workspace.root / "config.real").write_text("real\n")
    (workspace.root / "config.yaml").symlink_to("config.real")
    (workspace.root / "new.yaml").write_text("new\n")
    far = "x/../" * 80 + "landed.txt"  # 410 characters: longer than a preview line
    (workspace.root / "x").mkdir()
    calls = [
        tool_call("delete", {"path": "many", "recursive": True}, id="call_d"),
        tool_call("copy", {"source": "new.yaml", "destination": "config.yaml", "overwrite": True}),
        tool_call("move", {"source": "new.yaml", "destination": far}),
    ]
    with FakeLLM([reply(tool_calls=calls), text("Stopped.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "tidy\nn\nn\nn\n", timeout=240)

    assert "deletes folder many/ with 1,500 files in 0 folders, 1,500 bytes" in result.stdout
    assert "overwrites the symlink config.yaml (-> config.real; the link, not its target)" in (
        result.stdout
    )
    assert "moves file new.yaml (4 bytes) -> landed.txt" in result.stdout
    assert len(list(many.iterdir())) == 1500


def test_a_deny_rule_added_while_waiting_rejects_the_approval(workspace: Workspace):
    (workspace.root / "secrets").mkdir()
    script = [reply(tool_calls=[write("secrets/a.md", id="call_s")]), text("Refused.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "save it\n")
        (workspace.root / "fsagent.toml").write_text(DENY_SECRETS)
        approved = workspace.run(llm.base_url, "", "approve", "t", "--yes")

    assert approved.returncode == 0, approved.stderr
    assert not (workspace.root / "secrets" / "a.md").exists()
    assert "denied by rule 1" in approved.stdout


def test_a_deny_on_a_folder_holds_for_a_link_in_it_that_points_out(workspace: Workspace):
    # delete acts on the link itself (the server's resolve_entry): the rule judges docs/link.md,
    # not notes.md, where the link points.
    (workspace.root / "docs").mkdir()
    (workspace.root / "notes.md").write_text("notes\n")
    (workspace.root / "docs" / "link.md").symlink_to("../notes.md")
    (workspace.root / "fsagent.toml").write_text(
        '[[rule]]\ntool = "delete"\npath = "docs/**"\ndecision = "deny"\n'
    )
    script = [reply(tool_calls=[delete("docs/link.md", "call_l")]), text("Refused.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "clean docs\n", "--approve", "yes")

    assert "denied by rule 1" in result.stdout
    assert (workspace.root / "docs" / "link.md").is_symlink()


def test_each_call_written_as_text_is_decided_by_its_own_answer(workspace: Workspace):
    # A small model writes its calls in its text; each read call gets an id of its own, so
    # the person's second answer decides the second call only.
    written = "\n".join(
        "<tool_call>"
        + json.dumps({"name": "write_file", "arguments": {"path": name, "content": "x\n"}})
        + "</tool_call>"
        for name in ("a.md", "b.md")
    )
    with FakeLLM([text(written), text("One of two.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "write both\ny\nn\n")
        answers = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "a.md").read_text() == "x\n"
    assert not (workspace.root / "b.md").exists()
    assert len({answer["tool_call_id"] for answer in answers}) == 2
    assert "the person rejected write_file" in answers[1]["content"]
