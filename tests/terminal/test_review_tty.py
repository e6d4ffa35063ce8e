"""The review as a person at a terminal sees it: the real CLI on a pseudo-terminal."""

from __future__ import annotations

from conftest import Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen


def test_at_a_terminal_the_review_asks_again_helps_and_edits_in_the_editor(
    workspace: Workspace,
):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [
        reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hello\n"})]),
        text("Saved your version."),
    ]
    env = agent_env() | {
        "EDITOR": "sed -i s/hello/HELLO/",
        "XDG_STATE_HOME": str(workspace.root.parent / "state"),
    }
    with FakeLLM(script, auto_route="filesystem") as llm:
        term = PtyScreen(workspace.command(llm.base_url), str(workspace.root), env)
        try:
            at = term.wait_for("you>")
            term.enter("say hello")
            at = term.wait_for("write_file? [y/n/e/a/r/?]", at)
            term.enter("maybe")
            at = term.wait_for("is not an answer; ? shows the answers", at)
            at = term.wait_for("write_file? [y/n/e/a/r/?]", at)
            term.enter("?")
            at = term.wait_for("edit: change it before it runs", at)
            at = term.wait_for("write_file? [y/n/e/a/r/?]", at)
            term.enter("e")
            at = term.wait_for("agent> Saved your version.", at)
            term.wait_for("you>", at)
            term.enter("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen_text()
    # The diff was coloured for the terminal, and the person's edit is what was written.
    assert b"\x1b[32m+hello\x1b[0m" in term.raw and b"\x1b[31m-hi\x1b[0m" in term.raw
    assert (workspace.root / "hello.txt").read_text() == "HELLO\n"
    [result] = tool_messages(llm.requests_with_tools()[1])
    assert "The person edited this write_file call" in result["content"]


def test_at_a_terminal_the_model_asks_and_the_person_responds_in_a_calls_place(
    workspace: Workspace,
):
    ask = {"question": "Which list?", "choices": ["notes/todo.md", "todo.md"]}
    create = {"path": "todo-list.md", "content": "- milk\n"}
    script = [
        reply(tool_calls=[tool_call("ask_person", ask, id="call_q")]),
        reply(tool_calls=[tool_call("write_file", create, id="call_w")]),
        text("Understood, I will use notes/todo.md."),
    ]
    env = agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")}
    with FakeLLM(script, auto_route="filesystem") as llm:
        term = PtyScreen(workspace.command(llm.base_url), str(workspace.root), env)
        try:
            at = term.wait_for("you>")
            term.enter("add milk")
            at = term.wait_for("? The agent asks: Which list?", at)
            at = term.wait_for("answer>", at)
            term.enter("")  # an empty answer is asked again
            at = term.wait_for("type an answer", at)
            at = term.wait_for("answer>", at)
            term.enter("2")
            at = term.wait_for("write_file? [y/n/e/a/r/?]", at)
            term.enter("r")
            at = term.wait_for("your answer (the model reads it as the result)>", at)
            term.enter("no new file: the list lives in notes/todo.md")
            at = term.wait_for("agent> Understood, I will use notes/todo.md.", at)
            term.wait_for("you>", at)
            term.enter("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen_text()
    assert not (workspace.root / "todo-list.md").exists()
    requests = llm.requests_with_tools()
    [answer] = tool_messages(requests[1])
    assert answer["content"] == "The person answered: todo.md"
    [responded] = tool_messages(requests[2])[1:]
    assert responded["tool_call_id"] == "call_w"
    assert responded["content"].endswith(
        "The person's answer: no new file: the list lives in notes/todo.md"
    )
