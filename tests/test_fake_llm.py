"""The fake LM Studio must satisfy the real client stack (langchain-openai -> openai -> httpx)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from fake_llm import (
    FakeLLM,
    FakeModel,
    parse_model,
    render_prompt,
    reply,
    text,
    tokenize,
    tool_call,
)

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


# -- flavours, contexts, tokens and the prompt cache ---------------------------------------


def sse_events(url: str, body: dict[str, Any]) -> tuple[int, list[tuple[str | None, Any]]]:
    """POST a streamed request; its status and (event, data) pairs, without any client's help."""
    events: list[tuple[str | None, Any]] = []
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=5) as response:
        event: str | None = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = line.removeprefix("data: ")
                events.append((event, data if data == "[DONE]" else json.loads(data)))
                event = None
        return response.status_code, events


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = httpx.post(url + "/chat/completions", json=body, timeout=5)
    return response.status_code, response.json()


def chat_body(prompt: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "fake-model", "messages": [{"role": "user", "content": prompt}], **extra}


CATALOGUE = [
    FakeModel("text-embedding-nomic-embed-text-v1.5", type="embeddings", max_context=2048),
    FakeModel("qwen2.5-7b-instruct", state="not-loaded", context=8192, max_context=32768),
    FakeModel("llama-3.2-3b-instruct", context=4096, max_context=131072),
]


def test_tokenizer_is_deterministic_lossless_and_stable_under_extension() -> None:
    prompt = 'Read {"path": "notes/todo.md"} and tell me  what it says.\n'
    tokens = tokenize(prompt)
    assert "".join(tokens) == prompt
    assert tokens == tokenize(prompt)
    assert tokenize("extraordinary") == ["extr", "aord", "inar", "y"]
    longer = tokenize(prompt + "Then write a summary.")
    assert longer[: len(tokens) - 1] == tokens[:-1]  # at most the last token changes


