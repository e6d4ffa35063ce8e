"""The real CLI against the stand-in speaking what real model servers send: their error
bodies, tool calls written as text, reasoning without an opening tag, and the router's
bounded request. Each case cites the public thread its wording and shape come from
(docs/model-servers.md has the table)."""

from __future__ import annotations

import json

import pytest

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text


def test_a_servers_own_reason_for_a_500_is_shown_on_one_line(workspace: Workspace):
    # LM Studio answers a crashed model with HTTP 500 and `{"error": "<a plain string>"}`,
    # the shape of its 400s (Gitlawb/openclaude#353); openai-python's exception text is then
    # only "Error code: 500" (openai/_base_client.py, _make_status_error_from_response).
    crash = reply(status=500, error="Model crashed unexpectedly.\nExit code: 6")
    with FakeLLM([text("general"), crash], flavour="lmstudio") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        url = llm.base_url

    lines = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: LM Studio at {url} answered 500: Model crashed unexpectedly. Exit code: 6"
    ]
    assert "Error code: 500" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_llama_cpps_reason_is_shown_too(workspace: Workspace):
    # llama-server's error object: {"error": {"code": 500, "message": ..., "type": ...}}
    # (tools/server/utils.hpp, format_error_response).
    failing = reply(status=500, error="failed to decode the batch")
    with FakeLLM([text("general"), failing], flavour="llamacpp") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        url = llm.base_url

    assert f"error: llama.cpp at {url} answered 500: failed to decode the batch" in (result.stdout)


# -- tool calls written as text ----------------------------------------------------------------

WRITE = {"path": "hello.txt", "content": "hello"}

TEXT_CALLS = {
    # Qwen3 through LM Studio when its parser misses the call: the content is exactly
    # `<think>\n\n</think>\n\n<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
    # (lmstudio-ai/lmstudio-bug-tracker#825, qwen/qwen3-4b).
    "tagged": "<think>\n\n</think>\n\n<tool_call>\n"
    + json.dumps({"name": "write_file", "arguments": WRITE})
    + "\n</tool_call>",
    # Llama 3.1/3.2's own template asks for a bare {"name", "parameters"} object
    # (raullenchai/Rapid-MLX#700: `{"name": "web_search", "parameters": {...}}` as content).
    "bare": json.dumps({"name": "write_file", "parameters": WRITE}),
    # llama3.2:3b through Ollama wraps it in a fenced json block (ollama/ollama#13519).
    "fenced": "```json\n" + json.dumps({"name": "write_file", "parameters": WRITE}) + "\n```",
}


