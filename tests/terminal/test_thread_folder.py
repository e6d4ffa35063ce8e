"""A thread keeps its folder (issue 28): resumed without --root it works in the roots it was
started with, and the banner says so; given other roots it asks at a terminal, refuses from a
pipe naming both, unless --other-root. The real CLI in processes forked by the test launcher
(piped, and on a pty), the real MCP server, a real SQLite file, the LM Studio stand-in.

Before, a thread started with `--root R1` and resumed from a clone without --root listed the
clone (`.git`, `.venv`, `Makefile`) as its sandbox."""

from __future__ import annotations

import subprocess
from pathlib import Path

from launcher import LAUNCHER
from thread_folders import LIST, elsewhere, with_root, without_root

from conftest import SERVER_LAUNCHER_ENV, Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen


def run_in(folder: Path, command: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """fsagent piped in `folder` (the folder is the point, not the process): forked, with its
    MCP server, by the worker's launcher, as `Workspace.run` runs it in the workspace's."""
    return LAUNCHER.run(
        command[2:],
        input=stdin,
        timeout=120,
        cwd=folder,
        env={**agent_env(), SERVER_LAUNCHER_ENV: LAUNCHER.started()},
    )


def test_a_thread_resumed_without_root_works_in_its_own_roots(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi."), LIST, text("Listed.")], auto_route="filesystem") as llm:
        started = workspace.run(llm.base_url, "hello\n")
        resumed = run_in(other, without_root(workspace, llm.base_url), "what is here?\n")
        [listing] = tool_messages(llm.requests_with_tools()[-1])

    assert started.returncode == 0, started.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert f"Root: {workspace.root.resolve()} (this thread's) · Approval: ask" in resumed.stdout
    assert "notes.md" in listing["content"] and "Makefile" not in listing["content"]


def test_other_roots_are_refused_from_a_pipe_naming_both(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "hello\n")
        refused = run_in(other, with_root(workspace.command(llm.base_url), other), "ls\n")
        assert len(llm.requests) == 2  # the first session's route and answer, nothing since

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"fsagent: thread 't' was started with --root {workspace.root.resolve()}, not --root "
        f"{other}; leave --root out to act in its roots, or pass --other-root to act in these"
    ]


def test_other_root_works_in_the_roots_given(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi."), LIST, text("Listed.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "hello\n")
        command = with_root(workspace.command(llm.base_url, "--other-root"), other)
        moved = run_in(other, command, "what is here?\n")
        [listing] = tool_messages(llm.requests_with_tools()[-1])

    assert moved.returncode == 0, moved.stderr
    assert f"Root: {other} · Approval: ask" in moved.stdout
    assert "Makefile" in listing["content"] and "notes.md" not in listing["content"]


def test_other_roots_are_asked_about_at_a_terminal(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi."), LIST, text("Listed.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "hello\n")
        command = with_root(workspace.command(llm.base_url, "--plain"), other)
        declined = PtyScreen(command, str(other), agent_env())
        declined.wait_for("Act in the roots given for this session? [y/N]")
        declined.enter("")
        assert declined.close() == 2
        assert len(llm.requests) == 2

        screen = PtyScreen(command, str(other), agent_env())
        at = screen.wait_for("Act in the roots given for this session? [y/N]")
        told = screen.screen_text()[:at]
        assert f"was started with --root {workspace.root.resolve()}, not --root {other}." in told
        screen.enter("y")
        at = screen.wait_for(f"Root: {other} · Approval: ask", at)
        at = screen.wait_for("you>", at)
        screen.enter("what is here?")
        at = screen.wait_for("Listed.", at)
        screen.enter("/quit")
        assert screen.close() == 0, screen.screen_text()
        [listing] = tool_messages(llm.requests_with_tools()[-1])

    assert "Makefile" in listing["content"]


def test_a_thread_started_on_one_root_is_not_approved_from_two(workspace: Workspace):
    """Every root counts, not the first: a batch shown in A is not run in A and B."""
    extra = (workspace.outside / "extra").resolve()
    extra.mkdir()
    call = tool_call("write_file", {"path": "hello.txt", "content": "hi\n"}, id="call_h")
    with FakeLLM([reply(tool_calls=[call]), text("Done.")], auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "create hello.txt\n")
        assert paused.returncode == 3, paused.stderr
        command = workspace.command(llm.base_url, "approve", "t", "--yes", thread=None)
        at = command.index("--root")
        both = [*command[: at + 2], "--root", str(extra), *command[at + 2 :]]
        refused = run_in(workspace.root, both)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    root = workspace.root.resolve()
    assert (
        f"thread 't' was started with --root {root}, not --root {root} --root {extra}"
        in refused.stderr
    )
    assert not (workspace.root / "hello.txt").exists()
