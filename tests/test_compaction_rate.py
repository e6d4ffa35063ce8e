"""How often a small context compacts: issue 21's workload (a 4096-token context, a 2 KB file
read each turn; bench/context.py measures the same) through the real CLI against the stand-in
(tests/fake_llm.py), which counts every request's tokens with its own tokenizer.

Each compaction is a generation on a real model (the summary), so the goal is at most one
every four turns, with every request under the context and nothing lost from the thread.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Workspace
from core.text import RESULT_LINES
from fake_llm import FakeLLM
from local_model import LocalModel, request_kind

TURNS = 24
LINE = "notes about the garden shed, the budget review and the list of tasks\n"
SHORTENED = "more characters left out; call read_file again for all]"


def write_notes(root: Path) -> None:
    """2 KB notes of 28 lines each, so `threads show` says how many lines each result kept."""
    for n in range(TURNS):
        text = "".join(f"{n:02}.{line:02} {LINE}" for line in range(40))
        (root / f"note{n:02}.md").write_text(text[:2048])


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_4096_context_reading_2kb_a_turn_compacts_at_most_once_every_four_turns(
    workspace: Workspace,
):
    write_notes(workspace.root)
    routes = ("filesystem", "search", "general", "search", "search", "filesystem")
    model = LocalModel(route=lambda turn: routes[(turn - 1) % len(routes)])
    transcript = workspace.root.parent / "t.jsonl"
    asks = "".join(f"read note{n:02}.md and sum it up\n" for n in range(TURNS)) + "quit\n"
    with FakeLLM(model, flavour="llamacpp", context=4096) as llm:
        result = workspace.run(llm.base_url, asks, "--transcript", str(transcript), timeout=600)
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stderr
    assert "error:" not in result.stdout and "Traceback" not in result.stderr
    answers = [line for line in result.stdout.splitlines() if line.startswith("agent> ")]
    assert answers == [f"agent> Read note{n:02}.md." for n in range(TURNS)]

    # The turns that compacted, counted from the stand-in's requests: a summary request
    # belongs to the turn of the router request before it. The transcript agrees.
    kinds = [request_kind(request) for request in requests]
    compacted_at, turn = [], 0
    for kind in kinds:
        turn += kind == "router"
        if kind == "summary":
            compacted_at.append(turn)
    compacted = [e for e in events(transcript) if e["event"] == "compacted"]
    assert len(compacted) == len(compacted_at) == len(model.summaries)
    assert all(e["why"] == "budget" for e in compacted)
    assert compacted_at, "twenty-four 2 KB turns do not fit 4096 tokens without a summary"
    assert len(compacted_at) <= TURNS // 4
    assert compacted_at[0] > 4
    gaps = [later - earlier for earlier, later in zip(compacted_at, compacted_at[1:], strict=False)]
    assert all(gap >= 4 for gap in gaps)

    # Every request was under the context by the stand-in's own count, with room for its
    # whole reply, and none was refused.
    assert len(stats) == len(requests)
    for request, stat in zip(requests, stats, strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096
    agent_limits = {r["max_tokens"] for r, k in zip(requests, kinds, strict=True) if k == "agent"}
    assert agent_limits == {512}  # an eighth of the context is kept for the reply

    # The last request with earlier results (not the first after a compaction): the file
    # its turn read whole, the earlier ones as their heads with a note that says how to read
    # them again.
    last, turn = next(
        (r, sum(k == "router" for k in kinds[: i + 1]))
        for i, r in reversed(list(enumerate(requests)))
        if r["messages"][-1]["role"] == "tool"
        and sum(m["role"] == "tool" for m in r["messages"]) > 1
    )
    results = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert results[-1] == (workspace.root / f"note{turn - 1:02}.md").read_text()
    assert results[:-1] and all(r.endswith(SHORTENED) and len(r) < 300 for r in results[:-1])

    # Nothing is lost from the thread: `threads show` has every message, and every result
    # with all its lines (a shortened one would have two).
    shown = workspace.run("http://127.0.0.1:9/v1", "", "threads", "show", "t", thread=None)
    assert shown.returncode == 0, shown.stderr
    assert f"Thread 't': {4 * TURNS} messages" in shown.stdout
    for n in range(TURNS):
        assert f"you> read note{n:02}.md and sum it up" in shown.stdout
        assert f"agent> Read note{n:02}.md." in shown.stdout
        assert f"← {n:02}.00 notes about the garden shed" in shown.stdout
    lines = len((workspace.root / "note00.md").read_text().splitlines())
    assert lines == 28
    assert shown.stdout.count(f"… (+{lines - RESULT_LINES} more lines)") == TURNS
    assert SHORTENED not in shown.stdout