def events_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("form", TEXT_CALLS)
def test_a_call_written_as_text_is_reviewed_and_runs_after_approval(
    workspace: Workspace, form: str
):
    transcript = workspace.root.parent / "t.jsonl"
    script = [text(TEXT_CALLS[form]), text("Created hello.txt.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(
            llm.base_url, "create hello.txt\ny\n", "--transcript", str(transcript)
        )
        requests = llm.requests_with_tools()

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert "⚠ Approval needed. The agent wants to run:" in result.stdout
    assert "→ write_file(path='hello.txt', content='hello')  (read from the model's text" in (
        result.stdout
    )
    assert "agent> Created hello.txt." in result.stdout
    # The raw text is not shown as the answer.
    assert '"name": "write_file"' not in result.stdout
    assert "<tool_call>" not in result.stdout
    # The call is answered with a tool message, and sent back as a real call.
    [answer] = tool_messages(requests[1])
    assert '"new_sha256"' in answer["content"]
    [assistant] = [m for m in requests[1]["messages"] if m.get("tool_calls")]
    assert assistant["tool_calls"][0]["function"]["name"] == "write_file"
    assert "<tool_call>" not in (assistant.get("content") or "")
    # The transcript says the call was read from text, and counts it.
    [called] = [e for e in events_of(transcript) if e["event"] == "tool_call"]
    assert called["from_text"] and called["text_calls"] == 1


def test_json_in_the_middle_of_prose_is_left_alone(workspace: Workspace):
    prose = (
        'A call looks like {"name": "write_file", "arguments": {"path": "x.txt"}} in the '
        "docs; I did not make one."
    )
    with FakeLLM([text(prose)], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "how does a call look?\n")
        asked = len(llm.requests_with_tools())

    assert result.returncode == 0, result.stderr
    assert f"agent> {prose}" in result.stdout
    assert "Approval needed" not in result.stdout
    assert asked == 1
    assert not (workspace.root / "x.txt").exists()


def test_a_text_call_naming_a_tool_we_did_not_offer_is_left_as_text(workspace: Workspace):
    said = '{"name": "launch_rockets", "parameters": {"count": 3}}'
    with FakeLLM([text(said)], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "go\n")

    assert f"agent> {said}" in result.stdout
    assert "Approval needed" not in result.stdout


def test_no_text_calls_shows_the_text_and_runs_nothing(workspace: Workspace):
    with FakeLLM([text(TEXT_CALLS["tagged"])], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "create hello.txt\ny\n", "--no-text-calls")

    assert result.returncode == 0, result.stderr
    assert "<tool_call>" in result.stdout
    assert "Approval needed" not in result.stdout
    assert not (workspace.root / "hello.txt").exists()


# -- reasoning with no opening tag ---------------------------------------------------------------

# DeepSeek-R1 distills and Qwen3 "Thinking-2507" open the think block in their chat template,
# so the reply holds only `</think>` (Qwen's docs, quoted in
# Cerebras/cerebras-cloud-sdk-python#10; vllm-project/vllm#31045 shows the raw content).
BARE_THINK = [
    text("general"),
    text("Okay, the user greets me. I should greet them back.\n</think>\n\nHello there."),
    text("general"),
    text("They say thanks. A short reply.</think>You're welcome."),
]


def test_a_bare_close_think_is_hidden_with_hide_reasoning(workspace: Workspace):
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(BARE_THINK) as llm:
        result = workspace.run(
            llm.base_url, "hi\nthanks\n", "--hide-reasoning", "--transcript", str(transcript)
        )
        sent = json.dumps(llm.requests)

    assert result.returncode == 0, result.stderr
    assert "agent> Hello there." in result.stdout
    assert "agent> You're welcome." in result.stdout
    assert "greet them back" not in result.stdout and "A short reply" not in result.stdout
    assert "</think>" not in result.stdout
    answers = [e["text"] for e in events_of(transcript) if e["event"] == "answer"]
    assert answers == ["Hello there.", "You're welcome."]
    # The stored message is the answer only: later requests never send the reasoning back.
    assert "greet them back" not in sent


def test_a_bare_close_think_is_shown_apart_from_the_answer(workspace: Workspace):
    with FakeLLM(BARE_THINK) as llm:
        result = workspace.run(llm.base_url, "hi\nthanks\n")

    out = result.stdout
    assert result.returncode == 0, result.stderr
    thought = out.find("thinking> Okay, the user greets me.")
    assert 0 <= thought < out.find("agent> Hello there.")
    assert "agent> Okay" not in out and "</think>" not in out
    assert 0 <= out.find("thinking> They say thanks.") < out.find("agent> You're welcome.")


# A model whose replies came plain (LM Studio parsed its thinking apart, or it wrote none)
# and then one that holds a bare `</think>`: the parser missed it, or a call written as text
# came first, which says nothing of the tags.
LATER_BARE_CLOSE = {
    "plain": (
        [
            text("general"),
            text("Hello! How can I help?"),
            text("general"),
            text("They say thanks. A short reply.</think>You're welcome."),
        ],
        "hi\nthanks\n",
        "You're welcome.",
    ),
    "call": (
        [
            text("filesystem"),
            text(TEXT_CALLS["bare"]),
            text("I wrote the file; say so. A short reply.</think>Done: hello.txt is written."),
        ],
        "create hello.txt\ny\n",
        "Done: hello.txt is written.",
    ),
}


@pytest.mark.parametrize("case", LATER_BARE_CLOSE)
def test_a_later_bare_close_think_is_hidden_in_a_pipe_as_it_is_stored(
    workspace: Workspace, case: str
):
    script, typed, answer = LATER_BARE_CLOSE[case]
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(script) as llm:
        result = workspace.run(
            llm.base_url, typed, "--hide-reasoning", "--transcript", str(transcript)
        )
        shown = workspace.run(llm.base_url, "", "threads", "show", "t", thread=None)

    assert result.returncode == 0, result.stderr
    assert "A short reply" not in result.stdout and "</think>" not in result.stdout
    answers = [e["text"] for e in events_of(transcript) if e["event"] == "answer"]
    assert answers[-1] == answer
    # What the pipe printed is what the thread stores.
    assert f"agent> {answer}" in result.stdout and f"agent> {answer}" in shown.stdout


# -- the router's one word -----------------------------------------------------------------------


def test_the_router_asks_for_a_handful_of_tokens_and_reads_a_cut_reply(workspace: Workspace):
    # A small model answers the router's question at length; the stand-in cuts it at the
    # request's max_tokens with finish_reason "length", as llama.cpp and LM Studio do.
    chatty = text(
        "filesystem, because the person names a file and wants it written down now, and "
        "then I will explain at length why each of the other kinds does not fit this case"
    )
    with FakeLLM([chatty, text("Done.")], flavour="llamacpp", context=4096) as llm:
        result = workspace.run(llm.base_url, "note this in todo.md\n")
        router, agent = llm.requests

    assert result.returncode == 0, result.stderr
    assert router["max_tokens"] == 32
    assert agent["max_tokens"] == 512  # the agent's own limit: an eighth of 4096
    assert "⇢ route: filesystem" in result.stdout
    assert "agent> Done." in result.stdout


# -- Ollama ---------------------------------------------------------------------------------------


def test_ollama_is_detected_and_its_loaded_context_budgets_every_request(workspace: Workspace):
    # Ollama cuts an over-long prompt silently and answers 200 (ollama/ollama#3839; #17427
    # measured what is kept: num_ctx/2 + 2 tokens), so no overflow answer will ever come:
    # the budget must know the context. /api/ps says the allocated context_length of each
    # loaded model (docs.ollama.com/api/ps). Ollama's docs give its URL without /v1.
    from test_long_threads import prompts, write_notes

    from local_model import LocalModel

    write_notes(workspace.root, 12)
    model = LocalModel()
    with FakeLLM(model, models=["qwen3:4b"], flavour="ollama", context=4096) as llm:
        bare = llm.base_url.removesuffix("/v1")
        result = workspace.run(bare, prompts(range(12)), "--verbose", timeout=600)
        requests, stats, truncated = llm.requests, llm.cache_stats, llm.truncated

    assert result.returncode == 0, result.stderr
    assert "model qwen3:4b, context 4096 (from Ollama /api/ps)" in result.stdout
    answers = [line for line in result.stdout.splitlines() if line.startswith("agent> ")]
    assert answers == [f"agent> Read note{n:02}.md." for n in range(12)]
    assert truncated == []  # nothing was ever cut by the server
    for request, stat in zip(requests, stats, strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096
    assert "⇣ compacted" in result.stdout


def test_ollama_model_not_loaded_is_budgeted_to_its_modelfile_num_ctx(workspace: Workspace):
    # /api/show's "parameters" holds the Modelfile's `num_ctx N` when it sets one.
    from fake_llm import FakeModel

    models = [FakeModel("llama3.2:3b", state="not-loaded", context=8192)]
    with FakeLLM([text("general"), text("Hi.")], models=models, flavour="ollama") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--verbose")

    assert result.returncode == 0, result.stderr
    assert "model llama3.2:3b, context 8192 (from Ollama /api/show num_ctx)" in result.stdout
    assert "agent> Hi." in result.stdout
