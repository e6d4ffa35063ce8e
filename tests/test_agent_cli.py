"""The approval agent end to end: the real CLI in a subprocess, the real MCP server on a temp
root, a real SQLite thread file, and the scripted LM Studio stand-in over HTTP."""

from __future__ import annotations

import socket

from conftest import Workspace, tool_messages, tree_snapshot
from fake_llm import FakeLLM, reply, text, tool_call


def write_hello() -> dict:
    return reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hello"})])


def test_approved_write_creates_the_file_and_the_model_sees_the_result(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "create hello.txt\ny\n")

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert "⇢ route: filesystem" in result.stdout
    assert "→ write_file(path='hello.txt', content='hello')" in result.stdout
    assert "⚠ Approval needed. The agent wants to run:" in result.stdout
    assert "  write_file? [y/n/e/a/r/?] y" in result.stdout  # a piped answer is echoed
    assert "agent> Created hello.txt." in result.stdout
    [after] = tool_messages(llm.requests_with_tools()[1])
    assert '"new_sha256"' in after["content"] and "hello.txt" in after["content"]


def test_rejected_write_leaves_no_file_and_tells_the_model_not_to_retry(workspace: Workspace):
    with FakeLLM([write_hello(), text("Understood.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "create hello.txt\nn\n")

    assert result.returncode == 0, result.stderr
    assert not (workspace.root / "hello.txt").exists()
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "rejected write_file" in answer["content"]
    assert "Do not retry" in answer["content"]


def test_anything_but_an_answer_runs_nothing(workspace: Workspace):
    with FakeLLM([write_hello(), text("ok")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "create hello.txt\nsure, why not\n")

    assert result.returncode == 3, result.stderr  # a pipe must answer; the thread stays paused
    assert not (workspace.root / "hello.txt").exists()


def test_read_only_request_runs_without_asking(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "notes.md"})]),
        text("It says: buy milk."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "what is in notes.md?\n")

    assert result.returncode == 0, result.stderr
    assert "Approval needed" not in result.stdout
    assert "← buy milk" in result.stdout
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "buy milk" in answer["content"]


def test_end_of_input_at_approval_leaves_the_thread_paused(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        first = workspace.run(llm.base_url, "create hello.txt\n")
        assert first.returncode == 3
        assert not (workspace.root / "hello.txt").exists()
        assert len(llm.requests_with_tools()) == 1

        second = workspace.run(llm.base_url, "y\n")

    assert second.returncode == 0, second.stderr
    assert "paused: waiting for your approval of write_file(path='hello.txt'" in second.stdout
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert len(llm.requests_with_tools()) == 2


def test_killed_while_waiting_then_answered_from_a_new_process(workspace: Workspace):
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("create hello.txt")
        agent.wait_for("Approval needed")
        agent.kill()
        assert not (workspace.root / "hello.txt").exists()
        assert len(llm.requests_with_tools()) == 1

        resumed = workspace.run(llm.base_url, "y\n")

    assert resumed.returncode == 0, resumed.stderr
    assert "paused: waiting for your approval" in resumed.stdout
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert "agent> Created hello.txt." in resumed.stdout
    assert len(llm.requests_with_tools()) == 2


def test_a_new_prompt_is_not_sent_while_an_approval_is_pending(workspace: Workspace):
    with FakeLLM([write_hello(), text("Not done.")], auto_route="filesystem") as llm:
        workspace.run(llm.base_url, "create hello.txt\n")
        # The next line is read as the answer to the pending approval, not as a prompt.
        resumed = workspace.run(llm.base_url, "what about my approval?\n")

    assert not (workspace.root / "hello.txt").exists()
    human_texts = [
        m["content"] for r in llm.requests for m in r["messages"] if m.get("role") == "user"
    ]
    assert "what about my approval?" not in human_texts
    assert resumed.returncode == 3, resumed.stderr  # not an answer: still paused


def test_server_refuses_paths_outside_the_root_even_when_approved(workspace: Workspace):
    before = tree_snapshot(workspace.outside)
    outside_file = str(workspace.outside / "secret.txt")
    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "../outside/secret.txt"})]),
        reply(tool_calls=[tool_call("write_file", {"path": outside_file, "content": "pwned"})]),
        text("I could not do that."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "read and overwrite the secret\ny\n")

    assert result.returncode == 0, result.stderr
    assert tree_snapshot(workspace.outside) == before
    first, second = (tool_messages(r)[-1] for r in llm.requests_with_tools()[1:])
    assert first["content"].startswith("security_error")
    assert "security_error" in second["content"]
    assert "agent> I could not do that." in result.stdout


