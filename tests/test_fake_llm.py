"""The fake LM Studio must satisfy the real client stack (langchain-openai -> openai -> httpx)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from fake_llm import FakeLLM, reply, text, tool_call

FAKE_LLM_SCRIPT = Path(__file__).with_name("fake_llm.py")


@tool
def write_file(path: str, content: str) -> str:
    """Write content to a file."""
    return "ok"


def chat(llm: FakeLLM, streaming: bool = True) -> ChatOpenAI:
    # No retries: a scripted error must surface at once, not be re-asked (and re-logged).
    return ChatOpenAI(
        base_url=llm.base_url,
        api_key="lm-studio",
        model="fake-model",
        streaming=streaming,
        max_retries=0,
        timeout=5,
    )


def ask(llm: FakeLLM, prompt: str = "hi", streaming: bool = True) -> AIMessage:
    # Sync on purpose: langchain-openai caches its async httpx client per base URL, so a second
    # asyncio.run() against the same fake would reuse a client bound to a closed event loop.
    # Async tests below therefore run all their calls inside one asyncio.run().
    return chat(llm, streaming).bind_tools([write_file]).invoke(prompt)


def http_get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_streamed_tool_call_parses_with_ainvoke() -> None:
    call = tool_call("write_file", {"path": "hello.txt", "content": "hi there"}, id="call_1")
    script = [reply(content="Writing it.", tool_calls=[call]), text("I wrote hello.txt")]

    async def two_turns(llm: FakeLLM) -> tuple[AIMessage, AIMessage]:
        model = chat(llm).bind_tools([write_file])
        return await model.ainvoke("write hello"), await model.ainvoke("and?")

    with FakeLLM(script) as llm:
        message, final = asyncio.run(two_turns(llm))
        assert llm.remaining == 0
    assert final.content == "I wrote hello.txt"
    assert message.content == "Writing it."
    assert message.tool_calls == [
        {
            "name": "write_file",
            "id": "call_1",
            "type": "tool_call",
            "args": {"path": "hello.txt", "content": "hi there"},
        }
    ]
    assert message.response_metadata["finish_reason"] == "tool_calls"


def test_astream_yields_several_chunks_and_usage() -> None:
    async def collect(llm: FakeLLM) -> list[AIMessageChunk]:
        return [c async for c in chat(llm).astream("hi", stream_usage=True)]

    with FakeLLM([text("a reply long enough to be split")]) as llm:
        chunks = asyncio.run(collect(llm))
        body = llm.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert sum(1 for c in chunks if c.content) >= 2
    merged = chunks[0]
    for c in chunks[1:]:
        merged += c
    assert merged.content == "a reply long enough to be split"
    assert merged.usage_metadata is not None and merged.usage_metadata["total_tokens"] > 0


def test_two_tool_calls_in_one_reply() -> None:
    calls = [
        tool_call("write_file", {"path": "a", "content": "1"}),
        tool_call("write_file", {"path": "b", "content": "2"}),
    ]
    with FakeLLM([reply(tool_calls=calls)]) as llm:
        message = ask(llm)
    assert [c["args"]["path"] for c in message.tool_calls] == ["a", "b"]
    assert [c["id"] for c in message.tool_calls] == [calls[0]["id"], calls[1]["id"]]
    assert calls[0]["id"] != calls[1]["id"]


def test_malformed_arguments_become_invalid_tool_calls() -> None:
    garbled = '{"path": a.txt}'
    truncated = '{"path": "a.txt", '
    script = [
        reply(tool_calls=[tool_call("write_file", garbled, id="c1")]),
        reply(tool_calls=[tool_call("write_file", truncated, id="c2")]),
        reply(tool_calls=[tool_call("write_file", truncated, id="c3")]),
    ]
    with FakeLLM(script) as llm:
        streamed_garbled = ask(llm)
        streamed_truncated = ask(llm)
        plain_truncated = ask(llm, streaming=False)
    assert streamed_garbled.tool_calls == []
    assert streamed_garbled.invalid_tool_calls[0]["args"] == garbled
    # Worth knowing: when streaming, langchain parses arguments with parse_partial_json, so a
    # truncated object is silently "repaired" into a valid call with the keys seen so far.
    assert streamed_truncated.tool_calls[0]["args"] == {"path": "a.txt"}
    assert plain_truncated.tool_calls == []
    assert plain_truncated.invalid_tool_calls[0]["id"] == "c3"


def test_non_streaming_reply() -> None:
    call = tool_call("write_file", {"path": "x", "content": "y"}, id="call_9")
    with FakeLLM([reply(tool_calls=[call]), text("done")]) as llm:
        first = ask(llm, streaming=False)
        second = ask(llm, streaming=False)
        assert "stream" not in llm.requests[0] or llm.requests[0]["stream"] is False
    assert first.tool_calls[0]["id"] == "call_9"
    assert first.tool_calls[0]["args"] == {"path": "x", "content": "y"}
    assert second.content == "done"
    assert second.usage_metadata is not None


def test_models_and_unknown_routes() -> None:
    with FakeLLM([], models=["fake-model", "other"]) as llm:
        listed = openai.OpenAI(base_url=llm.base_url, api_key="x").models.list()
        status, body = http_get(llm.base_url + "/nope")
    assert [m.id for m in listed] == ["fake-model", "other"]
    assert status == 404 and "error" in body


def test_auto_route_answers_tool_less_requests_without_a_step() -> None:
    script = [text("final answer")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        routed = chat(llm).invoke("which group?")
        assert llm.remaining == 1
        answered = ask(llm)
        assert len(llm.requests) == 2
        assert len(llm.requests_with_tools()) == 1
    assert routed.content == "filesystem"
    assert answered.content == "final answer"


def test_exhausted_script_raises_in_client() -> None:
    with FakeLLM([text("only one")]) as llm:
        ask(llm)
        with pytest.raises(openai.InternalServerError, match="script exhausted at request 2"):
            ask(llm)
        assert llm.exhausted == 1


def test_scripted_http_errors() -> None:
    with FakeLLM([reply(status=400, error="context too long"), reply(status=503)]) as llm:
        with pytest.raises(openai.BadRequestError, match="context too long"):
            ask(llm)
        with pytest.raises(openai.InternalServerError, match="503"):
            ask(llm)


@pytest.mark.parametrize("streaming", [True, False])
def test_dropped_connection_raises_instead_of_hanging(streaming: bool) -> None:
    script = [reply(content="partial answer", drop_after=2)]
    with FakeLLM(script) as llm, pytest.raises(openai.APIConnectionError):
        ask(llm, streaming=streaming)


def test_delay_slows_the_stream() -> None:
    with FakeLLM([reply(content="slow text", delay=0.05)]) as llm:
        message = ask(llm)
    assert message.content == "slow text"


def test_request_log_has_what_the_client_sent() -> None:
    with FakeLLM([text("ok")]) as llm:
        ask(llm, prompt="please write hello.txt")
        (body,) = llm.requests
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "user", "content": "please write hello.txt"}]
    assert [t["function"]["name"] for t in body["tools"]] == ["write_file"]


def test_callable_script_and_callable_steps() -> None:
    def echo(request: dict[str, Any]) -> dict[str, Any]:
        return text(f"you said {request['messages'][-1]['content']}")

    with FakeLLM(echo) as llm:
        assert [ask(llm, p).content for p in ("a", "b", "c")] == [
            "you said a",
            "you said b",
            "you said c",
        ]
        assert llm.remaining == 0 and llm.exhausted == 0
    with FakeLLM([echo, text("fixed")]) as llm:
        assert ask(llm, "x").content == "you said x"
        assert ask(llm, "y").content == "fixed"


def test_concurrent_requests_each_consume_one_step() -> None:
    script = [text(str(i)) for i in range(20)]
    answers: list[str] = []

    def worker(llm: FakeLLM) -> None:
        answers.append(str(chat(llm, streaming=False).invoke("hi").content))

    with FakeLLM(script) as llm:
        threads = [threading.Thread(target=worker, args=(llm,)) for _ in script]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert llm.remaining == 0 and len(llm.requests) == 20
    assert sorted(answers, key=int) == [str(i) for i in range(20)]


def test_runs_as_its_own_process(tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    log_file = tmp_path / "requests.jsonl"
    steps = [
        reply(tool_calls=[tool_call("write_file", {"path": "p", "content": "c"}, id="k1")]),
        {"content": "from a file"},
    ]  # hand-written steps may leave keys out
    script_file.write_text(json.dumps(steps))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(FAKE_LLM_SCRIPT),
            "--script",
            str(script_file),
            "--port",
            "0",
            "--auto-route",
            "filesystem",
            "--log",
            str(log_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready[0] == "ready" and ready[1].startswith("http://127.0.0.1:")
        model = ChatOpenAI(
            base_url=ready[1],
            api_key="lm-studio",
            model="fake-model",
            streaming=True,
            max_retries=0,
            timeout=5,
        )
        assert model.invoke("route?").content == "filesystem"
        first = model.bind_tools([write_file]).invoke("go")
        second = model.bind_tools([write_file]).invoke("go on")
    finally:
        proc.kill()
        proc.wait(timeout=5)
    assert first.tool_calls[0]["id"] == "k1"
    assert second.content == "from a file"
    logged = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [b["messages"][-1]["content"] for b in logged] == ["route?", "go", "go on"]
