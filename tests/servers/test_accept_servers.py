"""A project's server is asked about at the terminal, once per entry as written, showing what
would run; keys typed before the question do not answer it; a pipe never accepts; `fsagent
servers` lists, accepts, revokes and repins. The real CLI on a pty (tests/pty_screen.py) and
piped, the stand-in model (tests/fake_llm.py), the tests' little MCP server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import ENTER, PtyScreen

LITTLE = Path(__file__).with_name("little_server.py")
QUESTION = "Start notes, and remember this yes for it as written? [y/N]"
IGNORED_2 = "(2 keys typed before this question were ignored)"


def project_server(workspace: Workspace, extra: str = "") -> Path:
    """The workspace's fsagent.toml adds the little server, with an argument that holds an
    escape code (a file's text: it must reach the screen escaped)."""
    project = workspace.root / "fsagent.toml"
    args = json.dumps([str(LITTLE), "--note=\x1b[31mred"])
    project.write_text(
        f"[mcp_servers.notes]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
        f"sandbox = false\nenv = {{ LITTLE_NOTES = {json.dumps(str(workspace.root))} }}\n{extra}",
        encoding="utf-8",
    )
    return project


def offered(llm: FakeLLM) -> set[str]:
    names = {tool["function"]["name"] for tool in llm.requests[-1].get("tools") or []}
    return {name for name in names if name.startswith("notes__")}


def at_a_terminal(workspace: Workspace, llm: FakeLLM, *args: str) -> PtyScreen:
    return PtyScreen(workspace.command(llm.base_url, *args), str(workspace.root), agent_env())


def asked_at_a_terminal(workspace: Workspace) -> tuple[PtyScreen, FakeLLM, int]:
    """A session at a terminal, keys typed while it starts, the question answered."""
    llm = FakeLLM([text("OK.")], auto_route="general")
    llm.bind()  # listening, answering nothing: the start waits here, before the question
    screen = at_a_terminal(workspace, llm)
    screen.type(f"y{ENTER}")  # at once, long before the question can be drawn
    screen.wait_for("y")  # the terminal took the keys (its echo)
    llm.start()
    at = screen.wait_for(IGNORED_2)
    at = screen.wait_for(QUESTION, at)
    return screen, llm, at


def test_a_projects_server_is_asked_at_the_terminal_and_typed_ahead_keys_do_not_accept(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    project = project_server(workspace)
    screen, llm, at = asked_at_a_terminal(workspace)
    try:
        shown = screen.screen_text()
        # What would run, every value escaped: the file's text never reaches the screen raw.
        assert f"{project}: mcp_servers.notes: a project's MCP server (new) would run:" in shown
        assert f"command: '{sys.executable}' '{LITTLE}' '--note=\\x1b[31mred'" in shown
        assert f"in: '{workspace.root}' (the first root)" in shown
        assert "env: 'LITTLE_NOTES' (values not shown)" in shown
        assert "sandbox: off (sandbox = false): it runs with your rights" in shown
        record = own_xdg_folders / "data" / "fsagent" / "accepted-servers.json"
        assert not record.exists()  # the keys typed ahead accepted nothing
        screen.enter("y")
        at = screen.wait_for("mcp_servers.notes: accepted", at)
        at = screen.wait_for("you>", at)
        screen.enter("hello")
        at = screen.wait_for("agent> OK.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()
    assert code == 0, screen.screen_text()
    assert {"notes__read_note", "notes__write_note"} <= offered(llm)
    assert record.exists()

    # Accepted once: the next session at the terminal starts it without a question.
    with FakeLLM([text("Again.")], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("hello")
        at = screen.wait_for("agent> Again.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        assert screen.close() == 0, screen.screen_text()
    assert "remember this yes" not in screen.screen_text()
    assert {"notes__read_note", "notes__write_note"} <= offered(llm)


def test_a_no_at_the_terminal_starts_nothing_and_keeps_nothing(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    project_server(workspace)
    screen, llm, at = asked_at_a_terminal(workspace)
    try:
        screen.enter("n")
        at = screen.wait_for("mcp_servers.notes: not started: not accepted", at)
        at = screen.wait_for("you>", at)
        screen.enter("hello")
        at = screen.wait_for("agent> OK.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()
    assert code == 0, screen.screen_text()
    assert offered(llm) == set()
    assert not (own_xdg_folders / "data" / "fsagent" / "accepted-servers.json").exists()


def test_a_pipe_never_accepts_and_servers_accept_and_revoke_do(workspace: Workspace) -> None:
    project = project_server(workspace)

    def session(stdin: str = "hello\n") -> tuple[set[str], str]:
        with FakeLLM([text("OK."), text("OK.")], auto_route="general") as llm:
            result = workspace.run(llm.base_url, stdin)
        assert result.returncode == 0, result.stderr
        return offered(llm), result.stderr

    # A "y" piped in is a prompt, never a yes to the server.
    tools, said = session("y\nhello\n")
    assert tools == set()
    (line,) = [ln for ln in said.splitlines() if "mcp_servers.notes" in ln]
    assert line.startswith(f"fsagent: {project}: mcp_servers.notes: not started: a project's")
    assert "`fsagent servers accept notes`" in line

    accepted = workspace.run("http://127.0.0.1:9", "", "servers", "accept", "notes", thread=None)
    assert accepted.returncode == 0, accepted.stderr
    assert "command: " in accepted.stdout and "'--note=\\x1b[31mred'" in accepted.stdout
    assert "\x1b" not in accepted.stdout
    assert "Accepted notes as written" in accepted.stdout
    assert "notes__write_note" in session()[0]

    listed = workspace.run("http://127.0.0.1:9", "", "servers", thread=None)
    assert listed.returncode == 0, listed.stderr
    (row,) = listed.stdout.splitlines()
    assert row.split()[:2] == ["notes", str(project)]
    assert "a project's, accepted; 6 tools pinned" in row

    revoked = workspace.run("http://127.0.0.1:9", "", "servers", "revoke", "notes", thread=None)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"Revoked notes of {project}:")
    tools, said = session()
    assert tools == set() and "not started: a project's server starts only" in said
    again = workspace.run("http://127.0.0.1:9", "", "servers", "revoke", "notes", thread=None)
    assert again.returncode == 1 and "servers revoke: no yes to notes" in again.stderr


def test_repin_accepts_a_changed_tool_and_takes_only_a_servers_name(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    folder = own_xdg_folders / "config" / "fsagent"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f"[mcp_servers.notes]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(LITTLE))}]\nsandbox = false\n",
        encoding="utf-8",
    )
    (workspace.root / "n.txt").write_text("the note\n", encoding="utf-8")
    read = reply(tool_calls=[tool_call("notes__read_note", {"name": "n.txt"})])
    env = {"LITTLE_NOTES": str(workspace.root)}
    with FakeLLM([read, text("Read.")], auto_route="general") as llm:
        assert workspace.run(llm.base_url, "read it\n", env=env).returncode == 0
    pins = own_xdg_folders / "data" / "fsagent" / "pins" / "notes.json"
    assert pins.exists()
    changed = {**env, "LITTLE_DESCRIPTION": "Read a note, and more."}
    with FakeLLM([read, text("Asked.")], auto_route="general") as llm:
        asked = workspace.run(llm.base_url, "read it\nn\n", env=changed)
    assert "accept it with `fsagent servers repin notes`" in asked.stderr
    assert "Approval needed" in asked.stdout

    # A name that is a path never reaches the data folder's files.
    outside = own_xdg_folders / "data" / "fsagent" / "x.json"
    outside.write_text("{}", encoding="utf-8")
    refused = workspace.run("http://127.0.0.1:9", "", "servers", "repin", "../x", thread=None)
    assert refused.returncode == 2 and "'../x' is not a server's name" in refused.stderr
    assert outside.exists()

    repinned = workspace.run("http://127.0.0.1:9", "", "servers", "repin", "notes", thread=None)
    assert repinned.returncode == 0, repinned.stderr
    assert repinned.stdout.startswith("Forgot notes's pinned tools")
    assert not pins.exists()
    with FakeLLM([read, text("Read again.")], auto_route="general") as llm:
        now = workspace.run(llm.base_url, "read it\n", env=changed)
    assert now.returncode == 0, now.stderr
    assert "Approval needed" not in now.stdout and "pinned" not in now.stderr
    again = workspace.run("http://127.0.0.1:9", "", "servers", "repin", "notes", thread=None)
    assert again.returncode == 0  # pinned again by that start
    gone = workspace.run("http://127.0.0.1:9", "", "servers", "repin", "notes", thread=None)
    assert gone.returncode == 1 and "no pinned tools for notes" in gone.stderr