def test_prompt_rendering_puts_tools_first_then_each_message() -> None:
    request = {
        "tools": [{"type": "function", "function": {"name": "read_file"}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        ],
    }
    rendered = render_prompt(request)
    assert rendered.startswith("<|tools|>\n")
    order = [rendered.index(s) for s in ("Be brief.", "hi", "<tool_call>", "file text")]
    assert order == sorted(order)
    assert rendered.endswith("<|assistant|>\n")
    assert FakeLLM([]).prompt_tokens(request) == len(tokenize(rendered))


def test_lmstudio_native_model_lists() -> None:
    with FakeLLM([], models=CATALOGUE, flavour="lmstudio") as llm:
        root = llm.base_url.removesuffix("/v1")
        _, openai_list = http_get(llm.base_url + "/models")
        _, v0 = http_get(root + "/api/v0/models")
        status_one, one = http_get(root + "/api/v0/models/llama-3.2-3b-instruct")
        status_none, _ = http_get(root + "/api/v0/models/nope")
        _, v1 = http_get(root + "/api/v1/models")
        status_unknown, unknown = http_get(root + "/props")
    # Like LM Studio: every downloaded model, the embedding one first as it happens to be.
    assert [m["id"] for m in openai_list["data"]] == [m.id for m in CATALOGUE]
    entries = {m["id"]: m for m in v0["data"]}
    assert entries["text-embedding-nomic-embed-text-v1.5"]["type"] == "embeddings"
    assert entries["qwen2.5-7b-instruct"]["state"] == "not-loaded"
    assert "loaded_context_length" not in entries["qwen2.5-7b-instruct"]
    assert entries["llama-3.2-3b-instruct"]["state"] == "loaded"
    assert entries["llama-3.2-3b-instruct"]["loaded_context_length"] == 4096
    assert entries["llama-3.2-3b-instruct"]["max_context_length"] == 131072
    assert status_one == 200 and one == entries["llama-3.2-3b-instruct"]
    assert status_none == 404
    keys = {m["key"]: m for m in v1["models"]}
    assert keys["text-embedding-nomic-embed-text-v1.5"]["type"] == "embedding"
    assert keys["qwen2.5-7b-instruct"]["loaded_instances"] == []
    loaded = keys["llama-3.2-3b-instruct"]["loaded_instances"]
    assert loaded[0]["config"]["context_length"] == 4096
    # LM Studio answers a path it does not serve with 200 and an error body.
    assert status_unknown == 200
    assert unknown == {"error": "Unexpected endpoint or method. (GET /props)"}


def test_lmstudio_loads_a_requested_model_on_first_use() -> None:
    with FakeLLM([text("hello")], models=CATALOGUE, flavour="lmstudio") as llm:
        assert not llm.is_loaded("qwen2.5-7b-instruct")
        status, _ = post(llm.base_url, chat_body(model="qwen2.5-7b-instruct"))
        assert status == 200
        assert llm.is_loaded("qwen2.5-7b-instruct")
        assert llm.context_of("qwen2.5-7b-instruct") == 8192


def test_llamacpp_props_and_model_meta() -> None:
    models = [FakeModel("qwen3-4b", max_context=40960)]
    with FakeLLM([], models=models, flavour="llamacpp", context=2048) as llm:
        root = llm.base_url.removesuffix("/v1")
        _, props = http_get(root + "/props")
        _, listed = http_get(llm.base_url + "/models")
        status_native, native = http_get(root + "/api/v0/models")
    assert props["default_generation_settings"]["n_ctx"] == 2048
    assert props["total_slots"] == 1
    (entry,) = listed["data"]
    assert entry["id"] == "qwen3-4b" and entry["owned_by"] == "llamacpp"
    assert entry["meta"]["n_ctx_train"] == 40960
    assert status_native == 404 and native["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("stream", [False, True])
def test_llamacpp_refuses_a_prompt_over_its_context(stream: bool) -> None:
    long_prompt = "please read every file " * 60
    with FakeLLM([text("never sent")], flavour="llamacpp", context=128) as llm:
        status, body = post(llm.base_url, chat_body(long_prompt, stream=stream))
        tokens = llm.prompt_tokens(llm.requests[0])
        assert llm.remaining == 1  # a refused request consumes no step
        assert llm.cache_stats == []
    assert status == 400
    assert body == {
        "error": {
            "code": 400,
            "message": f"request ({tokens} tokens) exceeds the available context size "
            "(128 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": 128,
        }
    }


def test_lmstudio_refuses_in_its_own_words_and_inside_a_stream() -> None:
    long_prompt = "please read every file " * 60
    with FakeLLM([], flavour="lmstudio", context=128) as llm:
        status, body = post(llm.base_url, chat_body(long_prompt))
        stream_status, events = sse_events(llm.base_url, chat_body(long_prompt, stream=True))
        # The stream's one error frame is an error object, which openai-python reads.
        with pytest.raises(openai.APIError, match=r"n_keep: \d+>= n_ctx: 128"):
            chat(llm).invoke(long_prompt)
    # The 400 body is a plain string, as users quote it (Gitlawb/openclaude#353).
    assert status == 400
    assert isinstance(body["error"], str)
    assert "greater than the context length (n_keep: " in body["error"]
    assert stream_status == 200
    assert events == [("error", {"error": {"message": body["error"]}})]


def test_openai_flavour_refuses_with_context_length_exceeded() -> None:
    with FakeLLM([], context=64) as llm, pytest.raises(openai.BadRequestError) as caught:
        chat(llm, streaming=False).invoke("a long request " * 40)
    assert caught.value.code == "context_length_exceeded"


def test_a_prompt_just_under_the_context_is_answered() -> None:
    body = chat_body("hello there")
    tokens = FakeLLM([]).prompt_tokens(body)
    script = [text("fits nicely"), text("no room")]
    with FakeLLM(script, flavour="llamacpp", context=tokens + 1) as llm:
        status, answer = post(llm.base_url, body)
        refused, _ = post(llm.base_url, chat_body("hello there, and more"))
    assert status == 200
    # The prompt fits, but only one token of the reply does: the server stops there.
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 1
    assert refused == 400


def test_usage_comes_from_the_same_tokenizer() -> None:
    reply_text = "The file says: buy milk, call Ann."
    with FakeLLM([text(reply_text)], flavour="llamacpp") as llm:
        status, body = post(llm.base_url, chat_body("what does todo.md say?"))
        prompt = llm.prompt_tokens(llm.requests[0])
    assert status == 200
    assert body["usage"]["prompt_tokens"] == prompt
    assert body["usage"]["completion_tokens"] == len(tokenize(reply_text))
    assert body["usage"]["total_tokens"] == prompt + len(tokenize(reply_text))
    assert body["timings"]["prompt_n"] + body["timings"]["cache_n"] == prompt
    assert body["timings"]["predicted_n"] == len(tokenize(reply_text))


@pytest.mark.parametrize("flavour", ["openai", "lmstudio", "llamacpp"])
def test_stream_usage_only_when_asked_and_llamacpp_timings_on_the_last_chunk(
    flavour: str,
) -> None:
    with FakeLLM([text("one"), text("two")], flavour=flavour) as llm:
        _, plain = sse_events(llm.base_url, chat_body(stream=True))
        asked = chat_body(stream=True, stream_options={"include_usage": True})
        _, with_usage = sse_events(llm.base_url, asked)
    assert plain[-1] == (None, "[DONE]") and with_usage[-1] == (None, "[DONE]")
    assert not any("usage" in data for _, data in plain[:-1])
    last = with_usage[-2][1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 1
    assert with_usage[-3][1]["choices"][0]["finish_reason"] == "stop"
    if flavour == "llamacpp":
        assert "timings" in plain[-2][1] and "timings" in last
        details = last["usage"]["prompt_tokens_details"]
        assert details["cached_tokens"] == last["timings"]["cache_n"] > 0
    else:
        assert not any("timings" in data for _, data in with_usage[:-1])


def test_max_tokens_cuts_the_reply_with_finish_reason_length() -> None:
    long_reply = "one two six ten cat dog red sun sky sea"
    script = [text(long_reply), text(long_reply), text(long_reply)]
    with FakeLLM(script) as llm:
        _, cut = post(llm.base_url, chat_body(max_tokens=4))
        _, cut_new = post(llm.base_url, chat_body(max_completion_tokens=3))
        model = ChatOpenAI(
            base_url=llm.base_url, api_key="x", model="fake-model", max_tokens=5, max_retries=0
        )
        streamed = model.invoke("hi")
    assert cut["choices"][0]["message"]["content"] == " ".join(long_reply.split()[:4])
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] == 4
    assert cut_new["choices"][0]["message"]["content"] == "one two six"
    assert streamed.content == "one two six ten cat"
    assert streamed.response_metadata["finish_reason"] == "length"


def test_a_looping_reply_repeats_until_max_tokens_or_the_context() -> None:
    sentence = "I will read the file. "
    script = [reply(loop=sentence), reply(loop=sentence)]
    with FakeLLM(script, flavour="llamacpp", context=400) as llm:
        _, capped = post(llm.base_url, chat_body(max_tokens=50))
        _, filled = post(llm.base_url, chat_body())
        prompt = llm.prompt_tokens(llm.requests[1])
    content = capped["choices"][0]["message"]["content"]
    assert content.startswith(sentence * 5)
    assert len(tokenize(content)) == 50 and capped["choices"][0]["finish_reason"] == "length"
    # No max_tokens: it runs on until the context is full, as llama.cpp stops it there.
    assert filled["usage"]["completion_tokens"] == 400 - prompt
    assert filled["choices"][0]["finish_reason"] == "length"


def test_reasoning_streams_before_the_content() -> None:
    script = [
        reply("The answer is 4.", reasoning="2 and 2 make 4."),
        reply("Fine.", reasoning="Short."),
        text("<think>hidden thoughts</think>Visible."),
    ]
    with FakeLLM(script, flavour="llamacpp") as llm:
        _, events = sse_events(llm.base_url, chat_body(stream=True))
        _, body = post(llm.base_url, chat_body())
        inline = chat(llm).invoke("and?")
    deltas = [data["choices"][0]["delta"] for _, data in events[:-1] if data["choices"]]
    thinking = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    said = [d["content"] for d in deltas if d.get("content")]
    assert "".join(thinking) == "2 and 2 make 4." and "".join(said) == "The answer is 4."
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning_content" not in d for d in deltas[first_content:])
    assert body["choices"][0]["message"]["reasoning_content"] == "Short."
    assert body["choices"][0]["message"]["content"] == "Fine."
    # Thinking inside the content is just content to the server and to ChatOpenAI.
    assert inline.content == "<think>hidden thoughts</think>Visible."


def test_prompt_cache_counts_the_shared_prefix_and_a_route_switch_loses_it() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    other_tools = [{"type": "function", "function": {"name": "write_file", "parameters": {}}}]
    first = {"messages": [{"role": "user", "content": "read a.txt"}], "tools": tools}
    answer = "It says hello."
    second = {
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "and b.txt?"},
        ],
        "tools": tools,
    }
    switched = {**second, "tools": other_tools}
    with FakeLLM([text(answer), text("ok"), text("ok")], flavour="llamacpp") as llm:
        _, one = post(llm.base_url, first)
        _, two = post(llm.base_url, second)
        _, three = post(llm.base_url, switched)
        stats = llm.cache_stats
    assert [s.prompt_tokens for s in stats] == [
        llm.prompt_tokens(r) for r in (first, second, switched)
    ]
    assert stats[0].cached == 0
    # The second request repeats the first and its reply byte for byte: only the new turn
    # (and a boundary token) is processed.
    new_turn = len(tokenize("<|user|>\nand b.txt?<|end|>\n<|assistant|>\n"))
    assert stats[1].processed <= new_turn + 1 and stats[1].cached > stats[0].prompt_tokens
    assert two["timings"]["cache_n"] == stats[1].cached
    assert two["timings"]["prompt_n"] == stats[1].processed
    assert two["usage"]["prompt_tokens_details"]["cached_tokens"] == stats[1].cached
    # Other tools come before the conversation: nothing of the conversation is reused.
    tools_block = len(tokenize(render_prompt({"tools": tools}))) - 2
    assert stats[2].cached < tools_block
    assert three["timings"]["prompt_n"] == stats[2].processed
    assert one["timings"]["cache_n"] == 0


