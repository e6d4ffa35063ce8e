"""The person's AGENTS.md through the real CLI (piped, against the stand-in model, which keeps
every request it got): sent right after the system prompt, the same bytes in every request;
found from the first root up to the repository's top and no further; held to an eighth of the
context with a visible marker; said in the banner; listed, escaped, by /context; left out with
--no-instructions."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import Workspace, agent_env
from core.context.budget import estimate_text
from core.context.prompts import SYSTEM_PROMPT
from fake_llm import FakeLLM, text
from pty_screen import PtyScreen

CUT_MARK = "[fsagent: the instructions are cut here"


def systems(llm: FakeLLM) -> list[str]:
    """Each request's system message, in order."""
    return [
        r["messages"][0]["content"] for r in llm.requests if r["messages"][0]["role"] == "system"
    ]


def instructions_sent(system: str) -> str:
    """What follows the system prompt in a system message ("" when nothing does)."""
    assert system.startswith(SYSTEM_PROMPT)
    return system[len(SYSTEM_PROMPT) :].removeprefix("\n\n")


def in_repository(tmp_path: Path) -> Workspace:
    """A workspace whose root is two folders into a repository (a `.git` at its top), which
    itself lies in a folder with an AGENTS.md of its own."""
    outer = tmp_path / "outer"
    top = outer / "repo"
    root = top / "sub" / "root"
    root.mkdir(parents=True)
    (top / ".git").mkdir()
    (outside := tmp_path / "outside").mkdir()
    (outer / "AGENTS.md").write_text("ABOVE the repository: never sent.\n")
    (top / "AGENTS.md").write_text("TOP: run make test.\n")
    (top / "sub" / "AGENTS.md").write_text("MIDDLE: British spelling.\n")
    (root / "AGENTS.md").write_text("ROOT: keep answers short.\n")
    return Workspace(root=root, outside=outside, db=tmp_path / "threads.db")


def test_the_roots_agents_md_follows_the_system_prompt_the_same_in_every_request(
    workspace: Workspace,
):
    (workspace.root / "AGENTS.md").write_text("Always answer in French.\n")
    # No `.git` above the root: a parent's AGENTS.md is not the project's (as Codex reads it).
    (workspace.root.parent / "AGENTS.md").write_text("PARENT outside any repository.\n")
    with FakeLLM([text("Bonjour."), text("Encore.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\nagain\n")

    assert result.returncode == 0, result.stderr
    sent = systems(llm)
    assert len(sent) >= 4  # the router's and the agent's, two turns
    assert len(set(sent)) == 1  # byte for byte the same: the fixed part stays cached
    block = instructions_sent(sent[0])
    assert "--- AGENTS.md\nAlways answer in French." in block
    assert "PARENT" not in block
    assert f"Instructions: AGENTS.md, {estimate_text(block)} tokens" in result.stdout.splitlines()


def test_agents_md_is_read_up_to_the_repositorys_top_and_not_above(tmp_path: Path):
    workspace = in_repository(tmp_path)
    with FakeLLM([text("Done.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n")

    assert result.returncode == 0, result.stderr
    block = instructions_sent(systems(llm)[0])
    order = [block.index(word) for word in ("TOP:", "MIDDLE:", "ROOT:")]
    assert order == sorted(order)  # the top's first, the nearest last
    assert "ABOVE" not in block
    names = "../../AGENTS.md, ../AGENTS.md, AGENTS.md"
    assert f"Instructions: {names}, {estimate_text(block)} tokens" in result.stdout.splitlines()


def test_instructions_past_an_eighth_of_the_context_are_cut_with_a_marker(workspace: Workspace):
    lines = [f"Rule {n}: name every file you touch in the answer." for n in range(200)]
    (workspace.root / "AGENTS.md").write_text("\n".join(lines) + "\n")
    with FakeLLM([text("Done.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--context-length", "4096")

    assert result.returncode == 0, result.stderr
    block = instructions_sent(systems(llm)[0])
    assert estimate_text(block) <= 4096 // 8
    assert block.endswith(
        CUT_MARK + ": they are longer than an eighth of the context (512 tokens)]"
    )
    assert "Rule 0: name every file" in block and "Rule 199" not in block
    kept = block.split("--- AGENTS.md\n")[1].removesuffix(block[block.index(CUT_MARK) :])
    assert all(line in lines for line in kept.strip().splitlines())  # cut at a line's end
    said = f"Instructions: AGENTS.md, {estimate_text(block)} tokens (cut at 512: an eighth of the"
    assert any(line.startswith(said) for line in result.stdout.splitlines())


def test_no_instructions_sends_none_and_says_none(workspace: Workspace):
    (workspace.root / "AGENTS.md").write_text("Always answer in French.\n")
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--no-instructions")

    assert result.returncode == 0, result.stderr
    assert {instructions_sent(system) for system in systems(llm)} == {""}
    assert "Instructions:" not in result.stdout


def test_context_lists_the_parts_and_the_instructions_escaped(workspace: Workspace):
    # The file is the person's: an escape code in it is written out, never sent to the screen.
    (workspace.root / "AGENTS.md").write_text("Be brief.\n\x1b[2Jcleared?\n")
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n/context\n", "--context-length", "8192")

    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    out = result.stdout.splitlines()
    block = instructions_sent(systems(llm)[0])
    assert "Context (the context 8192 tokens, a request at most" in result.stdout
    fixed = next(line for line in out if line.startswith("  fixed part ~"))
    assert f"instructions ~{estimate_text(block)}" in fixed and "system prompt ~" in fixed
    assert "  summary: none" in out
    assert any(line.startswith("  history: 2 messages, ~") for line in out)
    assert f"  Instructions: AGENTS.md, {estimate_text(block)} tokens; as sent:" in out
    assert "    Be brief." in out
    assert "    \\x1b[2Jcleared?" in out


def test_a_fifo_named_agents_md_does_not_hold_the_start(workspace: Workspace):
    # Opening a FIFO for reading waits for a writer; no one will write to this one.
    os.mkfifo(workspace.root / "AGENTS.md")
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n")

    assert result.returncode == 0, result.stderr
    assert {instructions_sent(system) for system in systems(llm)} == {""}
    assert "Instructions:" not in result.stdout


def test_the_early_prompt_says_the_instructions_once_the_model_is_known(workspace: Workspace):
    # At a terminal the banner comes before the model server is asked; the instructions'
    # line needs the context, so it follows the model's line.
    (workspace.root / "AGENTS.md").write_text("Always answer in French.\n")
    state = workspace.root.parent / "state"  # the history, kept out of the person's home
    environment = agent_env() | {"XDG_STATE_HOME": str(state)}
    with FakeLLM([text("Bonjour.")], auto_route="general") as llm:
        screen = PtyScreen(workspace.command(llm.base_url), str(workspace.root), environment)
        at = screen.wait_for("Loaded 20 tools. model fake-model")
        at = screen.wait_for("Instructions: AGENTS.md, ", at)
        screen.wait_for("you>")
        screen.enter("hello")
        at = screen.wait_for("agent> Bonjour.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    block = instructions_sent(systems(llm)[0])
    assert f"Instructions: AGENTS.md, {estimate_text(block)} tokens" in screen.screen_text()
