"""Changes a screen cannot show by themselves are drawn before the question (issue 41): a
CRLF -> LF rewrite, a Cyrillic look-alike in a URL, a word made wholly of look-alikes and a
trailing space. Through the real CLI, piped and on a pty, and `fsagent approve`: each is
visible in the lines printed above `write_file? [y/n/e/a/r/?]`; nothing is written on a no."""

from __future__ import annotations

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen

FILES = {
    "crlf.txt": (b"alpha\r\nbeta\r\n", "alpha\nbeta\n"),
    "pip.conf": (b"index-url = https://pypi.org/simple\n", "index-url = https://руpi.org/simple\n"),
    "deploy.sh": (b"run ops\n", "run орѕ\n"),
    "build.sh": (b"rm -rf ./build\n", "rm -rf ./build \n"),
}


def writes(workspace: Workspace) -> list[dict]:
    calls = []
    for number, (name, (old, new)) in enumerate(FILES.items()):
        (workspace.root / name).write_bytes(old)
        calls.append(tool_call("write_file", {"path": name, "content": new}, f"c_{number}"))
    return [reply(tool_calls=calls), text("Left them alone.")]


def previews(output: str) -> dict[str, list[str]]:
    """The lines printed for each call, between its `[k/n] write_file(...)` line and its
    question, by file name."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("[") and "write_file(" in line:
            name = next(n for n in FILES if repr(n) in line)
            current = found.setdefault(name, [])
        elif "write_file? [y/n/e/a/r/?]" in line:
            current = None
        elif current is not None:
            current.append(line.strip())
    return found


def check(shown: dict[str, list[str]]) -> None:
    crlf = shown["crlf.txt"]
    assert "-alpha␍" in crlf and "+alpha" in crlf and "(no change)" not in crlf
    assert "(line ending CRLF -> LF)" in crlf
    assert any("␍ a carriage return" in line for line in crlf)  # the legend

    pip = shown["pip.conf"]
    assert "+index-url = https://руpi.org/simple" in pip
    assert (
        "⚠ look-alike characters (+): р U+0440 CYRILLIC SMALL LETTER ER, "
        "у U+0443 CYRILLIC SMALL LETTER U"
    ) in pip

    deploy = shown["deploy.sh"]
    [warning] = [line for line in deploy if line.startswith("⚠ look-alike")]
    assert "U+043E CYRILLIC SMALL LETTER O" in warning and "U+0455" in warning

    build = shown["build.sh"]
    assert "-rm -rf ./build" in build and "+rm -rf ./build·" in build
    assert "(· a space)" in build


def test_hidden_changes_are_drawn_before_the_question_when_piped(workspace: Workspace):
    with FakeLLM(writes(workspace), auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "tidy up\n" + "n\n" * len(FILES))

    assert result.returncode == 0, result.stderr
    check(previews(result.stdout))
    for name, (old, _) in FILES.items():
        assert (workspace.root / name).read_bytes() == old


def test_fsagent_approve_draws_them_too(workspace: Workspace):
    with FakeLLM(writes(workspace), auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "tidy up\n")
        assert paused.returncode == 3, paused.stderr
        asked = workspace.run(llm.base_url, "", "approve", "t", thread=None)

    assert asked.returncode == 3, asked.stderr
    check(previews(asked.stdout))
    for name, (old, _) in FILES.items():
        assert (workspace.root / name).read_bytes() == old


def test_hidden_changes_are_on_the_screen_at_a_terminal(workspace: Workspace):
    env = agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")}
    with FakeLLM(writes(workspace), auto_route="filesystem") as llm:
        term = PtyScreen(workspace.command(llm.base_url), str(workspace.root), env)
        try:
            at = term.wait_for("you>")
            term.enter("tidy up")
            screens = []
            for _ in FILES:
                question = term.wait_for("write_file? [y/n/e/a/r/?]", at)
                screens.append(term.screen_text()[at:question])
                term.enter("n")
                at = term.wait_for("reason (optional", question)
                term.enter("")
            term.wait_for("you>", at)
            term.enter("quit")
        finally:
            code = term.close()

    assert code == 0, term.screen_text()
    # Words, not rows: where a long note wraps depends on the terminal's width.
    crlf, pip, deploy, build = (screen.split() for screen in screens)
    assert "-alpha␍" in crlf and "+alpha" in crlf and "CRLF" in crlf
    assert "U+0440" in pip and "U+0443" in pip and "look-alike" in pip
    assert "U+0455" in deploy and "look-alike" in deploy
    assert "+rm" in build and "./build·" in build
    for name, (old, _) in FILES.items():
        assert (workspace.root / name).read_bytes() == old


def test_an_undo_draws_the_line_ending_it_would_restore(workspace: Workspace):
    # An undo's yes is a decision too: restoring CRLF lines over LF ones is shown as such.
    (workspace.root / "a.txt").write_bytes(b"old\r\n")
    call = tool_call("write_file", {"path": "a.txt", "content": "new\n"}, "c_a")
    with FakeLLM([reply(tool_calls=[call]), text("Done.")], auto_route="filesystem") as llm:
        wrote = workspace.run(llm.base_url, "change a\ny\n")
        assert wrote.returncode == 0, wrote.stderr
        asked = workspace.invoke(llm.base_url, "n\n", "undo", "t")

    lines = [line.strip() for line in asked.stdout.splitlines()]
    assert "-new" in lines and "+old␍" in lines
    assert any("␍ a carriage return" in line for line in lines)
    assert (workspace.root / "a.txt").read_bytes() == b"new\n"
