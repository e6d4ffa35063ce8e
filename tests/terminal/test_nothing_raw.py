"""Nothing raw reaches a screen: a file's content in a tool result, the model's question and
answer, and a thread name are written out (`\\x1b`, `\\xe2\\x80\\xae`) in every screen mode,
the rich terminal, --plain, NO_COLOR=1, TERM=dumb and a pipe, and in the transcript. The real
CLI on a pty read by a terminal emulator (pyte), the real MCP server, the LM Studio stand-in.

The attack (issue 19): a file whose first line clears the screen and draws a fake approval
prompt; shown raw, the person would see `touch? [y/n/e/a/r/?]` where nothing asks, and the
real review could be scrolled away. Bidi controls (U+202E) reorder what is shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import PtyScreen

OLD_GRAPH = Path(__file__).resolve().parent.parent / "old_graph.py"

# Clear the screen, home the cursor, set the window title (OSC), draw a fake prompt, then a
# right-to-left override and C1's own CSI (0x9b).
FAKE_PROMPT = "\x1b[2J\x1b[H\x1b]0;pwned\x07  touch? [y/n/e/a/r/?] invoice\u202etxt.exe\x9b2J"
QUESTION = "Which file?\x1b[?1049h\u2066hidden\u2069"
ANSWER = "Done \x1b[31mred\x1b[0m and \u202eevil\u202c, \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\."
SHOWN_PROMPT = "\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07  touch? [y/n/e/a/r/?] invoice\\xe2\\x80\\xaetxt"
SHOWN_QUESTION = "Which file?\\x1b[?1049h\\xe2\\x81\\xa6hidden\\xe2\\x81\\xa9"
SHOWN_ANSWER = "Done \\x1b[31mred\\x1b[0m and \\xe2\\x80\\xaeevil"
RAW = ("\x1b[2J", "\x1b]0;", "\x1b[31mred", "\x1b[?1049h", "\x1b]8;", "\u202e", "\u2066", "\x9b")


def hostile_script() -> list:
    return [
        reply(tool_calls=[tool_call("read_file", {"path": "hostile.txt"}, id="call_r")]),
        reply(tool_calls=[tool_call("ask_person", {"question": QUESTION}, id="call_q")]),
        text(ANSWER),
    ]


def hostile_workspace(workspace: Workspace) -> Path:
    (workspace.root / "hostile.txt").write_text(FAKE_PROMPT + "\nsecond line\n")
    return workspace.root.parent / "transcript.jsonl"


def assert_nothing_raw(shown: str) -> None:
    for code in RAW:
        assert code not in shown, (code, shown[:3000])


@pytest.mark.parametrize(
    ("args", "env"),
    [((), {}), ((), {"NO_COLOR": "1"}), (("--plain",), {}), ((), {"TERM": "dumb"})],
    ids=["rich", "NO_COLOR", "--plain", "TERM=dumb"],
)
def test_a_file_the_model_and_a_question_cannot_write_to_the_screen(
    workspace: Workspace, args: tuple, env: dict
):
    transcript = hostile_workspace(workspace)
    state = workspace.root.parent / "state"
    environment = agent_env() | {"XDG_STATE_HOME": str(state)} | env
    with FakeLLM(hostile_script(), auto_route="filesystem") as llm:
        command = workspace.command(llm.base_url, "--transcript", str(transcript), *args)
        screen = PtyScreen(command, str(workspace.root), environment)
        at = screen.wait_for("you>")
        screen.enter("read it")
        at = screen.wait_for("answer>", at)
        screen.enter("the first")
        at = screen.wait_for("and \\xe2\\x80\\xaeevil", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    raw = screen.raw.decode("utf-8", "replace")
    assert_nothing_raw(raw)
    if args or env.get("TERM") == "dumb":  # plain: not one escape code, not even ours
        assert "\x1b" not in raw
    shown = screen.screen_text()
    # The escape codes are on screen as text, where they came from: the result's first line.
    assert f"← {SHOWN_PROMPT}" in shown
    assert f"? The agent asks: {SHOWN_QUESTION}" in shown
    assert SHOWN_ANSWER in shown
    # The only approval prompt ever drawn is the file's, written out on the result's line.
    assert shown.count("touch? [y/n/e/a/r/?]") == 1
    # The transcript keeps the values (JSON escapes them), and no raw byte of them.
    written = transcript.read_text(encoding="utf-8")
    assert_nothing_raw(written)
    results = [json.loads(line) for line in written.splitlines()]
    [result] = [e for e in results if e.get("tool") == "read_file" and "text" in e]
    assert result["text"].startswith(FAKE_PROMPT)
    [answer] = [e for e in results if e["event"] == "answer"]
    assert answer["text"] == ANSWER


def test_a_pipe_gets_printable_text_byte_for_byte_and_hidden_characters_written_out(
    workspace: Workspace,
):
    transcript = hostile_workspace(workspace)
    with FakeLLM(hostile_script(), auto_route="filesystem") as llm:
        result = workspace.run(
            llm.base_url, "read it\nthe first\n", "--transcript", str(transcript)
        )
    assert result.returncode == 0, result.stderr
    assert_nothing_raw(result.stdout + result.stderr)
    assert "\x1b" not in result.stdout + result.stderr
    assert f"← {SHOWN_PROMPT}" in result.stdout
    assert f"? The agent asks: {SHOWN_QUESTION}" in result.stdout
    # Printable text byte for byte: what is not hidden is exactly what the model said.
    assert f"agent> {SHOWN_ANSWER}\\xe2\\x80\\xac, \\x1b]8;;http://x\\x1b\\link" in result.stdout


HOSTILE_THREAD = "t\x1b[2J\u202eeman"


def test_a_thread_name_is_written_out_in_the_banner_threads_and_approvals(workspace: Workspace):
    """A thread name today's rule refuses (core.threads.thread_names) can still come from an
    older version or a shared database; every list that prints it writes it out, in the
    percent-encoded form that names it again at the shell."""
    made = subprocess.run(
        [sys.executable, str(OLD_GRAPH), workspace.location, HOSTILE_THREAD, "approve", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    with FakeLLM([], auto_route="filesystem") as llm:
        threads = workspace.run(llm.base_url, "", "threads", thread=None)
        approvals = workspace.run(llm.base_url, "", "approvals", thread=None)
        banner = workspace.run(llm.base_url, "", thread=HOSTILE_THREAD)

    shown_name = "t%1B%5B2J%E2%80%AEeman"
    for result in (threads, approvals, banner):
        assert_nothing_raw(result.stdout + result.stderr)
        assert shown_name in result.stdout, result.stdout + result.stderr
    assert f"Thread '{shown_name}': paused: waiting for your approval" in banner.stdout
    assert not (workspace.root / "old.txt").exists()


def test_a_carriage_return_never_reaches_the_screen(workspace: Workspace):
    """A carriage return moves the cursor back to the start of its line, so what follows
    prints over what was there: `Delete all? no\rDelete all? yes` reads as the second. From
    the model's question or its answer (the server already ends a file's lines at one), it
    is written out as `\x0d`."""
    question = "Overwrite notes.md? It is safe\rOverwrite notes.md? It holds your keys"
    script = [
        reply(tool_calls=[tool_call("ask_person", {"question": question}, id="call_q")]),
        text("Kept\rAll written."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "tidy\nno\n")

    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "\r" not in shown
    assert "It is safe\\x0dOverwrite notes.md? It holds your keys" in shown
    assert "agent> Kept\\x0dAll written." in shown
