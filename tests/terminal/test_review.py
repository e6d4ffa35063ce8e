"""Review end to end: one decision per write call, previews, edits, rules, grants, modes and the
audit log, through the real CLI, the real MCP server and the scripted LM Studio stand-in."""

from __future__ import annotations

import json

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: audit must not need LM Studio


def audit_rows(workspace: Workspace, *args: str) -> list[dict]:
    """`fsagent audit --json`, which needs neither LM Studio nor the MCP server: in-process."""
    result = workspace.invoke(NO_LLM, "", "audit", "--json", *args, thread=None)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def decisions(rows: list[dict]) -> list[tuple[str, str, str]]:
    return [(row["tool"], row["decision"], row["by"]) for row in rows]


def write(path: str, content: str = "new\n", id: str | None = None) -> dict:
    return tool_call("write_file", {"path": path, "content": content}, id=id)


def test_each_write_is_decided_alone_and_the_read_beside_them_runs(workspace: Workspace):
    (workspace.root / "a.md").write_text("old\nsame\n")
    (workspace.root / "notes.md").write_text("buy milk\n")
    calls = [
        write("a.md", "new\nsame\n"),
        write("b.md"),
        tool_call("read_file", {"path": "notes.md"}),
    ]
    script = [reply(tool_calls=calls), text("a.md changed, b.md left alone.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "change a, add b\ny\nn: keep b out of it\n")

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "a.md").read_text() == "new\nsame\n"
    assert not (workspace.root / "b.md").exists()
    out = result.stdout
    assert "⚠ Approval needed. The agent wants to run:" in out
    assert "[1/2] write_file(path='a.md', content=<9 chars, below>)" in out
    # The diff of the existing file, and the head of the new one, before each question.
    assert "    -old\n    +new\n     same" in out
    assert "    new file b.md, 1 line, 4 bytes:\n    +new" in out
    assert "  write_file? [y/n/e/a/r/?] n: keep b out of it" in out
    answers = [m["content"] for m in tool_messages(llm.requests_with_tools()[1])]
    assert '"new_sha256"' in answers[0]
    assert "rejected write_file" in answers[1] and "keep b out of it" in answers[1]
    assert answers[2] == "buy milk\n"  # the read ran although a write was rejected

    rows = audit_rows(workspace)
    assert decisions(rows) == [
        ("write_file", "approve", "piped"),
        ("write_file", "reject", "piped"),
    ]
    assert rows[1]["reason"] == "keep b out of it" and rows[1]["thread"] == "t"
    assert rows[1]["args"] == {"path": "b.md", "content": "new\n"}


def test_an_edited_path_lands_the_file_there_and_the_model_is_told(workspace: Workspace):
    edited = {"path": "final/notes.md", "content": "hello\n"}
    script = [reply(tool_calls=[write("draft.md", "hello\n")]), text("Wrote final/notes.md.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, f"save notes\ne: {json.dumps(edited)}\n")

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "final" / "notes.md").read_text() == "hello\n"
    assert not (workspace.root / "draft.md").exists()
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "The person edited this write_file call" in answer["content"]
    assert 'path: "draft.md" -> "final/notes.md"' in answer["content"]
    assert "do not redo" in answer["content"]
    [row] = audit_rows(workspace)
    assert (row["decision"], row["by"], row["args"]) == ("edit", "piped", edited)


def test_rules_deny_under_approve_yes_and_allow_only_resolved_paths(workspace: Workspace):
    (workspace.root / "secret.md").write_text("keep\n")
    (workspace.root / "fsagent.toml").write_text(
        '[[rule]]\ntool = "*"\npath = "secret.md"\ndecision = "deny"\n'
    )
    allow_docs = workspace.outside / "allow-docs.toml"
    allow_docs.write_text('[[rule]]\ntool = ["write_file"]\npath = "docs/**"\ndecision = "allow"\n')
    (workspace.root / "docs").mkdir()

    script = [reply(tool_calls=[write("secret.md"), write("other.md")]), text("One was denied.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        yes = workspace.run(llm.base_url, "write both\n", "--approve", "yes", thread="yes")
        [denied, approved] = tool_messages(llm.requests_with_tools()[1])

    assert yes.returncode == 0, yes.stderr
    assert "--approve yes: every write that no rule denies runs without asking." in yes.stdout
    assert "Approval needed" not in yes.stdout
    assert "✗ write_file: denied by rule 1 of fsagent.toml (deny * on secret.md)" in yes.stdout
    assert (workspace.root / "secret.md").read_text() == "keep\n"
    assert (workspace.root / "other.md").read_text() == "new\n"
    assert "denied by rule 1 of fsagent.toml" in denied["content"]
    assert "Do not retry" in denied["content"] and '"new_sha256"' in approved["content"]

    script = [
        reply(tool_calls=[write("docs/guide.md"), write("docs/../secret2.md")]),
        text("The second one needs you."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        ask = workspace.run(llm.base_url, "write docs\nn\n", "--policy", str(allow_docs))

    assert ask.returncode == 0, ask.stderr
    assert (workspace.root / "docs" / "guide.md").read_text() == "new\n"
    assert "✓ write_file: allowed by rule 1 of allow-docs.toml" in ask.stdout
    assert "[1/1] write_file(path='docs/../secret2.md'" in ask.stdout
    assert not (workspace.root / "secret2.md").exists()

    assert decisions(audit_rows(workspace, "--thread", "yes")) == [
        ("write_file", "reject", "rule"),
        ("write_file", "approve", "mode"),
    ]
    rows = audit_rows(workspace, "--thread", "t")
    assert decisions(rows) == [("write_file", "approve", "rule"), ("write_file", "reject", "piped")]
    assert "allow-docs.toml" in rows[0]["reason"]


def test_approve_no_refuses_every_write_and_runs_reads(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    calls = [write("new.md"), tool_call("read_file", {"path": "notes.md"})]
    with FakeLLM([reply(tool_calls=calls), text("Read only.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "go\n", "--approve", "no")

    assert result.returncode == 0, result.stderr
    assert "--approve no: every write is refused; reads still run." in result.stdout
    assert not (workspace.root / "new.md").exists()
    refused, read = (m["content"] for m in tool_messages(llm.requests_with_tools()[1]))
    assert "--approve no" in refused and read == "buy milk\n"
    assert decisions(audit_rows(workspace)) == [("write_file", "reject", "mode")]


def test_a_grant_covers_the_next_matching_call_and_no_other(workspace: Workspace):
    (workspace.root / "docs").mkdir()
    script = [
        reply(tool_calls=[write("docs/a.md")]),
        text("a done"),
        reply(tool_calls=[write("docs/b.md")]),  # same tool, same folder: granted
        text("b done"),
        reply(tool_calls=[write("top.md"), tool_call("touch", {"path": "docs/c.md"})]),
        text("neither"),
        reply(tool_calls=[write("docs/d.md")]),  # after /revoke: asked again
        text("not d"),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        first = workspace.run(llm.base_url, "write a\na\nwrite b\nwrite c\nn\nn\n")
        second = workspace.run(llm.base_url, "/grants\n/revoke 1\nwrite d\nn\n")

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert (workspace.root / "docs" / "b.md").exists()
    assert "✓ write_file: granted: write_file inside docs/" in first.stdout
    assert first.stdout.count("⚠ Approval needed") == 2  # a, then top.md and touch
    assert not (workspace.root / "top.md").exists()
    assert not (workspace.root / "docs" / "c.md").exists()
    assert "Grants in this thread" in second.stdout.split("Type a prompt")[0]  # the banner
    assert "  1. write_file inside docs/" in second.stdout
    assert "Revoked: write_file inside docs/." in second.stdout
    assert "[1/1] write_file(path='docs/d.md'" in second.stdout
    assert not (workspace.root / "docs" / "d.md").exists()
    assert decisions(audit_rows(workspace)) == [
        ("write_file", "grant", "piped"),
        ("write_file", "approve", "grant"),
        ("write_file", "reject", "piped"),
        ("touch", "reject", "piped"),
        ("write_file", "reject", "piped"),
    ]


def test_a_rule_file_with_a_typo_stops_fsagent_at_start(workspace: Workspace):
    (workspace.root / "fsagent.toml").write_text(
        '[[rule]]\ntool = "write_file"\npath = "docs/**"\ndecision = "alow"\n'
    )
    with FakeLLM([]) as llm:
        result = workspace.run(llm.base_url, "hello\n")

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"fsagent: {workspace.root / 'fsagent.toml'}: rule 1: unknown decision 'alow' "
        "(use allow, ask or deny)"
    ]
    assert "you>" not in result.stdout


def test_a_piped_non_answer_runs_nothing_and_leaves_the_thread_paused(workspace: Workspace):
    script = [reply(tool_calls=[write("hello.txt")]), text("Created hello.txt.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        refused = workspace.run(llm.base_url, "create hello.txt\nsure, why not\n")
        assert not (workspace.root / "hello.txt").exists()
        resumed = workspace.run(llm.base_url, "y\n")

    assert refused.returncode == 3
    assert refused.stderr.strip().splitlines() == [
        "fsagent: not an answer at the approval: 'sure, why not' is not an answer (answer y, "
        "yes, n, no, n: reason, e: {json arguments}, r: text, or a); nothing was run, the "
        "thread stays paused"
    ]
    assert "paused: waiting for your approval of write_file(path='hello.txt'" in resumed.stdout
    assert (workspace.root / "hello.txt").read_text() == "new\n"
    assert decisions(audit_rows(workspace)) == [("write_file", "approve", "piped")]


def test_a_folder_delete_shows_what_would_go_and_cannot_be_edited(workspace: Workspace):
    old = workspace.root / "old"
    (old / "sub").mkdir(parents=True)
    for name, data in (("a.txt", "aa"), ("b.txt", "bbb"), ("sub/c.txt", "c")):
        (old / name).write_text(data)
    call = tool_call("delete", {"path": "old", "recursive": True})
    with FakeLLM([reply(tool_calls=[call]), text("Kept it.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "remove old\ne\n")

    assert result.returncode == 3  # `e` is not offered for delete, so it is not an answer
    assert "    deletes folder old/ with 3 files in 1 folder, 6 bytes" in result.stdout
    assert "  delete? [y/n/a/r/?] e" in result.stdout
    assert "delete can only be answered y, n, a, r" in result.stderr
    assert (old / "sub" / "c.txt").exists()


def test_a_piped_respond_answers_in_the_calls_place(workspace: Workspace):
    (workspace.root / "notes").mkdir()
    (workspace.root / "notes" / "todo.md").write_text("- milk\n")
    script = [
        reply(tool_calls=[write("todo-list.md", "- water the plants\n", id="call_w")]),
        text("Understood: the list lives in notes/todo.md."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(
            llm.base_url,
            "start a todo list\nr: don't create it, the list lives in notes/todo.md\n",
        )
        bare = workspace.run(llm.base_url, "", "threads", "show", "t")

    assert result.returncode == 0, result.stderr
    assert not (workspace.root / "todo-list.md").exists()
    assert "  write_file? [y/n/e/a/r/?] r: don't create it" in result.stdout
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert answer["tool_call_id"] == "call_w"
    assert answer["content"] == (
        "The person answered instead of running write_file (it did not run; nothing was "
        "changed). The person's answer: don't create it, the list lives in notes/todo.md"
    )
    assert decisions(audit_rows(workspace)) == [("write_file", "respond", "piped")]
    assert audit_rows(workspace)[0]["reason"] == (
        "don't create it, the list lives in notes/todo.md"
    )
    assert "The person's answer: don't create it" in bare.stdout


def test_a_piped_respond_without_text_is_not_an_answer(workspace: Workspace):
    script = [reply(tool_calls=[write("a.md")]), text("Done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "write a.md\nr\n")

    assert result.returncode == 3
    assert "a piped respond carries its text (r: text)" in result.stderr
    assert not (workspace.root / "a.md").exists()
    assert len(llm.requests_with_tools()) == 1
