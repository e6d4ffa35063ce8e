"""What fsagent says when its MCP server's start put right what a stopped server left (issue
40): a server killed mid-act leaves its journal, the next one puts the entry back under its
name, or keeps it as NAME.fsagent-recovered-<time> when that name was taken, and says so at
`initialize` (mcp_servers/journal.py). The banner of the session says it in one line naming
the paths, escaped (core.text.visible); `fsagent serve` writes it to its log. Real servers
killed on the workspace's root, the real CLI and the real `fsagent serve`.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp_session import RawServer, tool_text
from race_pause import Pauses

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, text
from mcp_servers.race_hook import PAUSE_ENV
from pty_screen import PtyScreen
from serving import ServeProcess

LEAD = "⚠ recovery: a server stopped mid-act before this one; "


def kill_mid_move(root: Path, pause_folder: Path, source: str, destination: str) -> None:
    """A move with its plan's `expect`, killed once its source is set aside (not yet moved):
    the journal holds it for the next start."""
    args = {"source": source, "destination": destination}
    pauses = Pauses(pause_folder)
    with RawServer([root], env={PAUSE_ENV: str(pauses.folder)}) as raw:
        plan = raw.ask("tools/call", {"name": "plan", "arguments": {"tool": "move", "args": args}})
        raw.call("move", **args, expect=json.loads(tool_text(plan)[0])["paths"])
        while pauses.next_line() != "paused move destination":
            pauses.go()
        raw.process.kill()
        raw.process.wait()
    pauses.close()


def test_the_banner_says_what_the_start_kept_under_another_name_escaped(
    workspace: Workspace, tmp_path: Path
) -> None:
    root = workspace.root
    (root / "a\x1b[2J.txt").write_text("mine\n")
    kill_mid_move(root, tmp_path / "pause", "a\\x1b[2J.txt", "c.txt")
    (root / "a\x1b[2J.txt").write_text("made meanwhile\n")  # the name is taken now
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n")
    assert result.returncode == 0, result.stderr
    (kept,) = [path for path in root.iterdir() if ".fsagent-recovered-" in path.name]
    assert kept.read_text() == "mine\n"
    shown = kept.name.replace("\x1b", "\\x1b")
    line = (
        f"{LEAD}{root}/a\\x1b[2J.txt is taken, so the entry a stopped server had set aside "
        f"for it is kept as {root}/{shown}"
    )
    assert result.stdout.splitlines().count(line) == 1, result.stdout
    assert "\x1b" not in result.stdout
    assert "agent> Hi." in result.stdout


def test_a_session_without_anything_recovered_says_nothing_of_it(workspace: Workspace) -> None:
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n")
    assert result.returncode == 0, result.stderr
    assert "recovery" not in result.stdout + result.stderr


def test_fsagent_serve_logs_what_the_start_put_back(workspace: Workspace, tmp_path: Path) -> None:
    root = workspace.root
    (root / "b.txt").write_text("B\n")
    kill_mid_move(root, tmp_path / "pause", "b.txt", "e.txt")
    assert not (root / "b.txt").exists()  # set aside under a temp name, as killed
    with FakeLLM([], auto_route="general") as llm:
        served = ServeProcess(workspace, llm.base_url)
        served.wait_for(f"fsagent: {LEAD}put back under its name: {root}/b.txt\n")
        served.kill()
    assert (root / "b.txt").read_text() == "B\n"
    assert not [path for path in root.iterdir() if path.name.startswith(".fsagent-")]


def test_at_a_terminal_the_line_follows_the_early_prompt(
    workspace: Workspace, tmp_path: Path
) -> None:
    """At a TTY the banner is said before the start (terminal/early_prompt.py); the
    recovery line comes with what is known once the server has started."""
    root = workspace.root
    (root / "b.txt").write_text("B\n")
    kill_mid_move(root, tmp_path / "pause", "b.txt", "e.txt")
    environment = agent_env() | {"XDG_STATE_HOME": str(tmp_path / "state")}
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        screen = PtyScreen(workspace.command(llm.base_url), str(root), environment)
        at = screen.wait_for("Loaded 20 tools.")
        at = screen.wait_for(f"{LEAD}put back under its name: {root}/b.txt\n", at)
        screen.enter("/quit")
        code = screen.close()
    assert code == 0, screen.screen_text()
    assert (root / "b.txt").read_text() == "B\n"
