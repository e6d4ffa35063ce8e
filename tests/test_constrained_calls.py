"""Tool calls a small model cannot get wrong (`--constrain-calls`, core.context.constrained):
the real CLI (and the HTTP service) against the stand-in (tests/fake_llm.py), which answers a
request that carries a schema within it, as a grammar would force, and refuses what the real
servers refuse in their own words."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import Workspace
from fake_llm import FakeLLM, FakeModel, constrained_call, schema_of, text
from local_model import request_kind
from serving import serving

ASK = "Create a file notes.txt containing 'buy milk'"


def small_model(request: dict[str, Any]) -> dict[str, Any]:
    """SmolLM2-135M as issue 30 found it: prose with `tools`, a valid call once its output
    must fit a schema of calls (here the stand-in's grammar does the fitting)."""
    kind = request_kind(request)
    if kind == "router":
        return text("filesystem")
    if kind == "summary":
        return text("Summary: the person asked for notes.txt.")
    last = request["messages"][-1]
    if "result of write_file" in str(last.get("content")) or last["role"] == "tool":
        return text("It is not created: you said no.")
    if schema_of(request) is None:
        return text("I will create notes.txt with buy milk in it.")
    return constrained_call("write_file", {"path": "notes.txt", "content": "buy milk\n"})


def agent_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in llm.requests if request_kind(r) == "agent"]


def test_on_a_small_model_reaches_the_approval_of_a_real_write_call(workspace: Workspace):
    with FakeLLM(small_model, flavour="llamacpp", context=2048) as llm:
        plain = workspace.run(llm.base_url, f"{ASK}\n", thread="plain")
        before = len(llm.requests)
        on = workspace.run(llm.base_url, f"{ASK}\nn\n", "--constrain-calls", "on")
        requests = llm.requests[before:]

    # Without it, the model answers prose: nothing to approve.
    assert plain.returncode == 0, plain.stderr
    assert "agent> I will create notes.txt" in plain.stdout
    assert "Approval needed" not in plain.stdout
    # With it, its reply is read into a real write call, reviewed like any other.
    assert on.returncode == 0, on.stderr
    assert "→ write_file(path='notes.txt', content='buy milk\\n')" in on.stdout
    assert "⚠ Approval needed" in on.stdout and "new file notes.txt, 1 line" in on.stdout
    assert "+buy milk" in on.stdout and "write_file? [y/n/e/a/r/?] n" in on.stdout
    assert "agent> It is not created: you said no." in on.stdout
    assert not (workspace.root / "notes.txt").exists()
    # Each request asked for the schema: the router an enum of routes, each agent step one
    # of the tools it offers (listed in the prompt, no `tools`) with that tool's arguments.
    router, step = requests[0], requests[1]
    assert schema_of(router)["properties"]["route"]["enum"] == [  # type: ignore[index]
        "filesystem",
        "search",
        "general",
    ]
    schema = schema_of(step)
    assert schema is not None and "tools" not in step
    calls = schema["anyOf"][1]["properties"]["calls"]["items"]["anyOf"]
    names = [c["properties"]["tool"]["const"] for c in calls]
    assert "write_file" in names and "move" in names  # every tool the request offers
    assert "list_allowed_roots" not in names  # and none it does not
    write = calls[names.index("write_file")]["properties"]["arguments"]
    # content or edits (patch_file folded into write_file): only path is needed by both.
    assert write["required"] == ["path"] and write["additionalProperties"] is False
    assert set(write["properties"]) == {"path", "content", "edits"}
    assert (
        "- write_file(path, content?, edits?: [{old_text, new_text}]): Create or overwrite a "
        in step["messages"][0]["content"]
    )
    # The call is sent back as the JSON the model wrote, its result under the tool's name.
    after = requests[-1]["messages"]
    assert json.loads(after[-2]["content"]) == {
        "calls": [
            {"tool": "write_file", "arguments": {"path": "notes.txt", "content": "buy milk\n"}}
        ]
    }
    assert after[-1]["role"] == "user"
    assert after[-1]["content"].startswith("[fsagent: result of write_file]\nNot done")


def writes_calls_as_text(request: dict[str, Any]) -> dict[str, Any]:
    """A model that writes its reads as text while it has `tools`, and answers within a
    schema once it has one."""
    kind = request_kind(request)
    if kind == "router":
        return text("search")
    last = request["messages"][-1]
    if last["role"] in ("tool",) or "result of read_file" in str(last.get("content")):
        return text("It says: buy milk.")
    if schema_of(request) is not None:
        return constrained_call("read_file", {"path": "notes.md"})
    return text('<tool_call>{"name": "read_file", "arguments": {"path": "notes.md"}}</tool_call>')


