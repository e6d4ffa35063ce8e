"""An answer counts only if it was typed after its question was on the screen (issue 41):
keys typed at launch, while the model streams or while the start goes on are dropped before
every question that decides something, and the screen says so. The real CLI on a pty, the
stand-in model server held deterministically (`FakeLLM.bind()` listens but answers nothing
until `start()`; a reply with `hold` stops after its first piece until `release()`)."""

from __future__ import annotations

import pytest

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import CTRL_D, ENTER, PtyScreen

WRITE = {"path": "hello.txt", "content": "hello\n"}
IGNORED_2 = "(2 keys typed before this question were ignored)"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # a bracketed paste's marks


def at_a_terminal(workspace: Workspace, llm: FakeLLM, *args: str, **env: str) -> PtyScreen:
    state = workspace.root.parent / "state"  # the history, kept out of the person's home
    environment = agent_env() | {"XDG_STATE_HOME": str(state)} | env
    return PtyScreen(workspace.command(llm.base_url, *args), str(workspace.root), environment)


def paused_at_a_write(workspace: Workspace) -> None:
    """Thread t, paused at the approval of a write of hello.txt (Ctrl-D at its question)."""
    (workspace.root / "hello.txt").write_text("hi\n")
    with FakeLLM(
        [reply(tool_calls=[tool_call("write_file", WRITE)])], auto_route="filesystem"
    ) as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("say hello")
        screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.type(CTRL_D)
        assert screen.close() == 3, screen.screen_text()


@pytest.mark.parametrize(
    ("keys", "ignored"),
    [
        (f"y{ENTER}", IGNORED_2),
        (f"y{ENTER}y{ENTER}", "(4 keys typed before this question were ignored)"),
        (f"{PASTE_START}y\n{PASTE_END}", IGNORED_2),  # a paste is its characters
    ],
    ids=["y-enter", "twice", "bracketed-paste"],
)
def test_keys_typed_at_launch_do_not_answer_the_approval(
    workspace: Workspace, keys: str, ignored: str
):
    paused_at_a_write(workspace)
    llm = FakeLLM([text("Written.")], auto_route="filesystem")
    llm.bind()  # listening, answering nothing: the start waits here
    try:
        screen = at_a_terminal(workspace, llm)
        screen.type(keys)  # at once, long before the question can be drawn
        screen.wait_for("y")  # the terminal took the keys (its echo)
        llm.start()
        at = screen.wait_for(ignored)
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        assert (workspace.root / "hello.txt").read_text() == "hi\n"
        screen.enter("y")  # typed after the question: this one counts
        at = screen.wait_for("agent> Written.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_keys_typed_while_the_answer_streams_do_not_answer_the_approval(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [
        reply("Let me write it now.", tool_calls=[tool_call("write_file", WRITE)], hold=True),
        text("Written."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("say hello")
        at = screen.wait_for("Let", at)  # the answer's first piece is on the screen
        screen.enter("y")
        screen.enter("y")
        llm.release()
        at = screen.wait_for("(4 keys typed before this question were ignored)", at)
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        assert (workspace.root / "hello.txt").read_text() == "hi\n"
        screen.enter("y")
        at = screen.wait_for("agent> Written.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_fsagent_approve_ignores_a_yes_typed_before_its_question(workspace: Workspace):
    paused_at_a_write(workspace)
    llm = FakeLLM([text("Written.")], auto_route="filesystem")
    llm.bind()
    try:
        screen = PtyScreen(
            workspace.command(llm.base_url, "approve", "t", thread=None),
            str(workspace.root),
            agent_env(),
        )
        screen.enter("y")
        screen.wait_for("y")  # the terminal took the keys (its echo)
        llm.start()
        at = screen.wait_for(IGNORED_2)
        at = screen.wait_for("approve 1 call(s) as shown? [y/n]", at)
        assert (workspace.root / "hello.txt").read_text() == "hi\n"
        screen.enter("y")
        screen.wait_for("✓ approved", at)
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_undo_and_a_yes_typed_while_the_session_starts_undo_nothing(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [reply(tool_calls=[tool_call("write_file", WRITE)]), text("Written.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        written = workspace.run(llm.base_url, "say hello\ny\n")
        assert written.returncode == 0, written.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello\n"
    llm = FakeLLM([], auto_route="general")
    llm.bind()  # the early prompt is up; the start waits for the model server
    try:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type(f"/undo{ENTER}y{ENTER}")  # as fast as a person types it
        screen.wait_for("starting: the model server and the tools", at)
        llm.start()
        at = screen.wait_for(IGNORED_2, at)
        at = screen.wait_for("undo these changes? [y/n]", at)
        assert (workspace.root / "hello.txt").read_text() == "hello\n"
        screen.enter("y")
        at = screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hi\n"


@pytest.mark.parametrize(
    ("sent", "keys"),
    [
        ("y\r", 2),
        ("yes\ry\r", 6),
        ("\x1b[A\x1b[B", 2),  # arrows: one key each
        ("\x1bOP", 1),  # F1
        ("\x1by", 1),  # Alt-y
        ("é", 1),
        (f"{PASTE_START}y\n{PASTE_END}", 2),
        (f"{PASTE_START}cut off", 7),  # a paste whose end was not there yet
        ("\x1b[12;1R", 0),  # the terminal's answer to prompt_toolkit, typed by no one
        ("", 0),
    ],
)
def test_keys_are_counted_as_a_person_typed_them(sent: str, keys: int):
    from terminal.typeahead import counted_keys

    assert counted_keys(sent) == keys


def test_a_request_and_a_yes_typed_at_the_early_prompt_write_nothing(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [reply(tool_calls=[tool_call("write_file", WRITE)]), text("Written.")]
    llm = FakeLLM(script, auto_route="filesystem")
    llm.bind()  # the early prompt is up; the start waits for the model server
    try:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type(f"say hello{ENTER}y{ENTER}")  # the request stays, the yes must not
        screen.wait_for("starting: the model server and the tools", at)
        llm.start()
        at = screen.wait_for(IGNORED_2, at)
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        assert (workspace.root / "hello.txt").read_text() == "hi\n"
        screen.enter("y")
        at = screen.wait_for("agent> Written.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hello\n"
    said = [m["content"] for m in llm.requests_with_tools()[-1]["messages"] if m["role"] == "user"]
    assert said == ["say hello"]  # typed ahead at you>, and sent
