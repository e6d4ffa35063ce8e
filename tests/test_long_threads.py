"""Threads that never outgrow the model: the real CLI against a stand-in server with a small
context, a prompt cache and the real servers' overflow answers (tests/fake_llm.py)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from conftest import Workspace
from core.context.budget import SUMMARY_PREFIX
from fake_llm import FakeLLM, FakeModel, render_prompt, reply, text, tokenize, tool_call
from local_model import LocalModel, request_kind

NOTES = (
    "the plan for the garden shed needs new boards paint and a lock before winter while the "
    "notes from the meeting say budget review on friday and the list of tasks grows each week"
)
WORDS = NOTES.split()


def prose(size: int, seed: int) -> str:
    """`size` characters of plain notes, different for each seed."""
    pick = random.Random(seed).choice
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(pick(WORDS))
    return " ".join(words)[:size]


def write_notes(root: Path, count: int, size: int = 2048) -> None:
    for n in range(count):
        (root / f"note{n:02}.md").write_text(prose(size, n))


def prompts(numbers: range) -> str:
    return "".join(f"read note{n:02}.md and tell me what it says\n" for n in numbers) + "quit\n"


def system_text(request: dict) -> str:
    return request["messages"][0]["content"]


def notes_named(request: dict) -> list[int]:
    """The notes the person's messages in a request ask for, by number."""
    said = " ".join(m["content"] for m in request["messages"] if m["role"] == "user")
    return [int(n) for n in re.findall(r"read note(\d+)\.md", said)]


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sixty_turns_on_a_4096_context_each_reading_2kb_and_a_restart(workspace: Workspace):
    write_notes(workspace.root, 60)
    model = LocalModel(route=lambda turn: ("filesystem", "search", "general")[turn % 3])
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(model, flavour="llamacpp", context=4096) as llm:
        first = workspace.run(llm.base_url, prompts(range(30)), timeout=600)
        in_first = len(llm.requests)
        summaries_in_first = len(model.summaries)
        second = workspace.run(
            llm.base_url, prompts(range(30, 60)), "--transcript", str(transcript), timeout=600
        )
        requests, stats = llm.requests, llm.cache_stats

    # Every turn succeeds.
    for run in (first, second):
        assert run.returncode == 0, run.stderr
        assert "error:" not in run.stdout and "Traceback" not in run.stderr
    answers = [
        line for run in (first, second) for line in run.stdout.splitlines() if answer_line(line)
    ]
    assert answers == [f"agent> Read note{n:02}.md." for n in range(60)]

    # No request sent is over the limit: each left room for its whole reply, none was refused.
    assert len(stats) == len(requests)
    for request, stat in zip(requests, stats, strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096

    # The summary survives the restart and is reused: the second process's first request
    # carries the first process's last summary; when it compacts, it extends that summary
    # (it sends the summary and the turns after it, not the turns the summary stands for).
    assert summaries_in_first >= 1
    last_summary = f"{SUMMARY_PREFIX}\nSummary {summaries_in_first}: "
    restart = requests[in_first]
    assert last_summary in system_text(restart)
    later = [r for r in requests[in_first:] if request_kind(r) == "summary"]
    assert later, "a 4096-token context needs compacting within thirty 2 KB turns"
    assert last_summary in system_text(later[0])
    assert min(notes_named(later[0])) >= min(notes_named(restart))
    # One summary per compaction the person was shown, never one per request.
    shown = first.stdout.count("⇣ compacted") + second.stdout.count("⇣ compacted")
    assert shown == len(model.summaries) < len(requests) / 3
    compacted = [e for e in events(transcript) if e["event"] == "compacted"]
    assert len(compacted) == len(later)
    assert all(e["why"] == "budget" for e in compacted)

    # The full history is kept: `threads show` has all sixty requests and answers.
    shown_thread = workspace.run("http://127.0.0.1:9/v1", "", "threads", "show", "t", thread=None)
    for n in range(60):
        assert f"you> read note{n:02}.md and tell me what it says" in shown_thread.stdout
        assert f"agent> Read note{n:02}.md." in shown_thread.stdout
    assert "The model is sent this summary in place of the first" in shown_thread.stdout


@pytest.mark.parametrize(
    "flavour, server, flags",
    [
        # LM Studio loads a model on its first request, with its own settings; the person
        # believed it had 8192 tokens. Its refusal arrives inside a 200 stream.
        (
            "lmstudio",
            {"models": [FakeModel("qwen2.5-7b-instruct", state="not-loaded")]},
            ("--model", "qwen2.5-7b-instruct"),
        ),
        # LM Studio before 0.4.2x refuses with HTTP 400 and `{"error": "<a plain string>"}`
        # (Gitlawb/openclaude#353 quotes the n_keep wording in full); openai-python's text
        # for it is only "Error code: 400", the words are in the body.
        (
            "lmstudio",
            {
                "models": [FakeModel("qwen2.5-7b-instruct", state="not-loaded")],
                "stream_errors": False,
            },
            ("--model", "qwen2.5-7b-instruct"),
        ),
        # LM Studio 0.3's wording, also a plain string (lmstudio-bug-tracker#546, #237).
        (
            "lmstudio",
            {
                "models": [FakeModel("qwen2.5-7b-instruct", state="not-loaded")],
                "stream_errors": False,
                "lmstudio_wording": "keep-first",
            },
            ("--model", "qwen2.5-7b-instruct"),
        ),
        # A llama-server behind a proxy that does not pass /props on: nothing says its
        # context, and the person's guess is too large. It refuses with a 400.
        ("llamacpp", {"props": False}, ()),
    ],
    ids=["lmstudio-stream", "lmstudio-400-n_keep", "lmstudio-400-keep-first", "llamacpp-400"],
)
def test_an_overflow_answer_mid_thread_compacts_once_and_the_turn_completes(
    workspace: Workspace, flavour: str, server: dict, flags: tuple[str, ...]
):
    # Fourteen turns: on what it believes is 8192 tokens, fsagent keeps the two latest
    # earlier results whole and sends older ones as their heads, so it takes a dozen 2 KB
    # turns (with a fixed part under 1,000 tokens) to pass the server's real 4096.
    write_notes(workspace.root, 14)
    model = LocalModel()
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(model, flavour=flavour, context=4096, **server) as llm:
        result = workspace.run(
            llm.base_url,
            prompts(range(14)),
            "--context-length",
            "8192",
            "--transcript",
            str(transcript),
            *flags,
            timeout=300,
        )
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stderr
    assert "error:" not in result.stdout
    answers = [line for line in result.stdout.splitlines() if line.startswith("agent> ")]
    assert answers == [f"agent> Read note{n:02}.md." for n in range(14)]
    refused = [r for r in requests if llm.prompt_tokens(r) >= 4096]
    assert len(refused) == 1 == len(requests) - len(stats)
    # The refused request was compacted once and sent again, at once.
    at = requests.index(refused[0])
    assert request_kind(requests[at + 1]) == "summary"
    assert request_kind(requests[at + 2]) == request_kind(refused[0])
    assert SUMMARY_PREFIX in system_text(requests[at + 2])
    compactions = [e for e in events(transcript) if e["event"] == "compacted"]
    assert [e["why"] for e in compactions][:1] == ["overflow"]
    assert [e["why"] for e in compactions].count("overflow") == 1
    # Learnt from the refusal: no later request is over the server's context.
    for request, stat in zip(requests[at + 2 :], stats[at + 1 :], strict=True):
        assert stat.prompt_tokens + request["max_tokens"] <= 4096


def test_a_looping_reply_stops_at_max_tokens_and_says_so(workspace: Workspace):
    huge = "x" * 4000
    script = [
        text("general"),
        reply(loop="I will read the file. "),
        text("filesystem"),
        reply(tool_calls=[tool_call("write_file", {"path": "big.txt", "content": huge})]),
        text("The file was too big for one reply."),
    ]
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(script, flavour="llamacpp", context=8192) as llm:
        result = workspace.run(
            llm.base_url,
            "read it\nwrite a big file\n",
            "--max-tokens",
            "64",
            "--approve",
            "yes",
            "--transcript",
            str(transcript),
        )
        sent = llm.requests_with_tools()

    assert result.returncode == 0, result.stderr
    # Every reply is bounded: the agent's by --max-tokens, the router's (one word) by less.
    assert all(r["max_tokens"] == 64 for r in llm.requests if request_kind(r) == "agent")
    assert all(r["max_tokens"] <= 64 for r in llm.requests)
    assert "agent> I will read the file. I will read the file." in result.stdout
    assert result.stdout.count("⚠ the reply was cut off at the 64-token reply limit") == 2
    cut = [e for e in events(transcript) if e["event"] == "cut"]
    assert cut == [{"event": "cut", "limit": 64}] * 2
    # The person's answer events hold the model's words; the model is told in its history.
    answers = [e["text"] for e in events(transcript) if e["event"] == "answer"]
    assert answers[0].startswith("I will read the file.") and "[fsagent" not in answers[0]
    history = sent[1]["messages"]
    said = [m["content"] for m in history if m["role"] == "assistant"]
    assert said[0].endswith("[fsagent: this reply was cut off at the 64-token reply limit.]")
    # A call cut off mid-arguments never runs, even approved by --approve yes.
    assert not (workspace.root / "big.txt").exists()
    [answer] = [m for m in sent[2]["messages"] if m["role"] == "tool"]
    assert "was not run" in answer["content"] and "cut off" in answer["content"]


def rendered(request: dict) -> str:
    """The prompt as the server renders it, without the opening of the reply."""
    return render_prompt(request).removesuffix("<|assistant|>\n")


def head(request: dict) -> str:
    """What a later request must begin with: the router's request without its question."""
    prompt = rendered(request)
    if request_kind(request) == "router":
        prompt = prompt[: prompt.rindex("\n\n[fsagent:")]
    return prompt


def test_each_request_extends_the_one_before_across_route_switches(workspace: Workspace):
    write_notes(workspace.root, 8, size=600)
    routes = ("filesystem", "search", "search", "general", "filesystem", "search", "general")
    model = LocalModel(route=lambda turn: routes[(turn - 1) % len(routes)])
    with FakeLLM(model, flavour="llamacpp", context=32768, slots=1) as llm:
        result = workspace.run(llm.base_url, prompts(range(8)))
        requests, stats = llm.requests, llm.cache_stats

    assert result.returncode == 0, result.stderr
    assert "⇢ route: search" in result.stdout and "⇢ route: general" in result.stdout
    assert not model.summaries
    # The same tools in every request, the router's too (it may only not call them).
    assert all(r["tools"] == requests[0]["tools"] for r in requests)
    assert {r["tool_choice"] for r in requests} == {"auto", "none"}
    # Byte for byte: each request begins with the one before it (the router's without its
    # question), within a turn, from turn to turn, and across every route switch.
    for before, after in zip(requests, requests[1:], strict=False):
        assert rendered(after).startswith(head(before))
    # So the one-slot cache serves all but the new text: each request processes only what
    # follows the last request's head and reply.
    for before, after, stat in zip(requests, requests[1:], stats[1:], strict=False):
        new = len(tokenize(render_prompt(after))) - len(tokenize(head(before)))
        assert stat.processed <= new + 2
    # A search turn's request carries its note, and keeps it in every later request.
    searched = [r for r in requests if request_kind(r) == "agent" and "a search" in str(r)]
    assert searched and "a search: find and read only" in str(requests[-1]["messages"])


def test_compact_at_the_prompt_and_the_summary_in_later_requests(workspace: Workspace):
    write_notes(workspace.root, 3)
    model = LocalModel()
    transcript = workspace.root.parent / "t.jsonl"
    with FakeLLM(model, flavour="llamacpp", context=32768) as llm:
        result = workspace.run(
            llm.base_url,
            "read note00.md\nread note01.md\n/compact\nread note02.md\nquit\n",
            "--transcript",
            str(transcript),
        )
        requests = llm.requests

    assert result.returncode == 0, result.stderr
    assert "⇣ compacted: " in result.stdout and "The thread keeps every message" in result.stdout
    [summary_request] = model.summaries
    assert "note00.md" in summary_request["messages"][1]["content"]
    after = requests[requests.index(summary_request) + 1]
    assert system_text(after).endswith(
        "Summary 1: the person asked to read note00.md, note01.md; each file was read and reported."
    )
    assert [m["content"] for m in after["messages"] if m["role"] == "user"][-1].startswith(
        "read note02.md"
    )
    # The first turn and the second's read: the latest request and its answer stay as they are.
    [compacted] = [e for e in events(transcript) if e["event"] == "compacted"]
    assert compacted == {"event": "compacted", "summarised": 6, "covered": 6, "why": "requested"}


def test_a_request_that_cannot_fit_is_one_line_and_nothing_is_sent(workspace: Workspace):
    # A 384 context: even the smallest route's tools, the system prompt and a summary's room
    # are more than it leaves a request after its reply reserve.
    with FakeLLM([text("Hello.")], flavour="llamacpp", context=384) as llm:
        refused = workspace.run(llm.base_url, "hello\n")
        assert llm.requests == []
        listed = workspace.run(llm.base_url, "", "threads", thread=None)

    assert refused.returncode == 1
    [line] = [line for line in refused.stdout.splitlines() if line.startswith("error:")]
    assert "does not fit the model's context" in line and "context of 384 tokens" in line
    # What it needs is set against what a request may hold, never against the context.
    needs = int(re.search(r"needs ~([\d,]+) tokens", line)[1].replace(",", ""))  # type: ignore[index]
    holds = int(re.search(r"the ([\d,]+) a request may hold", line)[1].replace(",", ""))  # type: ignore[index]
    assert needs > holds == 384 - 48
    assert "--read-only" in line and "larger context" in line
    assert "Traceback" not in refused.stderr
    assert listed.stdout.startswith("No threads in")  # nothing was stored


def test_a_small_context_offers_each_route_its_own_few_tools(workspace: Workspace):
    # On 1024 tokens every tool would take the whole prompt; each route offers its own few.
    script = [text("general"), text("Hello."), text("filesystem"), text("Done."), text("Hi.")]
    with FakeLLM(script, flavour="llamacpp", context=1024) as llm:
        result = workspace.run(llm.base_url, "hello\nwrite it\n")
        requests = llm.requests
        read_only = workspace.run(llm.base_url, "hello\n", "--read-only", thread="r")

    assert result.returncode == 0, result.stderr
    assert "agent> Hello." in result.stdout and "agent> Done." in result.stdout
    offered = [[t["function"]["name"] for t in r.get("tools", [])] for r in requests]
    assert offered[1] == ["list_directory", "read_file", "ask_person"]  # general
    assert offered[3] == ["list_directory", "read_file", "delete", "move", "write_file"]
    # The router asks with the tools of the turn before, which its agent's request extends.
    assert offered[2] == offered[1]
    assert all(llm.prompt_tokens(r) + r["max_tokens"] <= 1024 for r in requests)
    assert read_only.returncode == 0, read_only.stderr
    assert "agent> Hi." in read_only.stdout


def test_a_pending_approval_survives_compaction_and_a_restart(workspace: Workspace):
    write_notes(workspace.root, 4, size=3200)
    # The earlier turns' results are sent as their heads, so what crosses the mark is the
    # turn that asks for the write: it pastes more notes, and the four reads before it are
    # summarised before it is sent (the pasted notes alone still fit with a summary). They
    # cross it by the server's count: llama.cpp's /tokenize counts long words of the person.
    pasted = prose(6000, 7)
    reads = "".join(f"read note{n:02}.md\n" for n in range(4))
    write = tool_call("write_file", {"path": "summary.md", "content": "two notes\n"})
    model = LocalModel()

    def script(request: dict) -> dict:
        messages = request["messages"]
        if request_kind(request) == "agent" and "write the summary" in str(messages[-1]):
            return reply(tool_calls=[write])
        if request_kind(request) == "agent" and "new_sha256" in str(messages[-1]["content"]):
            return text("Wrote summary.md.")
        return model(request)

    with FakeLLM(script, flavour="llamacpp", context=4096) as llm:
        paused = workspace.run(
            llm.base_url,
            f"{reads}write the summary to summary.md: {pasted}\n",
        )
        assert paused.returncode == 3, paused.stderr  # end of input at the approval
        resumed = workspace.run(llm.base_url, "y\n")
        requests = llm.requests

    assert "⇣ compacted" in paused.stdout  # the turn that proposed the write compacted first
    assert "paused: waiting for your approval of write_file(path='summary.md'" in resumed.stdout
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace.root / "summary.md").read_text() == "two notes\n"
    assert "agent> Wrote summary.md." in resumed.stdout
    # The request after the write holds the call and its result, and fits.
    last = requests[-1]
    call = [m for m in last["messages"] if m.get("tool_calls")][-1]
    assert call["tool_calls"][0]["id"] == write["id"]
    assert (
        last["messages"][-1]["role"] == "tool" and "new_sha256" in last["messages"][-1]["content"]
    )
    assert llm.prompt_tokens(last) + last["max_tokens"] <= 4096


