"""The terminal a person uses: the real CLI on a pseudo-terminal it owns (Ctrl-C is SIGINT,
as at a real one), read through a terminal emulator; and the same sessions piped, or with
--plain or TERM=dumb, which must not write a single escape code, or with NO_COLOR, which must
write no colour and keep everything else."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from conftest import Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import CTRL_C, CTRL_D, ENTER, UP, PtyScreen

WRITE = {"path": "hello.txt", "content": "hello\n"}


def at_a_terminal(
    workspace: Workspace, llm: FakeLLM, *args: str, exec_: bool = False, **env: str
) -> PtyScreen:
    """fsagent on a pty: forked by the test launcher, or with exec_ the real `python agent.py`
    (tests/pty_screen.py)."""
    state = workspace.root.parent / "state"  # the history, kept out of the person's home
    environment = agent_env() | {"XDG_STATE_HOME": str(state)} | env
    return PtyScreen(
        workspace.command(llm.base_url, *args), str(workspace.root), environment, exec_=exec_
    )


def users_said(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def unanswered(request: dict) -> list[str]:
    asked = [c["id"] for m in request["messages"] for c in m.get("tool_calls") or []]
    answered = {m["tool_call_id"] for m in tool_messages(request)}
    return [call_id for call_id in asked if call_id not in answered]


# -- Ctrl-C and Ctrl-D ------------------------------------------------------------------------


def test_ctrl_c_at_an_approval_runs_nothing_leaves_the_thread_paused_and_exits_130(
    workspace: Workspace,
):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [reply(tool_calls=[tool_call("write_file", WRITE)]), text("Written.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("say hello")
        screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.type(CTRL_C)
        code = screen.close()
        asked_before_the_pause = len(llm.requests_with_tools())

        again = at_a_terminal(workspace, llm)
        at = again.wait_for("paused: waiting for your approval of write_file(path='hello.txt'")
        again.wait_for("write_file? [y/n/e/a/r/?]", at)
        again.enter("y")
        at = again.wait_for("agent> Written.", at)
        again.wait_for("you>", at)
        again.enter("/quit")
        again_code = again.close()

    assert code == 130, screen.screen_text()
    assert "Traceback" not in screen.screen_text() and "Error" not in screen.screen_text()
    assert "Left paused: nothing was run" in screen.screen_text()
    assert asked_before_the_pause == 1
    assert again_code == 0, again.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hello\n"


def test_ctrl_d_at_an_approval_is_the_end_of_input(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    with FakeLLM(
        [reply(tool_calls=[tool_call("write_file", WRITE)])], auto_route="filesystem"
    ) as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("say hello")
        screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.type(CTRL_D)
        code = screen.close()
        resumed = workspace.run(llm.base_url, "")

    assert code == 3, screen.screen_text()
    assert (
        "Left paused: nothing was run. Answer it with `fsagent approve t`" in screen.screen_text()
    )
    assert "paused: waiting for your approval of write_file" in resumed.stdout
    assert (workspace.root / "hello.txt").read_text() == "hi\n"


def test_enter_alone_at_an_approval_rejects_and_the_model_is_told(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [reply(tool_calls=[tool_call("write_file", WRITE)]), text("Left it alone.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("say hello")
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.type(ENTER)
        at = screen.wait_for("agent> Left it alone.", at)
        screen.wait_for("you>", at)
        screen.enter("quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hi\n"
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "rejected" in answer["content"].lower() and "not" in answer["content"].lower()


def test_ctrl_c_while_the_model_streams_returns_to_the_prompt_and_a_second_quits(
    workspace: Workspace,
):
    (workspace.root / "a.txt").write_text("alpha\n")
    script = [
        reply("a long answer that takes its time " * 2, delay=3.0),
        reply(tool_calls=[tool_call("read_file", {"path": "a.txt"}, id="call_r")]),
        text("It says alpha."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        # exec'd: the point is which processes the terminal's SIGINT reaches (fsagent's own
        # group, not its MCP server, which is its real child here).
        screen = at_a_terminal(workspace, llm, exec_=True)
        at = screen.wait_for("you>")
        screen.enter("tell me a story")
        at = screen.wait_for("agent> a long", at)  # the first piece is on screen
        screen.type(CTRL_C)
        at = screen.wait_for("⨯ interrupted", at)
        at = screen.wait_for("you>", at)
        screen.enter("what is in a.txt?")
        at = screen.wait_for("agent> It says alpha.", at)
        screen.wait_for("you>", at)
        screen.type(CTRL_C)
        code = screen.close()

    assert code == 130, screen.screen_text()
    assert "Traceback" not in screen.screen_text()
    # The MCP server outlived the Ctrl-C: the read ran.
    assert "← alpha" in screen.screen_text()
    last = llm.requests_with_tools()[-1]
    assert unanswered(last) == []
    assert users_said(last) == ["tell me a story", "what is in a.txt?"]
    [result] = tool_messages(last)
    assert result["content"] == "alpha\n"


def test_ctrl_c_in_the_editor_is_the_editors_and_the_review_goes_on(workspace: Workspace):
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [reply(tool_calls=[tool_call("write_file", WRITE)]), text("Not written.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        # An editor that Ctrl-C ends (vi would take it as a key: either way it is the editor's).
        # exec'd: the point is the terminal's SIGINT reaching fsagent's whole group.
        screen = at_a_terminal(workspace, llm, exec_=True, EDITOR="sh -c 'sleep 60' editor")
        at = screen.wait_for("you>")
        screen.enter("say hello")
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.enter("e")
        screen.wait_until(
            lambda: bool({"sh", "sleep"} & set(_children(screen.process.pid).split())),
            "the editor open",
        )
        screen.type(CTRL_C)
        at = screen.wait_for("unchanged; answer again", at)
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.enter("n")
        at = screen.wait_for("reason (optional; the model reads it)>", at)
        screen.type(ENTER)
        at = screen.wait_for("agent> Not written.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert "Traceback" not in screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hi\n"


def _children(pid: int) -> str:
    """The command names of a process's children (Linux /proc)."""
    names = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and int(fields[1]) == pid:
                names.append((entry / "comm").read_text().strip())
        except (OSError, IndexError, ValueError):
            continue
    return " ".join(names)


