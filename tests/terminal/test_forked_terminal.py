"""fsagent forked on a pty by the test launcher is what `python agent.py` exec'd there is, where
it matters to the terminal's tests (tests/pty_screen.py forks it unless a test asks for the
exec): the process has the terminal as its controlling one, isatty() on all three streams,
the interpreter's streams and signals; and fsagent on it says the same banner, draws the
terminal's screen, takes Ctrl-C from the terminal and exits with the same codes."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from launcher import EXEC_AGENTS_ENV, LAUNCHER

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply
from pty_screen import CTRL_C, ENTER, SERVER_LAUNCHER_ENV, PtyScreen, forked

PROBE = Path(__file__).resolve().parent.parent / "tty_probe.py"
HOW = ["fork", "exec"]


@pytest.fixture(autouse=True)
def both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork is what these tests are about: FSAGENT_TEST_EXEC_AGENTS=1 for a run does not
    take it away here."""
    monkeypatch.delenv(EXEC_AGENTS_ENV, raising=False)


def probed(tmp_path: Path, how: str, answer: str) -> tuple[dict, int, PtyScreen]:
    """The probe's report (with the line it read, if any) and exit code, started the one way
    or the other."""
    report = tmp_path / f"{how}.json"
    command = [sys.executable, str(PROBE), str(report)]
    assert forked(command, exec_=how == "exec") == (how == "fork")
    env = agent_env() | {"PROBE_SAYS": "hello"}
    screen = PtyScreen(command, str(tmp_path), env, exec_=how == "exec")
    screen.wait_for("probe>")
    screen.type(answer)
    code = screen.close()
    found = json.loads(report.read_text())
    found["environment"].pop(SERVER_LAUNCHER_ENV, None)  # the fork's own server hook
    line = report.with_name(report.name + ".line")
    found["line read"] = json.loads(line.read_text()) if line.exists() else None
    found["at the end"] = report.with_name(report.name + ".end").read_text().splitlines()
    return found, code, screen


# Ctrl-V, then Enter: a carriage return the terminal passes on as it is, which the stream
# must keep (an exec'd interpreter reads "\r" as itself).
LITERAL_CR = "\x16\r"


@pytest.mark.parametrize(
    ("answer", "code"),
    [(f"7{LITERAL_CR}{ENTER}", 7), (CTRL_C, -signal.SIGINT)],
    ids=["exit-7", "ctrl-c"],
)
def test_a_forked_process_has_the_terminal_an_execd_one_has(tmp_path: Path, answer: str, code: int):
    LAUNCHER.started()  # before the umask changes: the fork must take the test's, not its own
    old = os.umask(0o027)  # not the usual one
    try:
        by_fork, fork_code, fork_screen = probed(tmp_path, "fork", answer)
        by_exec, exec_code, exec_screen = probed(tmp_path, "exec", answer)
    finally:
        os.umask(old)

    assert by_exec["descriptors are terminals"] == [True, True, True]
    assert by_exec["one terminal"] and by_exec["controlling terminal"]
    assert by_exec["session leader"] and by_exec["foreground"]
    assert all(s["isatty"] for s in by_exec["streams"].values())
    assert by_exec["open descriptors"] == [0, 1, 2]
    assert by_exec["umask"] == "0027" and by_exec["environment"]["PROBE_SAYS"] == "hello"
    assert by_exec["line read"] == ("7\r\n" if code == 7 else None)
    assert by_exec["at the end"] == ["a thread that is no daemon finished", "atexit ran"]
    assert by_exec["argv"][1:] == [str(tmp_path / "exec.json")]
    by_fork["argv"][1:] = by_exec["argv"][1:]  # each was told its own report's name
    assert by_fork == by_exec
    # Ctrl-C is SIGINT from the terminal to the foreground group: uncaught, it ends both so.
    assert fork_code == exec_code == code, fork_screen.screen_text()
    if code < 0:
        assert "KeyboardInterrupt" in fork_screen.screen_text()
        assert "KeyboardInterrupt" in exec_screen.screen_text()


def at_a_terminal(workspace: Workspace, llm: FakeLLM, how: str) -> PtyScreen:
    environment = agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")}
    return PtyScreen(
        workspace.command(llm.base_url), str(workspace.root), environment, exec_=how == "exec"
    )


@pytest.mark.parametrize("how", HOW)
def test_fsagent_forked_or_execd_says_the_banner_draws_the_terminal_and_takes_ctrl_c(
    workspace: Workspace, how: str
):
    script = [reply("a long answer, held after its first piece", hold=True)]
    with FakeLLM(script, auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm, how)
        at = screen.wait_for("you>")
        banner = screen.screen_text()[:at]
        screen.enter("tell me a story")
        at = screen.wait_for("agent> a long", at)  # the first piece, the rest held
        screen.type(CTRL_C)  # the run's: SIGINT from the terminal, not a key read
        at = screen.wait_for("⨯ interrupted", at)
        llm.release()
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

        again = at_a_terminal(workspace, llm, how)
        # The prompt, not the recap's `Last: you> tell me a story`: keys typed before the
        # prompt is up would be the kernel's echo, not the line editor's line.
        at = again.wait_for("\nyou>")
        again.type("half a thought")
        again.wait_for("half a thought", at)
        again.type(CTRL_C)  # a key at the prompt: clears the line, and a second quits
        again.wait_until(lambda: "half a thought" not in again.visible(), "cleared")
        again.type(CTRL_C)
        again_code = again.close()

    assert "Thread 't': new conversation." in banner
    assert f"Root: {workspace.root} · Approval: ask" in banner
    assert re.search(r"Loaded \d+ tools\. model fake-model", screen.screen_text())
    assert b"\x1b[" in screen.raw  # the terminal's screen (prompt_toolkit, rich), not --plain
    assert code == 0, screen.screen_text()
    assert again_code == 130, again.screen_text()
    assert "Traceback" not in screen.screen_text() + again.screen_text()
    said = [m["content"] for m in llm.requests_with_tools()[-1]["messages"] if m["role"] == "user"]
    assert said == ["tell me a story"]