def test_cached_tokens_reach_langchain_usage_metadata() -> None:
    with FakeLLM([text("a"), text("b")], flavour="llamacpp") as llm:
        model = chat(llm, streaming=False)
        model.invoke("hello")
        second = model.invoke([("user", "hello"), ("assistant", "a"), ("user", "again")])
        cached = llm.cache_stats[1].cached
    assert cached > 0
    assert second.usage_metadata is not None
    assert second.usage_metadata["input_token_details"]["cache_read"] == cached


def test_slots_keep_separate_caches() -> None:
    a = chat_body("a conversation about apples and pears")
    b = chat_body("quite another about boats and trains")
    with FakeLLM([text("x")] * 4, flavour="llamacpp", slots=2) as llm:
        for body in (a, b, a, b):
            post(llm.base_url, body)
        stats = llm.cache_stats
    assert stats[2].cached > 0 and stats[3].cached > 0


@contextmanager
def stand_in_process(tmp_path: Path, *switches: str) -> Iterator[str]:
    """The stand-in as its own process, as a person starts it by hand: its base URL."""
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps([{"content": "hi"}]))
    command = [sys.executable, str(FAKE_LLM_SCRIPT), "--script", str(script_file), *switches]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split()[1]  # "ready http://127.0.0.1:PORT/v1"
    finally:
        proc.kill()
        proc.wait(timeout=5)


