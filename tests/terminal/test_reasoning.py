"""A reasoning model's thinking: shown dimmed at a terminal, hidden with --hide-reasoning,
never in the transcript's answers, never sent back, never read as the route."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading
import time

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call

DIM = "\x1b[2m"

SCRIPT = [
    # The router thinks aloud about another route; only its answer counts.
    reply("search", reasoning="Maybe this is filesystem work? No: they want to find text."),
    reply(tool_calls=[tool_call("grep", {"pattern": "milk"})], reasoning="I will grep for it."),
    reply("It is in notes.md.", reasoning="The grep found one line, in notes.md."),
    # A model that thinks inside its content instead, router and agent alike.
    text("<think>filesystem, since a file is named?</think>general"),
    text("<think>They only say thanks.</think>You're welcome."),
]
THOUGHTS = (
    "Maybe this is filesystem",
    "I will grep",
    "The grep found",
    "filesystem, since",
    "only say",
)


class Screen:
    """fsagent on a pseudo-terminal: what it prints, read as it comes."""

    def __init__(self, command: list[str], cwd: str, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True
        )
        os.close(slave)
        self.text = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.text += data.decode(errors="replace")

    def wait_for(self, wanted: str, after: int = 0, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while (found := self.text.find(wanted, after)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {wanted!r} within {timeout}s:\n{self.text[after:]}")
            time.sleep(0.02)
        return found + len(wanted)

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code


def test_reasoning_is_shown_dimmed_at_a_terminal_and_never_sent_back(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    transcript = workspace.root.parent / "t.jsonl"
    env = agent_env() | {"TERM": "xterm"}
    with FakeLLM(SCRIPT, flavour="llamacpp", context=8192) as llm:
        command = workspace.command(llm.base_url, "--transcript", str(transcript))
        screen = Screen(command, str(workspace.root), env)
        try:
            at = screen.wait_for("you> ")
            screen.type("where did I write about milk?")
            at = screen.wait_for("agent> It is in notes.md.", at)
            at = screen.wait_for("you> ", at)
            screen.type("thanks")
            at = screen.wait_for("agent> You're welcome.", at)
            screen.wait_for("you> ", at)
            screen.type("quit")
        finally:
            code = screen.close()
        requests = llm.requests

    assert code == 0, screen.text
    # Shown, dimmed, apart from the answer; the router's thinking is not shown at all.
    joined = screen.text.replace(f"\x1b[0m{DIM}", "")  # each streamed piece is dimmed alone
    assert f"{DIM}thinking> I will grep for it.\x1b[0m\r\n" in joined
    assert f"{DIM}thinking> The grep found one line, in notes.md.\x1b[0m\r\nagent> " in joined
    assert f"{DIM}thinking> They only say thanks.\x1b[0m\r\nagent> You're welcome." in joined
    assert "Maybe this is filesystem" not in screen.text
    # Read as the route: only the answers.
    assert "⇢ route: search" in screen.text and "⇢ route: general" in screen.text
    # Never sent back to the model, in any later request.
    sent = json.dumps(requests)
    assert not any(thought in sent for thought in THOUGHTS)
    assert "<think>" not in sent
    # Kept out of the transcript's answers.
    answers = [
        json.loads(line)["text"]
        for line in transcript.read_text().splitlines()
        if json.loads(line)["event"] == "answer"
    ]
    assert answers == ["It is in notes.md.", "You're welcome."]


def test_hide_reasoning_shows_only_the_answers(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    with FakeLLM(SCRIPT, flavour="llamacpp", context=8192) as llm:
        hidden = workspace.run(
            llm.base_url, "where did I write about milk?\nthanks\n", "--hide-reasoning"
        )

    assert hidden.returncode == 0, hidden.stderr
    assert "agent> It is in notes.md." in hidden.stdout
    assert "agent> You're welcome." in hidden.stdout
    assert "thinking>" not in hidden.stdout
    assert not any(thought in hidden.stdout for thought in THOUGHTS)