def test_ctrl_c_at_the_prompt_clears_what_was_typed_then_quits(workspace: Workspace):
    with FakeLLM([], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type("half a thought")
        screen.wait_for("half a thought", at)
        screen.type(CTRL_C)
        screen.wait_until(lambda: "half a thought" not in screen.visible(), "cleared")
        screen.type(CTRL_C)
        code = screen.close()

    assert code == 130
    assert llm.requests == []


def test_ctrl_c_at_a_confirmation_keeps_the_thread(workspace: Workspace):
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        workspace.run(llm.base_url, "hi\n")
        screen = PtyScreen(
            workspace.command(llm.base_url, "threads", "rm", "t"), str(workspace.root), agent_env()
        )
        screen.wait_for("Delete thread 't' (2 messages)? [y/N]")
        screen.type(CTRL_C)
        code = screen.close()
        listed = workspace.run(llm.base_url, "", "threads", thread=None)

    assert code == 130, screen.screen_text()
    assert "Kept." in screen.screen_text() and "Traceback" not in screen.screen_text()
    assert re.search(r"^t\s", listed.stdout, re.MULTILINE), listed.stdout


# -- line editing -----------------------------------------------------------------------------


def test_up_arrow_recalls_the_previous_prompt_in_a_new_session(workspace: Workspace):
    with FakeLLM([text("First answer."), text("Second answer.")], auto_route="general") as llm:
        first = at_a_terminal(workspace, llm)
        at = first.wait_for("you>")
        first.enter("what is the plan?")
        at = first.wait_for("agent> First answer.", at)
        first.wait_for("you>", at)
        first.enter("/quit")
        assert first.close() == 0, first.screen_text()

        second = at_a_terminal(workspace, llm)
        at = second.wait_for("you>")
        second.type(UP)
        second.wait_for("you> what is the plan?", at - len("you>"))
        second.type(ENTER)
        at = second.wait_for("agent> Second answer.", at)
        second.wait_for("you>", at)
        second.enter("/quit")
        assert second.close() == 0, second.screen_text()

    assert users_said(llm.requests_with_tools()[-1]) == ["what is the plan?"] * 2
    history = workspace.root.parent / "state" / "fsagent" / "history"
    assert "what is the plan?" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600  # prompts may say private things


def test_a_pasted_block_alt_enter_and_a_trailing_backslash_make_one_request(
    workspace: Workspace,
):
    with FakeLLM([text("Got both."), text("Got three.")], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type("\x1b[200~first line\nsecond line\x1b[201~")  # a bracketed paste
        screen.type(ENTER)
        at = screen.wait_for("agent> Got both.", at)
        at = screen.wait_for("you>", at)
        screen.type("one\\")
        screen.type(ENTER)
        screen.type("two\x1b\r")  # Alt-Enter: Esc, then Enter
        screen.type("three")
        screen.type(ENTER)
        at = screen.wait_for("agent> Got three.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    said = users_said(llm.requests_with_tools()[-1])
    assert said == ["first line\nsecond line", "one\ntwo\nthree"]


def test_slash_commands_complete_and_help_lists_them(workspace: Workspace):
    with FakeLLM([], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type("/he")
        screen.wait_for("/help  list these commands", at)  # the menu, as one types
        screen.type("\t")
        screen.wait_for("you> /help", at - len("you>"))
        screen.type(ENTER)
        at = screen.wait_for("Commands (anything else is sent to the model):", at)
        at = screen.wait_for("you>", at)
        screen.enter("/nonsense please")
        at = screen.wait_for("unknown command /nonsense; /help lists the commands", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    for line in ("/grants", "/help", "/quit", "/revoke N"):
        assert f"  {line} " in screen.screen_text()
    assert llm.requests == []  # nothing reached the model


def test_piped_slash_commands(workspace: Workspace):
    with FakeLLM([], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "/help\n/nope\n/grants\n/quit\nnever sent\n")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("model fake-model, context unknown (the server does not say;")
    assert lines[2] == f"Root: {workspace.root.resolve()} · Approval: ask · Threads: {workspace.db}"
    assert "you> /help\nCommands (anything else is sent to the model):\n" in result.stdout
    assert "  /revoke N" in result.stdout and "remove grant N" in result.stdout
    assert "  /undo [--call ID | --turn N] [--force]" in result.stdout
    assert "⚠ unknown command /nope; /help lists the commands (nothing was sent)" in result.stdout
    assert "No grants in this thread." in result.stdout
    assert "never sent" not in result.stdout
    assert llm.requests == []


# -- a sign of life, and answers to read -----------------------------------------------------


def test_the_status_line_shows_while_the_model_works_and_leaves_no_trace(
    workspace: Workspace,
):
    script = [reply("one two three four five six", delay=1.2)]
    with FakeLLM(script, auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("take your time")
        # Before the first token: what is happening, and for how long.
        screen.wait_until(
            lambda: re.search(r"(thinking|routing) · \d+\.\ds", screen.visible()) is not None,
            "a status line while waiting",
        )
        # While the answer streams: its pace.
        screen.wait_until(
            lambda: re.search(r"answering · \d+\.\d tok/s", screen.visible()) is not None,
            "tokens per second while streaming",
        )
        at = screen.wait_for("agent> one two three four five six", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0
    final = screen.screen_text()
    for trace in ("thinking ·", "routing ·", "answering ·", "tok/s"):
        assert trace not in final, final


def test_a_first_reply_streams_at_once_and_a_bare_close_think_takes_it_back_as_reasoning(
    workspace: Workspace,
):
    # A DeepSeek-R1 distill's template opens the think block in the prompt, so the reply
    # holds only `</think>`. Until it comes, the text could be either: it streams dimmed
    # under `agent> `, and once the tag comes it is the reasoning, never the answer.
    script = [reply("I should greet them back warmly.</think>Hello there.", delay=0.4)]
    with FakeLLM(script, auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("hi")
        at = screen.wait_for("agent> I should", at)  # on screen before the reply ends
        assert "Hello there." not in screen.visible()
        at = screen.wait_for("agent> Hello there.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0
    final = screen.screen_text()
    assert "thinking> I should greet them back warmly." in final
    assert "agent> I should" not in final and "</think>" not in final


def test_a_plain_model_that_closes_a_think_block_later_is_told_apart_on_screen(
    workspace: Workspace,
):
    # Its first reply came plain, so the next streams as the answer at once; when a bare
    # `</think>` comes after all, what was shown cannot be taken back: the screen says so,
    # and the answer that follows is the one the thread keeps.
    script = [
        text("Hello! How can I help?"),
        reply("They say thanks. A short reply.</think>You're welcome.", delay=0.3),
    ]
    with FakeLLM(script, auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("hi")
        at = screen.wait_for("agent> Hello! How can I help?", at)
        at = screen.wait_for("you>", at)
        screen.enter("thanks")
        at = screen.wait_for("closed a think block it had not opened", at)
        at = screen.wait_for("agent> You're welcome.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
        shown = workspace.run(llm.base_url, "", "threads", "show", "t", thread=None)

    assert code == 0
    assert "agent> You're welcome." in shown.stdout and "A short reply" not in shown.stdout
    assert "</think>" not in screen.screen_text()


MARKDOWN = "Two steps:\n\n- **read** the file\n- `patch` it\n\n```\nprint('hi')\n```\n"


def test_markdown_is_rendered_on_a_terminal_and_untouched_in_a_pipe(workspace: Workspace):
    with FakeLLM([text(MARKDOWN), text(MARKDOWN)], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("how?")
        at = screen.wait_for("print('hi')", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
        piped = workspace.run(llm.base_url, "how?\n", thread="u")

    assert code == 0
    shown = screen.screen_text()
    assert "agent> Two steps:" in shown
    assert re.search(r"• read the file", shown) and "**read**" not in shown
    assert "```" not in shown
    assert b"\x1b[1m" in screen.raw  # bold
    assert piped.returncode == 0
    assert f"agent> {MARKDOWN}\n" in piped.stdout  # byte for byte what the model said


# -- colour hygiene ---------------------------------------------------------------------------


def a_session_of_every_screen(workspace: Workspace) -> tuple[list[dict], str]:
    """A script and the keys for a session that shows every screen: the banner, steps, a
    review with its diff, an error, a Markdown answer, a slow first token, commands."""
    (workspace.root / "hello.txt").write_text("hi\n")
    script = [
        reply(tool_calls=[tool_call("write_file", WRITE)], delay=0.8),
        reply(tool_calls=[tool_call("read_file", {"path": "missing.txt"})]),
        text(MARKDOWN),
        reply(status=500, error="the model fell over"),
    ]
    return script, ["say hello", "y", "and fail", "/help", "/nope", "/grants"]


def run_every_screen(workspace: Workspace, *args: str, **env: str) -> PtyScreen:
    script, lines = a_session_of_every_screen(workspace)
    with FakeLLM(script, auto_route="filesystem") as llm:
        screen = at_a_terminal(workspace, llm, *args, **env)
        at = screen.wait_for("you>")
        screen.enter(lines[0])
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        screen.enter(lines[1])
        at = screen.wait_for("print('hi')", at)
        at = screen.wait_for("you>", at)
        for line in lines[2:]:
            screen.enter(line)
            at = screen.wait_for("you>", at)
        screen.enter("quit")
        screen.close()
    text_shown = screen.screen_text()
    assert "error: " in text_shown and "the model fell over" in text_shown
    assert "← ✗ " in text_shown and "+hello" in text_shown
    assert (workspace.root / "hello.txt").read_text() == "hello\n"
    return screen


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--plain",), {}), ((), {"TERM": "dumb"})],
    ids=["--plain", "TERM=dumb"],
)
def test_no_escape_code_on_any_screen(workspace: Workspace, args: tuple, env: dict):
    screen = run_every_screen(workspace, *args, **env)
    assert b"\x1b" not in screen.raw, screen.raw[:3000]
    # Plain text is still the model's text, byte for byte.
    assert f"agent> {MARKDOWN}".replace("\n", "\r\n").encode() in screen.raw


# SGR parameters that set a colour, foreground or background (8, 16, 256 or true colour);
# bold, dim, reverse and the resets (0, 39, 49) are not colour.
COLOUR_PARAMETERS = {*range(30, 38), 38, *range(40, 48), 48, *range(90, 98), *range(100, 108)}


def colour_codes(raw: bytes) -> list[bytes]:
    """The SGR sequences in what was written that add a colour."""
    found = []
    for match in re.finditer(rb"\x1b\[([0-9;:]*)m", raw):
        parameters = {int(p) for p in re.split(rb"[;:]", match.group(1)) if p.isdigit()}
        if parameters & COLOUR_PARAMETERS:
            found.append(match.group(0))
    return found


def test_colour_codes_are_told_from_other_styles():
    assert colour_codes(b"\x1b[32m+hello\x1b[0m \x1b[1;38;5;12mx \x1b[48;2;1;2;3m") == [
        b"\x1b[32m",
        b"\x1b[1;38;5;12m",
        b"\x1b[48;2;1;2;3m",
    ]
    assert colour_codes(b"\x1b[1m\x1b[2m\x1b[7m\x1b[0m\x1b[39;49m\x1b[m\x1b[2K\x1b[6n") == []


def test_no_color_takes_away_the_colour_of_every_screen_and_nothing_else(workspace: Workspace):
    screen = run_every_screen(workspace, NO_COLOR="1")
    assert colour_codes(screen.raw) == [], colour_codes(screen.raw)[:10]
    shown = screen.screen_text()
    # Still the terminal's session: the answer rendered as Markdown, in bold where it says.
    assert re.search(r"• read the file", shown) and "**read**" not in shown
    assert b"\x1b[1m" in screen.raw
    # (Without NO_COLOR the same session colours its diff: test_every_coloured_span_closes...)


def test_no_color_keeps_the_early_prompt_line_editing_and_history(workspace: Workspace):
    llm = FakeLLM([text("First answer."), text("Second answer.")], auto_route="general")
    llm.bind()  # listening, answering nothing yet: only an early prompt can be up
    try:
        first = at_a_terminal(workspace, llm, NO_COLOR="1")
        at = first.wait_for("you>")
        assert "model fake-model" not in first.screen_text()  # before the start is done
        first.enter("what is the plan?")
        llm.start()
        at = first.wait_for("agent> First answer.", at)
        first.wait_for("you>", at)
        first.enter("/quit")
        assert first.close() == 0, first.screen_text()

        second = at_a_terminal(workspace, llm, NO_COLOR="1")
        at = second.wait_for("you>")
        second.type(UP)  # the history, read by the line editor
        second.wait_for("you> what is the plan?", at - len("you>"))
        second.type(ENTER)
        at = second.wait_for("agent> Second answer.", at)
        second.wait_for("you>", at)
        second.enter("/quit")
        assert second.close() == 0, second.screen_text()
    finally:
        llm.stop()

    assert users_said(llm.requests_with_tools()[-1]) == ["what is the plan?"] * 2
    assert colour_codes(first.raw + second.raw) == []


def test_no_escape_code_when_the_output_is_not_a_terminal(workspace: Workspace):
    script, lines = a_session_of_every_screen(workspace)
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "\n".join(lines) + "\n")
    assert "\x1b" not in result.stdout + result.stderr
    assert "+hello" in result.stdout and "error: " in result.stdout


SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def open_colour_at_line_ends(raw: bytes) -> list[bytes]:
    """The lines at whose end a colour or style is still on (it would bleed into the next)."""
    bleeding = []
    for line in raw.split(b"\n"):
        codes = [match.group(1) for match in SGR.finditer(line)]
        if codes and codes[-1] not in (b"", b"0"):
            bleeding.append(line)
    return bleeding


def test_every_coloured_span_closes_on_its_own_line(workspace: Workspace):
    screen = run_every_screen(workspace)
    assert b"\x1b[32m+hello\x1b[0m" in screen.raw  # the diff is coloured on a terminal
    assert open_colour_at_line_ends(screen.raw) == []


def test_a_file_cannot_write_escape_codes_into_the_review(workspace: Workspace):
    hidden = "safe line\n\x1b[1A\x1b[2Kevil line\n"
    script = [reply(tool_calls=[tool_call("write_file", {"path": "x.txt", "content": hidden})])]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "write it\nn\n")
    assert "+\\x1b[1A\\x1b[2Kevil line" in result.stdout
    assert "\x1b" not in result.stdout
    assert not (workspace.root / "x.txt").exists()


def test_history_path_follows_xdg(tmp_path: Path):
    from terminal.line_editor import history_path

    assert history_path({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "fsagent" / "history"
    assert history_path({"XDG_STATE_HOME": "relative"}) == (
        Path.home() / ".local" / "state" / "fsagent" / "history"
    )


def test_help_and_pipes_never_load_line_editing_or_rich(workspace: Workspace):
    """They are the terminal's: `--help`, a pipe or a regression run must not pay for them."""
    import subprocess
    import sys

    from conftest import AGENT

    helped = subprocess.run(
        [sys.executable, "-X", "importtime", str(AGENT), "--help"],
        capture_output=True,
        text=True,
        env=agent_env(),
    )
    with FakeLLM([], auto_route="general") as llm:
        piped = subprocess.run(
            [sys.executable, "-X", "importtime", *workspace.command(llm.base_url)[1:]],
            input="quit\n",
            capture_output=True,
            text=True,
            cwd=workspace.root,
            env=agent_env(),
        )

    assert helped.returncode == 0 and piped.returncode == 0, piped.stderr[-2000:]
    for run in (helped, piped):
        loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()}
        # (rich itself may be there: httpx imports its CLI, rich.console and rich.live, when
        # rich is installed.)
        assert not {"prompt_toolkit", "rich.markdown", "terminal.tty", "terminal.live"} & loaded
    assert "langgraph" in {name.split(".")[0] for name in loaded}  # the check does see imports


def test_the_status_line_says_the_roots_and_who_decides():
    from display import status_line

    assert status_line([Path("/a"), Path("/b")], "yes") == "Roots: /a, /b · Approval: yes"
    assert status_line([Path("/a")], "ask") == "Root: /a · Approval: ask"


def test_a_big_paste_shows_as_its_size_and_is_sent_whole(workspace: Workspace):
    log = "".join(f"2026-12-02 12:{n // 60:02}:{n % 60:02} worker {n} ok\n" for n in range(600))
    with FakeLLM([text("Six hundred lines.")], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type("summarise this: ")
        screen.type(f"\x1b[200~{log}\x1b[201~")  # a bracketed paste of 600 lines
        shown = screen.wait_for("you> summarise this: [pasted 601 lines (", at - len("you>"))
        screen.type(ENTER)
        at = screen.wait_for("agent> Six hundred lines.", shown)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert "worker 300 ok" not in screen.screen_text()  # never drawn line by line
    assert users_said(llm.requests_with_tools()[-1]) == [f"summarise this: {log}".strip()]
    history = (workspace.root.parent / "state" / "fsagent" / "history").read_text()
    assert "[pasted" not in history  # a mark recalled later would be sent without its paste


def test_a_reply_cut_off_by_ctrl_c_is_not_shown_again_in_the_next_answer(workspace: Workspace):
    # A first reply streams dimmed while it may yet be reasoning: its words are held by the
    # session until the reply ends, which a Ctrl-C prevents. The next answer is the model's
    # next reply alone, on screen as in the thread.
    script = [reply("a long answer, held after its first piece", hold=True), text("Hello.")]
    with FakeLLM(script, auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.enter("tell me a story")
        at = screen.wait_for("agent> a long", at)
        screen.type(CTRL_C)
        at = screen.wait_for("⨯ interrupted", at)
        llm.release()
        at = screen.wait_for("you>", at)
        screen.enter("hi")
        answer = screen.wait_for("Hello.", at)
        screen.wait_for("you>", answer)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    after = screen.screen_text()[at:]
    assert "agent> Hello." in after, after
    assert "a long answer" not in after, after
