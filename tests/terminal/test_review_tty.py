"""The review as a person at a terminal sees it: the real CLI on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import threading
import time

from conftest import Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call


class Terminal:
    """fsagent on a pty: what it prints is read as it comes; keys are typed into it."""

    def __init__(self, command: list[str], cwd: str, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
        )
        os.close(slave)
        self.screen = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.screen += data.decode(errors="replace")

    def wait_for(self, text: str, after: int = 0, timeout: float = 30) -> int:
        """Where `text` shows up on the screen after position `after`."""
        deadline = time.monotonic() + timeout
        while (found := self.screen.find(text, after)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {timeout}s:\n{self.screen[after:]}")
            time.sleep(0.02)
        return found + len(text)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code


def test_at_a_terminal_the_review_asks_again_helps_and_edits_in_the_editor(
    workspace: Workspace,
):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [
        reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hello\n"})]),
        text("Saved your version."),
    ]
    env = agent_env() | {"EDITOR": "sed -i s/hello/HELLO/", "TERM": "xterm"}
    with FakeLLM(script, auto_route="filesystem") as llm:
        term = Terminal(workspace.command(llm.base_url), str(workspace.root), env)
        try:
            at = term.wait_for("you> ")
            term.type("say hello")
            at = term.wait_for("write_file? [y/n/e/a/r/?] ", at)
            term.type("maybe")
            at = term.wait_for("is not an answer; ? shows the answers", at)
            at = term.wait_for("write_file? [y/n/e/a/r/?] ", at)
            term.type("?")
            at = term.wait_for("edit: change it before it runs", at)
            at = term.wait_for("write_file? [y/n/e/a/r/?] ", at)
            term.type("e")
            at = term.wait_for("agent> Saved your version.", at)
            term.wait_for("you> ", at)
            term.type("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen
    # The diff was coloured for the terminal, and the person's edit is what was written.
    assert "\x1b[32m+hello\x1b[0m" in term.screen and "\x1b[31m-hi\x1b[0m" in term.screen
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
    with FakeLLM(script, auto_route="filesystem") as llm:
        term = Terminal(workspace.command(llm.base_url), str(workspace.root), agent_env())
        try:
            at = term.wait_for("you> ")
            term.type("add milk")
            at = term.wait_for("? The agent asks: Which list?", at)
            at = term.wait_for("answer> ", at)
            term.type("")  # an empty answer is asked again
            at = term.wait_for("type an answer", at)
            at = term.wait_for("answer> ", at)
            term.type("2")
            at = term.wait_for("write_file? [y/n/e/a/r/?] ", at)
            term.type("r")
            at = term.wait_for("your answer (the model reads it as the result)> ", at)
            term.type("no new file: the list lives in notes/todo.md")
            at = term.wait_for("agent> Understood, I will use notes/todo.md.", at)
            term.wait_for("you> ", at)
            term.type("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen
    assert not (workspace.root / "todo-list.md").exists()
    requests = llm.requests_with_tools()
    [answer] = tool_messages(requests[1])
    assert answer["content"] == "The person answered: todo.md"
    [responded] = tool_messages(requests[2])[1:]
    assert responded["tool_call_id"] == "call_w"
    assert responded["content"].endswith(
        "The person's answer: no new file: the list lives in notes/todo.md"
    )
