"""Piped regression runs: answers that cannot shift, transcripts, record and replay, and the
exit code that says how a run ended."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, Workspace, agent_env
from core.context.prompts import ROUTE_QUESTION
from fake_llm import FakeLLM, reply, text, tool_call

OFFLINE = "http://127.0.0.1:9/v1"  # the discard port: nothing answers there


def user_texts(llm: FakeLLM) -> list[str]:
    return [m["content"] for r in llm.requests for m in r["messages"] if m.get("role") == "user"]


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_stray_answer_is_not_sent_to_the_model(workspace: Workspace):
    # The model answers without the write it was expected to propose: the `n` meant for the
    # approval must not become a prompt the model could act on.
    script = [text("I would rather not."), text("Here is a summary.")]
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(script, auto_route="general") as llm:
        result = workspace.run(
            llm.base_url, "delete old.txt\nn\nsummarise\n", "--transcript", str(transcript)
        )

    assert result.returncode == 0, result.stderr
    assert user_texts(llm).count("n") == 0
    assert "summarise" in user_texts(llm)
    assert "⚠ not sent to the model: 'n' looks like an approval answer" in result.stdout
    assert {"event": "warning", "text": result.stdout.split("⚠ ")[1].splitlines()[0]} in events(
        transcript
    )


def test_strict_ends_the_run_at_a_stray_answer(workspace: Workspace):
    with FakeLLM([text("I would rather not.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "delete old.txt\nyes\nsummarise\n", "--strict")

    assert result.returncode == 3
    assert "yes" not in user_texts(llm) and "summarise" not in user_texts(llm)


def test_end_of_input_at_an_approval_exits_3_and_keeps_it_pending(workspace: Workspace):
    write = reply(tool_calls=[tool_call("write_file", {"path": "a.txt", "content": "A"})])
    with FakeLLM([write, text("Wrote a.txt.")], auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "write a.txt\n")
        assert paused.returncode == 3
        assert "Left paused: nothing was run" in paused.stdout
        assert not (workspace.root / "a.txt").exists()

        finished = workspace.run(llm.base_url, "y\n")

    assert finished.returncode == 0, finished.stderr
    assert (workspace.root / "a.txt").read_text() == "A"


def record_then_replay(workspace: Workspace, script: list, session: str) -> tuple:
    (workspace.root / "todo.md").write_text("- milk\n")
    original = workspace.root.parent / "original"
    shutil.copytree(workspace.root, original)
    cassette = workspace.root.parent / "cassette.jsonl"
    recorded = workspace.root.parent / "recorded.jsonl"
    with FakeLLM(script, auto_route="filesystem") as llm:
        live = workspace.run(
            llm.base_url, session, "--record", str(cassette), "--transcript", str(recorded)
        )
    # LM Studio's stand-in is gone; the replay starts again from the same files.
    shutil.rmtree(workspace.root)
    shutil.copytree(original, workspace.root)
    workspace.db.unlink()
    return live, cassette, recorded


SESSION_SCRIPT = [
    reply(tool_calls=[tool_call("read_file", {"path": "todo.md"})]),
    reply(tool_calls=[tool_call("write_file", {"path": "todo.md", "content": "- milk\n- eggs\n"})]),
    text("Added eggs."),
]


def test_replay_gives_the_recorded_transcript_without_a_server(workspace: Workspace):
    live, cassette, recorded = record_then_replay(workspace, SESSION_SCRIPT, "add eggs\ny\n")
    assert live.returncode == 0, live.stderr

    replayed = workspace.root.parent / "replayed.jsonl"
    result = workspace.run(
        OFFLINE, "add eggs\ny\n", "--replay", str(cassette), "--transcript", str(replayed)
    )

    assert result.returncode == 0, result.stderr
    assert replayed.read_text() == recorded.read_text()
    assert (workspace.root / "todo.md").read_text() == "- milk\n- eggs\n"
    kinds = [e["event"] for e in events(replayed)]
    assert kinds == [
        "prompt", "route", "tool_call", "tool_result", "tool_call",
        "approval_request", "decision", "tool_result", "answer",
    ]  # fmt: skip
    assert not any(str(workspace.root) in line for line in replayed.read_text().splitlines())


def test_replay_that_drifts_stops_with_exit_4(workspace: Workspace):
    _, cassette, _ = record_then_replay(workspace, SESSION_SCRIPT, "add eggs\ny\n")

    # Rejecting the write answers the recorded call differently than the recording did.
    result = workspace.run(OFFLINE, "add eggs\nn\n", "--replay", str(cassette))

    assert result.returncode == 4
    assert result.stderr.startswith("fsagent: replay mismatch at step 4: the tool calls answered")
    assert (workspace.root / "todo.md").read_text() == "- milk\n"


def test_a_file_that_is_not_a_cassette_cannot_start(workspace: Workspace):
    bogus = workspace.root.parent / "bogus.jsonl"
    bogus.write_text('{"hello": 1}\n')
    result = workspace.run(OFFLINE, "hi\n", "--replay", str(bogus))

    assert result.returncode == 2
    assert "not an fsagent cassette" in result.stderr
    assert "Traceback" not in result.stderr


def test_regress_passes_the_shipped_demo_and_fails_a_changed_case(tmp_path: Path):
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "examples" / "demo", demo)
    regress = [sys.executable, str(REPO / "agent.py"), "regress", str(tmp_path)]

    passing = subprocess.run(regress, capture_output=True, text=True, env=agent_env(), check=False)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "demo  pass" in passing.stdout

    (demo / "files" / "todo.md").write_text("# Todo\n\n- call mom\n- buy milk\n")
    failing = subprocess.run(regress, capture_output=True, text=True, env=agent_env(), check=False)
    assert failing.returncode == 1
    assert "demo  FAIL" in failing.stdout
    assert "0 passed, 1 failed" in failing.stdout


def test_record_keeps_what_the_model_was_asked(workspace: Workspace):
    _, cassette, _ = record_then_replay(workspace, SESSION_SCRIPT, "add eggs\ny\n")
    header, *steps = (json.loads(line) for line in cassette.read_text().splitlines())

    assert header == {"fsagent_cassette": 1, "model": "fake-model"}
    # The router asks its question after the person's words; the agent steps send them alone.
    assert [s["request"]["last_user_text"] for s in steps] == [
        f"add eggs\n\n{ROUTE_QUESTION}",
        *["add eggs"] * 3,
    ]
    # Every request offers the same tools (the router may not call them), for the cache.
    assert steps[0]["request"]["tools"] == steps[1]["request"]["tools"]
    assert "write_file" in steps[0]["request"]["tools"]
    assert steps[1]["response"]["usage"]["input_tokens"] > 0  # what the budget reads
    assert steps[2]["response"]["tool_calls"][0]["name"] == "write_file"
    assert steps[3]["request"]["answered"] == [
        {"id": steps[2]["response"]["tool_calls"][0]["id"], "status": "success"}
    ]


def test_exit_codes_are_documented_in_help():
    result = subprocess.run(
        [sys.executable, str(REPO / "agent.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "3 stopped with an approval pending or an answer refused" in " ".join(
        result.stdout.split()
    )
    assert "4 replay mismatch" in result.stdout
