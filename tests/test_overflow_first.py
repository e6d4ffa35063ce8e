"""A server that counts far more than our estimate (issue 43): its count decides, and the older
turns are summarised and the request sent again before anything is said to the person. The
real CLI, piped, against the stand-in (tests/fake_llm.py) refusing one request in each real
server's words with a count of the context plus one, whatever the request holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import Workspace
from core.context.budget import SUMMARY_PREFIX
from fake_llm import FakeLLM, FakeModel, reply
from local_model import LocalModel, request_kind

NOTES = (
    "the plan for the garden shed needs new boards paint and a lock before winter while the "
    "notes from the meeting say budget review on friday and the list of tasks grows each week "
)
NAME = "qwen2.5-7b-instruct"

# Each real server's refusal, as the stand-in words it (tests/fake_llm.py says where each
# was seen): LM Studio's 400 in two wordings and its 0.4.2x 200 stream with one error event,
# llama.cpp's exceed_context_size_error, Ollama's llama-server runner's, and OpenAI's.
SERVERS = [
    ("lmstudio", {"lmstudio_wording": "n_keep", "stream_errors": False}),
    ("lmstudio", {"lmstudio_wording": "cannot-truncate", "stream_errors": False}),
    ("lmstudio", {"lmstudio_wording": "does-not-fit", "stream_errors": True}),
    ("llamacpp", {}),
    ("ollama", {"ollama_refuses": True}),
    ("openai", {}),
]
IDS = ["lmstudio-n_keep", "lmstudio-cannot-truncate", "lmstudio-stream"]
IDS += ["llamacpp", "ollama", "openai"]


class Overcounting:
    """LocalModel, except that the agent's first request of turn `turn` is refused as
    `count` tokens: a server that counts the context plus one for a request we estimate
    at about a third of that."""

    def __init__(self, turn: int, count: int = 4097, after_result: bool = False) -> None:
        self.model = LocalModel()
        self.turn, self.count, self.after_result = turn, count, after_result
        self.turns = 0

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        last = request["messages"][-1]["role"]
        if request_kind(request) == "agent" and last == "user":
            self.turns += 1
        wanted = "tool" if self.after_result else "user"
        if request_kind(request) == "agent" and last == wanted and self.turns == self.turn:
            self.turn = 0  # once
            return reply(overflow=self.count)
        return self.model(request)


def paragraphs(count: int) -> str:
    """A ~150-word paragraph a turn."""
    return "".join(f"note {n}: {NOTES * 4}\n" for n in range(count))


def errors(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("error:")]


def compactions(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [event for event in lines if event["event"] == "compacted"]


@pytest.mark.parametrize(("flavour", "server"), SERVERS, ids=IDS)
def test_a_count_past_our_estimate_is_answered_by_a_summary_and_a_smaller_request(
    workspace: Workspace, flavour: str, server: dict[str, Any]
):
    script = Overcounting(turn=3)
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(script, [FakeModel(NAME)], flavour=flavour, context=4096, **server) as llm:
        result = workspace.run(
            llm.base_url,
            paragraphs(4),
            "--model", NAME, "--context-length", "4096", "--transcript", str(transcript),
        )  # fmt: skip
        requests = llm.requests
        counts = [llm.prompt_tokens(r) for r in requests]

    assert result.returncode == 0, result.stdout + result.stderr
    assert errors(result.stdout) == []
    assert result.stdout.count("agent> OK.") == 4  # every turn answered, the third too
    # Two requests a turn, and on the third the refused one, the summary and the retry.
    kinds = [request_kind(r) for r in requests]
    assert kinds == ["router", "agent"] * 2 + ["router", "agent", "summary", "agent"] + [
        "router",
        "agent",
    ]
    refused, retried = requests[5], requests[7]
    assert SUMMARY_PREFIX not in refused["messages"][0]["content"]
    assert SUMMARY_PREFIX in retried["messages"][0]["content"]
    assert counts[7] < counts[5]  # the retry is smaller than the refused request
    assert "note 2:" in retried["messages"][-1]["content"]  # and still asks the third turn
    assert [e["why"] for e in compactions(transcript)] == ["overflow"]


def test_a_result_that_fits_only_cut_is_cut_by_the_servers_count_after_the_summary(
    workspace: Workspace,
):
    # The third turn reads a 5 KB file; the step after it is counted at 6,000 tokens, about
    # twice our estimate: the older turns are summarised and the result cut, so that by the
    # server's ratio the request sent again fits.
    (workspace.root / "big.md").write_text(NOTES * 28)
    script = Overcounting(turn=3, count=6000, after_result=True)
    with FakeLLM(script, [FakeModel(NAME)], flavour="llamacpp", context=4096) as llm:
        asked = paragraphs(2) + "read big.md and tell me what it says\n"
        result = workspace.run(llm.base_url, asked, "--model", NAME)
        requests = llm.requests
        counts = [llm.prompt_tokens(r) for r in requests]

    assert result.returncode == 0, result.stdout + result.stderr
    assert errors(result.stdout) == []
    assert "agent> Read big.md." in result.stdout
    kinds = [request_kind(r) for r in requests]
    assert kinds[4:] == ["router", "agent", "agent", "summary", "agent"]
    refused, retried = requests[6], requests[8]
    assert retried["messages"][-1]["role"] == "tool"
    assert "more characters of this result were left out" in retried["messages"][-1]["content"]
    assert counts[8] * 6000 / counts[6] <= 4096 - 512  # fits by the server's ratio
    assert SUMMARY_PREFIX in retried["messages"][0]["content"]
    assert refused["messages"][-1]["content"] == (workspace.root / "big.md").read_text()


def test_what_cannot_fit_by_the_servers_count_is_one_line_and_no_summary_is_asked_for(
    workspace: Workspace,
):
    # The fourth turn, counted at 8,000 tokens where we estimate ~1,900: by that count the
    # fixed part and the latest paragraph alone are past what a request may hold, so a
    # summary of the three turns before could not help and is not asked for.
    script = Overcounting(turn=4, count=8000)
    with FakeLLM(
        script, [FakeModel(NAME)], flavour="lmstudio", context=4096, stream_errors=False
    ) as llm:
        result = workspace.run(llm.base_url, paragraphs(4) + "hello\n", "--model", NAME)
        kinds = [request_kind(r) for r in llm.requests]

    assert result.returncode == 1  # a turn failed
    [line] = errors(result.stdout)
    assert "the server counted 8,000 tokens" in line
    holds = int(re.search(r"more than the ([\d,]+) a request may hold", line)[1].replace(",", ""))  # type: ignore[index]
    assert holds == 3584
    assert "--read-only" in line and "larger context" in line
    # Refused once, said at once: nothing summarised, nothing sent again.
    assert kinds == ["router", "agent"] * 5
    assert result.stdout.count("agent> OK.") == 4  # the turns before and after are answered