def test_auto_turns_on_after_two_calls_written_as_text_and_says_so_once(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    asks = "what is in notes.md?\n" * 4
    with FakeLLM(writes_calls_as_text, flavour="llamacpp", context=8192) as llm:
        first = workspace.run(llm.base_url, asks)
        before = len(llm.requests)
        again = workspace.run(llm.base_url, "what is in notes.md?\n")
        steps, later = agent_requests(llm), llm.requests[before:]

    assert first.returncode == 0, first.stderr
    assert first.stdout.count("agent> It says: buy milk.") == 4
    line = "⚙ the model wrote its tool calls as text or malformed them 2 times in this thread"
    assert first.stdout.count(line) == 1
    # Two steps offered `tools` and read the calls from the text, and the answer of the
    # second turn too; from the next step on, each request asks for the schema instead.
    constrained = ["tools" not in r and schema_of(r) is not None for r in steps]
    assert constrained[:3] == [False, False, False] and all(constrained[3:])
    assert "(read from the model's text" in first.stdout
    # The thread remembers: after a restart its first request is constrained already.
    assert again.returncode == 0, again.stderr
    assert all(schema_of(r) is not None and "tools" not in r for r in later)
    assert "agent> It says: buy milk." in again.stdout


def test_auto_turns_on_when_lm_studio_lists_the_model_without_tool_use(workspace: Workspace):
    model = FakeModel("gemma-3-1b", tools=False)
    with FakeLLM(small_model, [model], flavour="lmstudio", context=4096) as llm:
        result = workspace.run(llm.base_url, f"{ASK}\nn\n")
        requests = llm.requests

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("⚙ LM Studio lists gemma-3-1b without tool use") == 1
    assert "its calls are constrained to a JSON schema" in result.stdout
    assert all("tools" not in r and schema_of(r) is not None for r in requests)
    assert "⚠ Approval needed" in result.stdout


def test_ollamas_refusal_of_tools_turns_the_schema_on_and_the_step_goes_on(workspace: Workspace):
    # ollama/ollama#6027: HTTP 400 {"error": {"message": "stablelm2:latest does not support
    # tools", "type": "api_error", ...}} from its /v1 endpoint.
    model = FakeModel("stablelm2:latest", tools=False)
    with FakeLLM(small_model, [model], flavour="ollama", context=4096) as llm:
        result = workspace.run(llm.base_url, f"{ASK}\nn\n")
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stderr
    assert "error:" not in result.stdout
    line = (
        "⚙ the server says the model has no tool support (stablelm2:latest does not support tools)"
    )
    assert result.stdout.count(line) == 1
    # One request was refused (the first, with `tools`); every later one has none.
    assert len(requests) == len(stats) + 1 and "tools" in requests[0]
    assert all("tools" not in r for r in requests[1:])
    assert "⚠ Approval needed" in result.stdout
    assert not (workspace.root / "notes.txt").exists()


def test_a_server_refusing_response_format_gets_one_line_and_the_step_goes_on(
    workspace: Workspace,
):
    with FakeLLM(small_model, flavour="llamacpp", context=4096, structured_output=False) as llm:
        result = workspace.run(llm.base_url, f"{ASK}\nhello\n", "--constrain-calls", "on")
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stderr
    line = (
        '⚠ the server refused response_format (response_format type must be one of "text" '
        'or "json_object", but got: json_schema): tool calls are not constrained on it'
    )
    assert result.stdout.count(line) == 1
    assert "error:" not in result.stdout
    # The refused request and nothing after it asks for a schema: the tools go as `tools`.
    assert len(requests) == len(stats) + 1 and schema_of(requests[0]) is not None
    assert all("response_format" not in r and r.get("tools") for r in requests[1:])
    assert result.stdout.count("agent> I will create notes.txt") == 2


def test_the_answer_streams_as_it_is_written_never_its_json(workspace: Workspace):
    script = [
        text("general"),
        text('{"answer": "Hello there, \\"friend\\": 你好 \\ud83d\\ude00."}'),
    ]

    async def scenario() -> list[tuple[str, dict]]:
        with FakeLLM(script, flavour="llamacpp", context=4096) as llm:
            async with serving(workspace, llm.base_url, constrain_calls="on") as served:
                return await served.say("t", "hi")

    events = asyncio.run(scenario())
    pieces = [data["text"] for kind, data in events if kind == "text"]
    said = 'Hello there, "friend": 你好 😀.'
    assert "".join(pieces) == said and len(pieces) > 1
    assert not any("{" in piece or '"answer"' in piece for piece in pieces)
    assert ("answer", {"text": said}) in events
    assert [kind for kind, _ in events].index("answer") > [k for k, _ in events].index("text")


def test_a_bad_value_of_the_variable_is_one_line(workspace: Workspace):
    result = workspace.run(
        "http://127.0.0.1:9/v1", "", env={"FSAGENT_CONSTRAIN_CALLS": "sometimes"}
    )
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "FSAGENT_CONSTRAIN_CALLS: 'sometimes' is not auto, on or off; set one of them or unset it"
    )
    assert "Traceback" not in result.stderr
