"""`Workspace.start` forks fsagent from the worker's launcher (tests/launcher.py) unless the
exec is asked for (`exec_=True`, or FSAGENT_TEST_EXEC_AGENTS=1 for a run). The crash, restart
and Ctrl-C tests rely on the fork being a process of its own, as the exec'd one is: its own
pid, reached by SIGINT and SIGKILL, the test's environment read afresh, the same session on
its pipes. And a test that asks for the exec gets the interpreter's own command line."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from launcher import EXEC_AGENTS_ENV, Launched

from conftest import AGENT, REPO, RunningAgent, Workspace
from fake_llm import FakeLLM, reply, text, tool_call

BANNER_END = "Approval: "  # the banner's last line: the thread is open


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def a_session(agent: RunningAgent) -> int:
    """A turn, then the end of input: the exit code."""
    agent.wait_for(BANNER_END)
    agent.send("hello")
    agent.wait_for("agent> Hi.")
    return agent.finish()


def test_a_started_agent_is_forked_unless_the_exec_is_asked_for(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
):
    with FakeLLM([text("Hi."), text("Hi."), text("Hi.")], auto_route="general") as llm:
        forked = workspace.start(llm.base_url, thread="forked")
        execd = workspace.start(llm.base_url, thread="execd", exec_=True)
        monkeypatch.setenv(EXEC_AGENTS_ENV, "1")
        by_env = workspace.start(llm.base_url, thread="by_env")
        for agent in (forked, execd, by_env):
            agent.wait_for(BANNER_END)
        lines = {name: command_line(a.process.pid) for name, a in
                 (("forked", forked), ("execd", execd), ("by_env", by_env))}  # fmt: skip
        parents = {name: parent_of(a.process.pid) for name, a in
                   (("forked", forked), ("execd", execd), ("by_env", by_env))}  # fmt: skip
        codes = [a_session(agent) for agent in (forked, execd, by_env)]

    assert isinstance(forked.process, Launched)
    # The fork is the launcher's image (its command line), a child of the launcher's waiter.
    assert lines["forked"][1] == str(REPO / "tests" / "launcher.py")
    assert parents["forked"] != os.getpid()
    # The exec'd ones are `python agent.py ...`, children of the test.
    for name in ("execd", "by_env"):
        assert lines[name][1:3] == [str(AGENT), "--base-url"], lines[name]
        assert parents[name] == os.getpid()
    assert codes == [0, 0, 0]
    for agent in (forked, execd, by_env):
        assert "agent> Hi." in agent.stdout


def test_a_forked_agent_is_reached_by_sigint_and_sigkill_and_reads_the_tests_environment(
    workspace: Workspace,
):
    """The hook the crash tests use is the test's variable, read by the forked process; Ctrl-C
    (SIGINT to its pid) cuts the held write off as at a terminal; SIGKILL ends it."""
    call = tool_call("write_file", {"path": "log.txt", "content": "x\n"}, id="call_w")
    script = [reply(tool_calls=[call]), text("Noted.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url, env={"FSAGENT_TEST_HOLD_WRITE": "started"})
        agent.send("write it")
        agent.send("y")
        agent.wait_for("[test hook] holding the write after its ledger row is 'started'")
        agent.process.send_signal(signal.SIGINT)
        agent.wait_for("⨯ interrupted")
        agent.send("and now?")
        agent.wait_for("agent> Noted.")
        agent.kill()

    assert agent.process.returncode == -signal.SIGKILL
    assert not (workspace.root / "log.txt").exists()  # held before the write, then cut off