def test_runs_as_its_own_process_with_a_flavour_and_a_context(tmp_path: Path) -> None:
    switches = ("--flavour", "lmstudio", "--context", "64")
    models = ("--model", "nomic-embed:embeddings", "--model", "small-llm::loaded:2048")
    with stand_in_process(tmp_path, *switches, *models) as base_url:
        _, listed = http_get(base_url.removesuffix("/v1") + "/api/v0/models")
        status, _ = post(
            base_url, {"model": "small-llm", "messages": [{"role": "user", "content": "x " * 100}]}
        )
        refused, _ = post(
            base_url,
            {"model": "nomic-embed", "messages": [{"role": "user", "content": "x " * 100}]},
        )
    assert [(m["id"], m["type"]) for m in listed["data"]] == [
        ("nomic-embed", "embeddings"),
        ("small-llm", "llm"),
    ]
    assert listed["data"][1]["loaded_context_length"] == 2048
    assert status == 200 and refused == 400


def test_runs_as_its_own_process_with_lm_studios_wordings(tmp_path: Path) -> None:
    # The switches a person uses to try fsagent against LM Studio's overflow answers by hand:
    # 0.3.x's 400 with a plain-string error (opencode and dyad users quote "Trying to keep the
    # first 14538 tokens when context the overflows"), not 0.4.2x's 200 stream.
    switches = ("--flavour", "lmstudio", "--context", "64", "--lmstudio-wording", "keep-first")
    with stand_in_process(tmp_path, *switches, "--no-stream-errors") as base_url:
        body = {"model": "fake-model", "stream": True}
        status, answer = post(
            base_url, body | {"messages": [{"role": "user", "content": "x " * 100}]}
        )
    assert status == 400
    assert isinstance(answer["error"], str)
    assert answer["error"].startswith("Trying to keep the first ")
    assert "when context the overflows" in answer["error"]


def test_parse_model_spec() -> None:
    assert parse_model("m") == FakeModel("m")
    assert parse_model("m:vlm:not-loaded:4096") == FakeModel(
        "m", type="vlm", state="not-loaded", context=4096
    )
