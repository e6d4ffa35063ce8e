"""A reasoning model's thinking: shown dimmed at a terminal, hidden with --hide-reasoning,
never in the transcript's answers, never sent back, never read as the route."""

from __future__ import annotations

import json
import re

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen

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


def test_reasoning_is_shown_dimmed_at_a_terminal_and_never_sent_back(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    transcript = workspace.root.parent / "t.jsonl"
    env = agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")}
    with FakeLLM(SCRIPT, flavour="llamacpp", context=8192) as llm:
        command = workspace.command(llm.base_url, "--transcript", str(transcript))
        screen = PtyScreen(command, str(workspace.root), env)
        try:
            at = screen.wait_for("you>")
            screen.enter("where did I write about milk?")
            at = screen.wait_for("agent> It is in notes.md.", at)
            at = screen.wait_for("you>", at)
            screen.enter("thanks")
            at = screen.wait_for("agent> You're welcome.", at)
            screen.wait_for("you>", at)
            screen.enter("quit")
        finally:
            code = screen.close()
        requests = llm.requests

    shown = screen.screen_text()
    assert code == 0, shown
    # Shown apart from the answer, before it, and dimmed; the router's thinking not at all.
    for thought, answer in (
        ("thinking> I will grep for it.", "agent> It is in notes.md."),
        ("thinking> The grep found one line, in notes.md.", "agent> It is in notes.md."),
        ("thinking> They only say thanks.", "agent> You're welcome."),
    ):
        assert 0 <= shown.find(thought) < shown.find(answer), shown
        assert re.search(rb"\x1b\[2m(\x1b\[[0-9;]*m)*" + re.escape(thought.encode()), screen.raw)
    assert "Maybe this is filesystem" not in shown
    # Read as the route: only the answers.
    assert "⇢ route: search" in shown and "⇢ route: general" in shown
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
