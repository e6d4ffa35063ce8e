"""A thread on a small context keeps working: the real CLI against the stand-in
(tests/fake_llm.py) with 2048 tokens, as Ollama's old default and small LM Studio loads give
it (issue 30)."""

from __future__ import annotations

import random
from typing import Any

from test_long_threads import WORDS

from conftest import Workspace
from fake_llm import FakeLLM, text
from local_model import request_kind


def paragraph(words: int, seed: int) -> str:
    pick = random.Random(seed).choice
    return " ".join(pick(WORDS) for _ in range(words))


class Chatty:
    """A small model on prose: it routes, summarises, and answers each turn at length."""

    def __init__(self, answer_words: int = 100) -> None:
        self.answer_words = answer_words
        self.answers = 0
        self.summaries = 0

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request_kind(request)
        if kind == "router":
            return text("general")
        if kind == "summary":
            self.summaries += 1
            return text(f"Summary {self.summaries}: the person wrote notes about the shed.")
        self.answers += 1
        return text(f"Answer {self.answers}: " + paragraph(self.answer_words, self.answers))


def turns(numbers: range) -> str:
    return "".join(paragraph(150, 1000 + n) + "\n" for n in numbers) + "quit\n"


def answers(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("agent> ")]


def test_a_2048_context_answers_every_150_word_turn_and_after_a_restart(workspace: Workspace):
    model = Chatty()
    with FakeLLM(model, flavour="llamacpp", context=2048) as llm:
        first = workspace.run(llm.base_url, turns(range(12)), timeout=600)
        second = workspace.run(llm.base_url, turns(range(12, 16)), timeout=600)
        requests, stats = llm.requests, llm.cache_stats

    for run in (first, second):
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr
        assert "error:" not in run.stdout and "Traceback" not in run.stderr
    said = answers(first.stdout) + answers(second.stdout)
    assert [line.split(":")[0] for line in said] == [f"agent> Answer {n}" for n in range(1, 17)]
    # Nothing the server was sent was over its context, by its own count.
    assert len(stats) == len(requests)
    for request, stat in zip(requests, stats, strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 2048
    assert any(request_kind(r) == "summary" for r in requests)
