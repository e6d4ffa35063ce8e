"""`fsagent serve` as a real process (uvicorn): a thread paused before a SIGKILL is approved
by the next server on the same store (a SQLite file, or a Postgres database two servers
share), SIGTERM cuts a running turn off the way Ctrl-C does and exits cleanly, each
request is one log line without arguments, and bad start-up options are one line, exit 2."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import threading
import time

import httpx
import pytest

from conftest import Workspace
from core.threads.ledger import HOLD_MARKER, TEST_HOLD_ENV
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, ServeProcess, approve_over_http, sse_events

NO_LLM = "http://127.0.0.1:9/v1"


def write_hello() -> dict:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hello secret\n"}, id="call_1")
    return reply(tool_calls=[call])


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_paused_then_killed_then_approved_after_a_restart(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        first = ServeProcess(workspace, llm.base_url)
        said = httpx.post(
            f"{first.url}/api/threads/t/messages", json={"text": "create hello.txt"}, timeout=60
        )
        assert said.status_code == 200
        assert sse_events(said.text)[-1] == ("done", {"thread": "t", "status": "pending"})
        assert len(llm.requests_with_tools()) == 1
        first.kill()  # SIGKILL: no clean-up of any kind
        assert not (workspace.root / "hello.txt").exists()

        second = ServeProcess(workspace, llm.base_url)
        listed = httpx.get(f"{second.url}/api/admin/approvals", headers=ADMIN, timeout=60)
        assert [a["thread"] for a in listed.json()["approvals"]] == ["t"]
        decided = approve_over_http(second.url, "t")  # bound to the preview it lists
        shown = decided.json()
        assert (shown["status"], shown["thread_id"], shown["run"]) == ("approved", "t", "done")
        assert shown["answer"] == "Created hello.txt."
        again = httpx.post(
            f"{second.url}/api/admin/approvals/t", json={"approved": True}, headers=ADMIN
        )
        assert again.status_code == 404
        shown = httpx.get(f"{second.url}/api/threads/t", timeout=60).json()
        assert shown["status"] == "idle"
        assert shown["messages"][-1]["text"] == "Created hello.txt."
        assert len(llm.requests_with_tools()) == 2

        second.process.send_signal(signal.SIGTERM)
        assert second.wait() == 0
    assert (workspace.root / "hello.txt").read_text() == "hello secret\n"
    # The write ran once: one decision, one ledger row, whichever store the servers share.
    audit = workspace.invoke(NO_LLM, "", "audit", "--json", thread=None)
    assert [(r["tool"], r["decision"], r["by"]) for r in json.loads(audit.stdout)] == [
        ("write_file", "approve", "admin")
    ]
    log = second.text
    assert "POST /api/admin/approvals/t 200 " in log and "thread=t" in log
    assert "POST /api/admin/approvals/t 404 " in log
    assert "hello secret" not in first.text + log  # no argument's content in the log
    assert "Traceback" not in log


def test_a_client_gone_or_sigterm_cuts_a_running_turn_off_as_ctrl_c_does(workspace: Workspace):
    """Each write holds right after its ledger row says `started` (the crash tests' hook).
    The first client goes away there; then SIGTERM arrives while the second one's write
    holds. Each run is closed as Ctrl-C closes one: the write's outcome is unknown (it is
    never run again), the thread is idle, and the server exits 0."""

    def append(thread: str) -> dict:
        args = {"path": f"{thread}.log", "content": "line\n", "mode": "append"}
        return reply(tool_calls=[tool_call("write_file", args, id=f"call_{thread}")])

    script = [append("a"), append("b")]
    held = re.escape(HOLD_MARKER)
    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(
            workspace, llm.base_url, "--approve", "yes", env={TEST_HOLD_ENV: "started"}
        )
        with httpx.stream(
            "POST", f"{served.url}/api/threads/a/messages", json={"text": "log a"}, timeout=60
        ) as gone:
            assert gone.status_code == 200
            served.wait_for(HOLD_MARKER)
        # The client closed its connection mid-run: the server closes the run.
        deadline = time.monotonic() + 30
        while True:
            shown = httpx.get(f"{served.url}/api/threads/a", timeout=30).json()
            if shown["status"] == "idle" and shown["messages"][-1]["role"] == "tool":
                break
            assert time.monotonic() < deadline, shown
            time.sleep(0.1)
        assert shown["messages"][-1]["text"].startswith("Outcome unknown: write_file")

        frames: list[str] = []

        def chat() -> None:
            with httpx.stream(
                "POST", f"{served.url}/api/threads/b/messages", json={"text": "log b"},
                timeout=60,
            ) as response:  # fmt: skip
                frames.extend(response.iter_text())

        client = threading.Thread(target=chat)
        client.start()
        served.wait_for(re.compile(f"{held}.*{held}", re.S))  # b's write holds now
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0
        client.join(timeout=30)

        events = sse_events("".join(frames))
        assert events[-1] == ("done", {"thread": "b", "status": "cut_off"})
        [result] = [data for kind, data in events if kind == "tool_result"]
        assert result["id"] == "call_b" and result["text"].startswith("Outcome unknown")
        errors = [data["text"] for kind, data in events if kind == "error"]
        assert any("the server is stopping" in error for error in errors)
        assert len(llm.requests_with_tools()) == 2  # neither run asked the model again
        assert "Traceback" not in served.text

        listed = workspace.invoke(NO_LLM, "", "threads", thread=None)
        shown_b = workspace.invoke(NO_LLM, "", "threads", "show", "b")
    assert [line.split()[-1] for line in listed.stdout.splitlines()[1:-1]] == ["idle", "idle"]
    assert "← ✗ Outcome unknown: write_file was started" in shown_b.stdout


def test_bad_start_up_options_are_one_line_and_exit_2(workspace: Workspace):
    open_to_all = workspace.run(NO_LLM, "", "serve", "--host", "0.0.0.0", thread=None)
    assert open_to_all.returncode == 2
    assert open_to_all.stderr.strip().splitlines() == [
        "fsagent: serve --host 0.0.0.0: off loopback every endpoint needs a token, and "
        "FSAGENT_ADMIN_TOKEN is not set (or blank); set it, or serve on 127.0.0.1"
    ]
    terminal_only = workspace.run(NO_LLM, "", "serve", "--transcript", "t.jsonl", thread=None)
    assert terminal_only.returncode == 2
    assert "serve does not take --transcript" in terminal_only.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        in_use = workspace.run(NO_LLM, "", "serve", "--port", port, thread=None)
    assert in_use.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in in_use.stderr
    assert "Traceback" not in open_to_all.stderr + terminal_only.stderr + in_use.stderr
    assert not workspace.db.exists()


def test_a_run_killed_mid_write_is_finished_by_the_next_message_and_never_rerun(
    workspace: Workspace,
):
    """SIGKILL while a write runs (after its ledger row said `started`): the thread is left
    interrupted. After a restart the next message first finishes that run, as opening the
    thread at the terminal does: the write is not run again, its outcome is reported unknown,
    and then the message is answered."""
    args = {"path": "c.log", "content": "line\n", "mode": "append"}
    script = [
        reply(tool_calls=[tool_call("write_file", args, id="call_c")]),
        text("I could not confirm that the line was written."),
        text("Please check c.log."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        first = ServeProcess(
            workspace, llm.base_url, "--approve", "yes", env={TEST_HOLD_ENV: "started"}
        )
        frames: list[str] = []

        def chat() -> None:
            with contextlib.suppress(httpx.HTTPError):
                with httpx.stream(
                    "POST", f"{first.url}/api/threads/c/messages", json={"text": "log c"},
                    timeout=60,
                ) as response:  # fmt: skip
                    frames.extend(response.iter_text())

        client = threading.Thread(target=chat)
        client.start()
        first.wait_for(HOLD_MARKER)
        first.kill()
        client.join(timeout=30)
        listed = workspace.invoke(NO_LLM, "", "threads", thread=None)
        assert "interrupted" in listed.stdout, listed.stdout

        second = ServeProcess(workspace, llm.base_url, "--approve", "yes")
        said = httpx.post(
            f"{second.url}/api/threads/c/messages", json={"text": "and now?"}, timeout=60
        )
        events = sse_events(said.text)
        assert events[0][0] == "notice" and "The last run was cut off" in events[0][1]["text"]
        [result] = [data for kind, data in events if kind == "tool_result"]
        assert result["id"] == "call_c" and result["text"].startswith("Outcome unknown")
        answers = [data["text"] for kind, data in events if kind == "answer"]
        assert answers == ["I could not confirm that the line was written.", "Please check c.log."]
        assert events[-1] == ("done", {"thread": "c", "status": "done"})
        assert len(llm.requests_with_tools()) == 3
        second.process.send_signal(signal.SIGTERM)
        assert second.wait() == 0
    assert not (workspace.root / "c.log").exists()  # held before it ran; never run again
