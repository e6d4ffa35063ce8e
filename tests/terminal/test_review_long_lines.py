"""A change is never hidden by a long line (issue 28): a one-line config of about 2,000
characters whose registry is changed in its middle. Through the real CLI, piped and at a
pseudo-terminal, and through `fsagent approve`: the new host is on the screen before the
question, with the column it is at."""

from __future__ import annotations

import json

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen

OLD_HOST = "https://registry.npmjs.org/"
NEW_HOST = "https://npm.evil.example/x/"
BIG_REPLIES = ("--max-tokens", "30000")  # the stand-in counts a word as a token


def config(registry: str) -> str:
    """One line of JSON, about 2,000 characters, the registry in its middle."""
    before = {f"setting_{n:03}": f"value number {n}" for n in range(30)}
    after = {f"option_{n:03}": f"choice number {n}" for n in range(30)}
    return json.dumps({**before, "registry": registry, **after}) + "\n"


def rewrite_config(workspace: Workspace) -> list[dict]:
    (workspace.root / "settings.json").write_text(config(OLD_HOST))
    call = tool_call("write_file", {"path": "settings.json", "content": config(NEW_HOST)}, "c_cfg")
    return [reply(tool_calls=[call]), text("Left it alone.")]


def test_the_changed_span_of_a_long_line_is_shown_before_the_question_when_piped(
    workspace: Workspace,
):
    assert 1900 < len(config(OLD_HOST)) < 2200
    with FakeLLM(rewrite_config(workspace), auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "point npm elsewhere\nn: no\n", *BIG_REPLIES)

    assert result.returncode == 0, result.stderr
    shown, _, _ = result.stdout.partition("write_file? [y/n/e/a/r/?]")
    # The change starts after the shared "https://": the column is where the host does.
    column = config(OLD_HOST).index(OLD_HOST) + len("https://") + 1
    assert f'"registry": "{OLD_HOST}"' in shown and f'"registry": "{NEW_HOST}"' in shown
    assert f"col {column:,}" in shown  # where on the line the change is
    old_line = next(line for line in shown.splitlines() if OLD_HOST in line)
    new_line = next(line for line in shown.splitlines() if NEW_HOST in line)
    assert old_line.lstrip().startswith("-") and new_line.lstrip().startswith("+")
    assert "…" in old_line and len(old_line) < 200  # the rest of the line elided, and said
    assert (workspace.root / "settings.json").read_text() == config(OLD_HOST)


def test_the_changed_span_of_a_long_line_is_on_the_screen_at_a_terminal(workspace: Workspace):
    env = agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")}
    with FakeLLM(rewrite_config(workspace), auto_route="filesystem") as llm:
        term = PtyScreen(workspace.command(llm.base_url, *BIG_REPLIES), str(workspace.root), env)
        try:
            at = term.wait_for("you>")
            term.enter("point npm elsewhere")
            question = term.wait_for("write_file? [y/n/e/a/r/?]", at)
            screen = term.screen_text()[at:question]
            term.enter("n")
            at = term.wait_for("reason (optional", question)
            term.enter("")
            term.wait_for("you>", at)
            term.enter("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen_text()
    assert NEW_HOST in screen and OLD_HOST in screen
    assert (workspace.root / "settings.json").read_text() == config(OLD_HOST)


def test_fsagent_approve_prints_the_changed_span_before_it_decides(workspace: Workspace):
    with FakeLLM(rewrite_config(workspace), auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "point npm elsewhere\n", *BIG_REPLIES)
        assert paused.returncode == 3, paused.stderr
        asked = workspace.run(llm.base_url, "", "approve", "t", thread=None)

    assert asked.returncode == 3, asked.stderr
    assert "pass --yes to approve them as shown" in asked.stderr
    assert f'"registry": "{NEW_HOST}"' in asked.stdout
    assert f'"registry": "{OLD_HOST}"' in asked.stdout
    assert (workspace.root / "settings.json").read_text() == config(OLD_HOST)