def test_sixty_turns_on_4096_survive_an_overflow_in_each_real_form(workspace: Workspace):
    """The done-when of issue 21: three processes of twenty turns on one thread, each told
    the context is 8192 while the server runs 4096, each meeting the server's refusal in one
    of the three forms real servers send it:

    1. LM Studio 0.4.2x: HTTP 200, one `event: error` (lmstudio-bug-tracker#2322);
    2. LM Studio: HTTP 400 `{"error": "<plain string>"}`, n_keep wording (openclaude#353);
    3. llama.cpp: HTTP 400 `exceed_context_size_error` with both counts (tools/server).
    """
    write_notes(workspace.root, 60)
    name = "qwen2.5-7b-instruct"
    model = LocalModel()
    forms = [
        ("lmstudio", {"stream_errors": True}),
        ("lmstudio", {"stream_errors": False}),
        ("llamacpp", {}),
    ]
    runs = []
    with FakeLLM(
        model, [FakeModel(name, state="not-loaded")], flavour="lmstudio", context=4096, props=False
    ) as llm:
        for segment, (flavour, knobs) in enumerate(forms):
            llm.flavour, llm.stream_errors = flavour, knobs.get("stream_errors", True)
            llm._loaded[name] = False  # LM Studio unloaded it (idle TTL): loads it again
            before, answered = len(llm.requests), len(llm.cache_stats)
            transcript = workspace.root.parent / f"t{segment}.jsonl"
            run = workspace.run(
                llm.base_url,
                prompts(range(20 * segment, 20 * segment + 20)),
                "--context-length", "8192", "--model", name,
                "--transcript", str(transcript),
                timeout=900,
            )  # fmt: skip
            refused = [r for r in llm.requests[before:] if llm.prompt_tokens(r) >= 4096]
            whys = [e["why"] for e in events(transcript) if e["event"] == "compacted"]
            runs.append((run, len(refused), whys))
            # Learnt from the refusal: no later request of this process is over the context.
            sent = llm.requests[before:]
            if refused:
                at = sent.index(refused[0])
                later = zip(sent[at + 1 :], llm.cache_stats[answered + at :], strict=True)
                for request, stat in later:
                    assert stat.prompt_tokens + request["max_tokens"] <= 4096

    for run, refused, whys in runs:
        assert run.returncode == 0, run.stderr
        assert "error:" not in run.stdout and "Traceback" not in run.stderr
        # Each process met the refusal once, compacted for it, and learnt the context.
        assert refused == 1
        assert whys.count("overflow") == 1
    answers = [line for run, *_ in runs for line in run.stdout.splitlines() if answer_line(line)]
    assert answers == [f"agent> Read note{n:02}.md." for n in range(60)]


def answer_line(line: str) -> bool:
    """An answer the agent printed; not the recap of the last one a resumed thread opens with."""
    return "agent> " in line and not line.startswith("Last: ")
