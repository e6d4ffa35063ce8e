"""Requests budgeted by the server's count, not only ours (core.context.counts): the real
CLI against the stand-in (tests/fake_llm.py) counting CJK text at a token a character, three
times fsagent's estimate of characters / 3, as real tokenizers count it."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from conftest import Workspace
from fake_llm import FakeLLM, FakeModel, reply, text, tool_call
from local_model import request_kind

HANZI = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出要于就下得可你年生自"


def chinese(chars: int, seed: int) -> str:
    pick = random.Random(seed).choice
    return "".join(pick(HANZI) + ("。\n" if n % 40 == 39 else "") for n in range(chars))


def reader(request: dict[str, Any]) -> dict[str, Any]:
    """Reads the file the person names, then says how long it was."""
    kind = request_kind(request)
    if kind == "router":
        return text("filesystem")
    if kind == "summary":
        return text("Summary: the person asked to read a file.")
    last = request["messages"][-1]
    if last["role"] == "user":
        named = re.findall(r"[\w-]+\.md", last["content"])
        if named:
            return reply(tool_calls=[tool_call("read_file", {"path": named[0]})])
        return text("Hello.")
    return text("Read it.")


def errors(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    "server",
    [
        # LM Studio 0.3.x-0.4.x: HTTP 400, `(n_keep: N>= n_ctx: 4096)` (openclaude#353).
        {"lmstudio_wording": "n_keep", "stream_errors": False},
        # LM Studio 0.4.2x: HTTP 200, one `event: error`: "The input has N tokens" (#2322).
        {"lmstudio_wording": "does-not-fit", "stream_errors": True},
    ],
    ids=["lmstudio-400-n_keep", "lmstudio-stream-input-has"],
)
def test_a_server_counting_more_than_we_estimate_is_cut_by_its_count_and_sent_again(
    workspace: Workspace, server: dict[str, Any]
):
    # 3,400 CJK characters: ~1,130 tokens by characters / 3, 3,400 by the server's count,
    # which with the fixed part is past LM Studio's 4096.
    (workspace.root / "long.md").write_text(chinese(3400, 1))
    name = "qwen2.5-7b-instruct"
    with FakeLLM(reader, [FakeModel(name)], flavour="lmstudio", context=4096, **server) as llm:
        result = workspace.run(llm.base_url, "read long.md\nhello\n")
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stdout + result.stderr
    assert errors(result.stdout) == []
    assert "agent> Read it." in result.stdout and "agent> Hello." in result.stdout
    # Refused once, learnt from the server's count, and sent again cut to fit.
    refused = [r for r in requests if llm.prompt_tokens(r) >= 4096]
    assert len(refused) == 1 == len(requests) - len(stats)
    again = requests[requests.index(refused[0]) + 1]
    result_sent = again["messages"][-1]["content"]
    assert "more characters of this result were left out" in result_sent
    assert llm.prompt_tokens(again) + again["max_tokens"] <= 4096
    # And the thread goes on within the context, by the server's count.
    for request, stat in zip(
        requests[requests.index(again) :], stats[requests.index(again) - 1 :], strict=True
    ):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096


def test_llama_cpp_counts_a_large_result_before_it_is_sent(workspace: Workspace):
    (workspace.root / "long.md").write_text(chinese(3400, 2))
    with FakeLLM(reader, flavour="llamacpp", context=4096) as llm:
        result = workspace.run(llm.base_url, "read long.md\n")
        requests, stats, counted = llm.requests, llm.cache_stats, llm.tokenized

    assert result.returncode == 0, result.stdout + result.stderr
    assert "agent> Read it." in result.stdout
    # Counted with /tokenize, cut to the room it really takes: nothing was refused.
    assert counted == [(workspace.root / "long.md").read_text()]
    assert len(requests) == len(stats)
    for request, stat in zip(requests, stats, strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096
    assert "more characters of this result were left out" in requests[-1]["messages"][-1]["content"]


def test_a_message_that_truly_cannot_fit_is_said_once_and_the_thread_goes_on(
    workspace: Workspace,
):
    # 5,000 CJK characters: ~1,700 tokens by our estimate, which a 4096 context would hold;
    # 5,000 by the server's, which it cannot hold whatever is cut or summarised.
    huge = chinese(5000, 3).replace("\n", "")
    name = "qwen2.5-7b-instruct"
    with FakeLLM(
        reader, [FakeModel(name)], flavour="lmstudio", context=4096, stream_errors=False
    ) as llm:
        result = workspace.run(llm.base_url, f"{huge}\nhello\nhello again\n")
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 1  # a turn failed
    [line] = errors(result.stdout)
    counted = int(re.search(r"the server counted ([\d,]+) tokens", line)[1].replace(",", ""))  # type: ignore[index]
    holds = int(re.search(r"more than the ([\d,]+) a request may hold", line)[1].replace(",", ""))  # type: ignore[index]
    assert counted >= 4096 > holds
    assert result.stdout.count("agent> Hello.") == 2
    # The refused message was sent once more at most, cut by nothing (it is the person's).
    assert len(requests) - len(stats) <= 2
    for _request, stat in zip(
        [r for r in requests if llm.prompt_tokens(r) < 4096], stats, strict=True
    ):
        assert stat.prompt_tokens <= 4096
