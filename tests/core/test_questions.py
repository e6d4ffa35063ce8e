"""The model asks the person (ask_person): answered at a prompt, in pipes, from another shell
with `fsagent approve --answer`, after a restart, or not at all. The real CLI, the real MCP
server, a real SQLite thread file and the scripted LM Studio stand-in."""

from __future__ import annotations

import json

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: commands that only read must not ask
NO_ONE = "No one can answer; decide yourself or stop."


def ask(question: str, choices: list[str] | None = None, id: str = "call_q") -> dict:
    args: dict = {"question": question}
    if choices is not None:
        args["choices"] = choices
    return reply(tool_calls=[tool_call("ask_person", args, id=id)])


def answer_to(llm: FakeLLM, call_id: str = "call_q") -> str:
    """What the model read as the result of its question, in the request after it."""
    for request in llm.requests_with_tools():
        for message in tool_messages(request):
            if message["tool_call_id"] == call_id:
                return message["content"]
    raise AssertionError(f"no answer to {call_id} reached the model")


def audit(workspace: Workspace) -> list[tuple[str, str, str, str]]:
    result = workspace.invoke(NO_LLM, "", "audit", "--json", thread=None)
    assert result.returncode == 0, result.stderr
    return [(r["tool"], r["decision"], r["reason"], r["by"]) for r in json.loads(result.stdout)]


def test_a_piped_line_answers_the_question_and_the_model_reads_it(workspace: Workspace):
    choices = ["notes/todo.md", "todo.md"]
    script = [ask("Which list should I add it to?", choices), text("Adding it to notes/todo.md.")]
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(
            llm.base_url, "add milk to my list\n1\n", "--transcript", str(transcript)
        )

    assert result.returncode == 0, result.stderr
    assert "? The agent asks: Which list should I add it to?" in result.stdout
    assert "    1. notes/todo.md\n    2. todo.md" in result.stdout
    assert "  answer> 1" in result.stdout
    assert answer_to(llm) == "The person answered: notes/todo.md"
    assert "agent> Adding it to notes/todo.md." in result.stdout
    # The model was offered the tool, and called once before the pause and once after.
    first = llm.requests_with_tools()[0]
    assert "ask_person" in [tool["function"]["name"] for tool in first["tools"]]
    assert len(llm.requests_with_tools()) == 2
    assert audit(workspace) == [("ask_person", "answer", "notes/todo.md", "piped")]
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    question = {"event": "question", "question": "Which list should I add it to?"}
    assert {**question, "choices": choices} in events


def test_a_piped_line_that_is_not_a_choice_stops_and_a_restart_answers(workspace: Workspace):
    script = [ask("Which list?", ["notes/todo.md", "todo.md"]), text("Using todo.md.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        refused = workspace.run(llm.base_url, "add milk to my list\nthe other one\n")
        listed = workspace.invoke(NO_LLM, "", "approvals", thread=None)
        threads = workspace.invoke(NO_LLM, "", "threads", thread=None)
        resumed = workspace.run(llm.base_url, "todo.md\n")

    assert refused.returncode == 3
    assert "not an answer at the question: 'the other one' is not one of the choices" in (
        refused.stderr
    )
    assert len(llm.requests_with_tools()) == 2  # once before the pause, once after the answer
    assert "t (a question)\n  call_q: ask_person(question='Which list?'" in listed.stdout
    assert "Answer a question with: fsagent approve NAME --answer TEXT" in listed.stdout
    assert "waiting for an answer" in threads.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert "paused: waiting for your answer to 'Which list?'." in resumed.stdout
    assert answer_to(llm) == "The person answered: todo.md"
    assert "agent> Using todo.md." in resumed.stdout


def test_end_of_piped_input_means_no_one_can_answer(workspace: Workspace):
    script = [ask("Overwrite notes.md?"), text("I will leave notes.md alone.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "tidy my notes\n")

    assert result.returncode == 0, result.stderr
    assert "end of input: no one can answer" in result.stdout
    assert answer_to(llm) == NO_ONE
    assert audit(workspace) == [("ask_person", "unanswered", "no one answered", "piped")]


def test_approve_no_never_asks_and_approve_yes_does_not_answer(workspace: Workspace):
    with FakeLLM([ask("Which one?"), text("I decided.")], auto_route="general") as llm:
        refused = workspace.run(llm.base_url, "pick one\n", "--approve", "no", thread="no")
        assert answer_to(llm) == NO_ONE
    with FakeLLM([ask("Which one?"), text("Fine.")], auto_route="general") as llm:
        asked = workspace.run(llm.base_url, "pick one\nthe blue one\n", "--approve", "yes")
        assert answer_to(llm) == "The person answered: the blue one"

    assert refused.returncode == 0, refused.stderr
    assert "? The agent asks" not in refused.stdout
    assert "✗ ask_person: fsagent runs with --approve no: no one is asked" in refused.stdout
    assert asked.returncode == 0, asked.stderr
    assert "? The agent asks: Which one?" in asked.stdout


def test_a_question_waiting_after_a_crash_is_answered_from_another_shell(workspace: Workspace):
    script = [ask("Which folder?"), text("Using docs/."), ask("Which folder?", id="call_2")]
    script.append(text("I will pick myself."))
    with FakeLLM(script, auto_route="filesystem") as llm:
        agent = workspace.start(llm.base_url)
        agent.send("file my notes")
        agent.wait_for("? The agent asks")
        agent.kill()

        wrong = workspace.run(llm.base_url, "", "approve", "t", "--call", "call_x")
        answered = workspace.run(llm.base_url, "", "approve", "t", "--answer", "docs/")
        assert answer_to(llm) == "The person answered: docs/"

        agent = workspace.start(llm.base_url, thread="u")
        agent.send("file my notes again")
        agent.wait_for("? The agent asks")
        agent.kill()
        unanswered = workspace.run(llm.base_url, "", "approve", "u")
        assert answer_to(llm, "call_2") == NO_ONE

    assert wrong.returncode == 1 and "no pending call call_x" in wrong.stderr
    assert answered.returncode == 0, answered.stderr
    assert "✓ answered: call_q" in answered.stdout
    assert "agent> Using docs/." in answered.stdout
    assert unanswered.returncode == 0, unanswered.stderr
    assert "✗ no answer: call_2" in unanswered.stdout
