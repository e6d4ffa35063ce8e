"""Fail closed (issue 28): a call the server cannot plan is never judged on its text, and a
person's edit is judged on its own plan. The real CLI, the real MCP server on a temp folder
(run without root's right to read what it does not own, as a person's fsagent would be), a
real SQLite file and the LM Studio stand-in.

The attack: a deny rule on `important/**`, `--approve yes`, and `important/x.db` that
fsagent may not read. The model writes `inbox/..\\x2fimportant/x.db`: the server decodes it
to `important/x.db`, but cannot hash the file, so its plan fails. Judged on its text, the
path was `inbox/..\\x2fimportant/x.db`, which no rule covers, and the file was deleted
unasked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call

OTHER = 12345  # a uid that is not fsagent's
# fsagent as a person runs it: without root's right to read or search what it does not own.
NO_DAC = "-dac_override,-dac_read_search"
AS_A_PERSON = ["setpriv", "--bounding-set", NO_DAC, "--inh-caps", NO_DAC]
DENY_IMPORTANT = '[[rule]]\ntool = "*"\npath = "important/**"\ndecision = "deny"\n'
DENY_SECRETS = '[[rule]]\ntool = "*"\npath = "secrets/**"\ndecision = "deny"\n'
DISGUISED = "inbox/..\\x2fimportant/x.db"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another")


def unreadable_db(root: Path) -> Path:
    (root / "inbox").mkdir()
    (root / "important").mkdir()
    (root / "fsagent.toml").write_text(DENY_IMPORTANT)
    db = root / "important" / "x.db"
    db.write_bytes(b"SQLite format 3\x00 the ledger")
    os.chown(db, OTHER, OTHER)
    db.chmod(0o600)
    return db


def run_as_a_person(
    workspace: Workspace, base_url: str, stdin: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_A_PERSON, *workspace.command(base_url, *args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=workspace.root,
        env=agent_env(),
    )


@needs_root
def test_a_call_the_server_cannot_plan_is_refused_under_approve_yes(workspace: Workspace):
    db = unreadable_db(workspace.root)
    script = [reply(tool_calls=[tool_call("delete", {"path": DISGUISED}, id="call_d")])]
    with FakeLLM([*script, text("Refused.")], auto_route="filesystem") as llm:
        result = run_as_a_person(workspace, llm.base_url, "tidy the inbox\n", "--approve", "yes")
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stderr
    os.chown(db, 0, 0)  # to read it back here
    assert db.read_bytes() == b"SQLite format 3\x00 the ledger"
    assert "Approval needed" not in result.stdout  # refused, not asked: no one is there
    said = "--approve yes does not run it"
    assert said in result.stdout, result.stdout
    assert "Not done" in answer["content"] and said in answer["content"]
    assert "✓ delete" not in result.stdout


@needs_root
def test_a_call_the_server_cannot_plan_is_asked_with_the_plan_s_error(workspace: Workspace):
    db = unreadable_db(workspace.root)
    script = [reply(tool_calls=[tool_call("delete", {"path": DISGUISED}, id="call_d")])]
    with FakeLLM([*script, text("Kept it.")], auto_route="filesystem") as llm:
        result = run_as_a_person(workspace, llm.base_url, "tidy the inbox\nn\n")

    assert result.returncode == 0, result.stderr
    os.chown(db, 0, 0)
    assert db.read_bytes() == b"SQLite format 3\x00 the ledger"
    # Asked, not decided by the rules on the text the model wrote; the person reads why.
    assert "Approval needed" in result.stdout
    assert "⚠ not planned by the server (" in result.stdout, result.stdout
    assert "no rule judged where this lands" in result.stdout


def test_a_persons_edit_is_judged_on_its_own_plan(workspace: Workspace):
    """The rules judge the path the edit names, as the server reads it: not the original
    call's path, and not the edit's text (`secret\\x73` reads as `secrets` only there)."""
    (workspace.root / "fsagent.toml").write_text(DENY_SECRETS)
    (workspace.root / "secrets").mkdir()
    calls = [
        tool_call("write_file", {"path": "notes.md", "content": "n\n"}, id="call_w"),
        tool_call("write_file", {"path": "todo.md", "content": "t\n"}, id="call_v"),
    ]
    plain = 'e: {"path": "secrets/key.md", "content": "leaked\\n"}'
    escaped = 'e: {"path": "secret\\\\x73/other.md", "content": "leaked\\n"}'
    with FakeLLM([reply(tool_calls=calls), text("Not done.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, f"write the notes\n{plain}\n{escaped}\n")
        denied, disguised = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in workspace.root.rglob("*")) == ["fsagent.toml", "secrets"]
    assert "denied by rule 1" in result.stdout
    assert denied["tool_call_id"] == "call_w" and "denied by rule 1" in denied["content"]
    assert "names 'secrets/other.md'; write the path plainly" in disguised["content"]


def test_an_edit_the_server_cannot_plan_is_refused(workspace: Workspace):
    call = tool_call("write_file", {"path": "notes.md", "content": "n\n"}, id="call_w")
    edit = 'e: {"path": "nowhere/../notes.md", "content": "mine\\n"}'  # no folder `nowhere`
    with FakeLLM([reply(tool_calls=[call]), text("Not done.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, f"write the notes\n{edit}\n")
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stderr
    assert not (workspace.root / "notes.md").exists()
    said = "the edited arguments could not be planned"
    assert said in result.stdout and said in answer["content"]