def test_malformed_and_unknown_tool_calls_are_answered_with_errors(workspace: Workspace):
    script = [
        reply(
            tool_calls=[
                tool_call("read_file", '{"path": a.txt}'),
                tool_call("launch_rockets", {"count": 3}),
                tool_call("write_file", {"path": "no-content.txt"}),
            ]
        ),
        text("Sorry, let me try again later."),
    ]
    with FakeLLM(script, auto_route="general") as llm:
        result = workspace.run(llm.base_url, "do things\n")

    assert result.returncode == 0, result.stderr
    assert "Approval needed" not in result.stdout  # no person is asked about calls that cannot run
    assert "Traceback" not in result.stderr
    answers = [m["content"] for m in tool_messages(llm.requests_with_tools()[1])]
    assert len(answers) == 3
    assert any("not valid JSON" in a for a in answers)
    assert any("no tool named 'launch_rockets'" in a for a in answers)
    assert any("invalid arguments for write_file" in a and "content" in a for a in answers)
    # The unparseable arguments are never sent back to the model.
    assert '{"path": a.txt}' not in str(llm.requests_with_tools()[1]["messages"])
    assert not (workspace.root / "no-content.txt").exists()


def test_a_looping_model_is_stopped_with_a_clear_message(workspace: Workspace):
    (workspace.root / "a.txt").write_text("a\n")

    def always_read(request: dict) -> dict:
        return reply(tool_calls=[tool_call("read_file", {"path": "a.txt"})])

    with FakeLLM(always_read, auto_route="search") as llm:
        result = workspace.run(llm.base_url, "loop forever\n")

    assert result.returncode == 0, result.stderr
    assert "Stopped: this request used 25 model calls" in result.stdout
    assert len(llm.requests_with_tools()) == 25


def test_lm_studio_down_is_one_line_and_exit_2(workspace: Workspace):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    result = workspace.run(url, "hello\n")

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"fsagent: cannot reach the model server at {url}: start your model server (LM "
        "Studio's local server, llama-server or ollama serve) or pass --base-url"
    ]
    assert "you>" not in result.stdout


def test_missing_root_is_a_clear_start_error(workspace: Workspace):
    with FakeLLM([]) as llm:
        result = workspace.run(llm.base_url, "", "--root", str(workspace.root / "nope"))

    assert result.returncode == 2
    assert "no such folder" in result.stderr
    assert "Traceback" not in result.stderr


def test_thread_resumes_with_its_history(workspace: Workspace):
    with FakeLLM([text("Hello!"), text("You said hi before.")], auto_route="general") as llm:
        workspace.run(llm.base_url, "hi\n")
        result = workspace.run(llm.base_url, "what did I say?\n")

    assert "Thread 't': resuming, 2 messages." in result.stdout
    last = llm.requests_with_tools()[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["hi", "what did I say?"]


def test_read_only_agent_is_offered_no_write_tool_and_cannot_write(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "notes.md"})]),
        reply(tool_calls=[tool_call("write_file", {"path": "x.txt", "content": "x"})]),
        text("I cannot write here."),
    ]
    with FakeLLM(script) as llm:
        result = workspace.run(llm.base_url, "read then write\n", "--read-only")

    assert result.returncode == 0, result.stderr
    assert "Loaded 11 tools." in result.stdout
    offered = {t["function"]["name"] for r in llm.requests_with_tools() for t in r["tools"]}
    assert "read_file" in offered and not offered & {"write_file", "delete", "move", "touch"}
    assert "Approval needed" not in result.stdout
    assert not (workspace.root / "x.txt").exists()
    assert "buy milk" in tool_messages(llm.requests_with_tools()[1])[0]["content"]
    assert (
        "write_file is not a valid tool"
        in tool_messages(llm.requests_with_tools()[2])[-1]["content"]
    )
