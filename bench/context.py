"""What a request costs the model's context and its prompt cache.

1. The fixed part: the tools and the system prompt every request begins with, per route, in
   the stand-in's tokens (tests/fake_llm.py counts about as a real tokenizer does, harder on
   JSON). Baseline: the design before issue 12, which offered each route its own tools with
   the server's full descriptions.

2. The prompt cache over a 30-turn session that switches routes: the real `fsagent` against
   the stand-in as a one-slot llama.cpp (its prompt cache keeps the last request and reply;
   whatever the next request shares with it is not processed again). Each turn the person
   names a file, the model reads it and answers. Per turn: the tokens the server processed
   (all requests of the turn, router and summaries included) against the new tokens of the
   turn (how much the conversation grew). Baseline: the same conversation sent as the old
   design sent it (the router's own request without tools, then each route's tool list), to
   a second stand-in that replays the same replies.

3. The same session on a 4096-token context with 2 KB files (issue 21's workload): how
   often it compacts (each compaction is a generation on a real model, the summary), the
   reply limits (the agent's and the router's) and the largest request. Earlier turns' file
   contents are sent as their heads, the reply reserve is an eighth of the context and a
   compaction aims at half of what the fixed part leaves below the mark (docs/context.md);
   before that, 28 of 30 turns compacted (git d3c0181: 0.93 a turn, 1,024 reserved).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Row, agent_command, agent_env, fake_llm_module, row

TURNS = 30

# The stand-in's tokenizer against a real one and its template: the kit's llama.cpp (the
# Hermes 2 Pro tool-use template, SmolLM2's tokenizer; bench/real_fixed.py) counted 982 tokens
# for the fixed part with all 7 tools, which the stand-in counts as 960 (issue 30). The ratio
# depends on the template: for issue 21's 14 tools and another template it was 1,774 / 1,921.
REAL_PER_STAND_IN = 982 / 960
# Before issue 21's compaction work (git d3c0181), measured with this session: 28 summaries
# in 30 turns, with a reply limit of 1,024 on 4096.
COMPACTIONS_PER_TURN_BEFORE = 28 / 30
REPLY_LIMIT_BEFORE = 1024

# Route switches at every turn but a few (search twice in a row: the cache within a route).
ROUTES = ("filesystem", "search", "general", "search", "search", "filesystem")

# The design before issue 12 (git 0964d95), rebuilt here as the baseline.
OLD_SYSTEM_PROMPT = (
    "You are fsagent, a careful assistant that works on the person's files only through the "
    "tools you are given. Paths are relative to the first allowed folder unless absolute. "
    "Read before you change. Every change to a file is shown to the person, who approves, "
    "edits or rejects it: if a call is rejected, do not retry it; ask what they want instead. "
    "Answer briefly."
)
OLD_ROUTER_PROMPT = (
    "Sort the person's request into one group and answer with its name only, one word:\n"
    "filesystem: read, create, change, copy, move or delete files and folders\n"
    "search: find files by name or find text inside files\n"
    "general: anything else"
)
OLD_SEARCH = {
    "list_allowed_roots", "list_directory", "directory_tree", "search_files", "grep",
    "read_file", "get_file_info",
}  # fmt: skip


def old_group(route: str, names: list[str]) -> set[str]:
    if route == "search":
        return OLD_SEARCH
    if route == "filesystem":
        return set(names) - {"search_files", "grep"}
    return set(names)


async def load_tools(root: Path, read_only: bool) -> tuple[list[dict], list[dict]]:
    """(what fsagent offers now, the server's full schemas)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from core.approval.questions import with_ask_person
    from core.tools.server_process import start_server, stop_server
    from core.tools.tool_groups import ALLOWED_TOOLS
    from core.tools.tool_schemas import offered_tools
    from core.tools.tools import open_tools

    process = await start_server([root], read_only=read_only, verbose=False)
    try:
        async with open_tools(process) as tools:
            # What the agent offers: its server's tools and ask_person (not read-only).
            offered = offered_tools(
                tools if read_only else with_ask_person(tools),
                ALLOWED_TOOLS if read_only else None,
            )
            return offered, [convert_to_openai_tool(tool) for tool in tools]
    finally:
        await stop_server(process)


def prompt_tokens(tools: list[dict], system: str) -> int:
    fake = fake_llm_module()
    request = {"tools": tools, "messages": [{"role": "system", "content": system}]}
    return len(fake.tokenize(fake.render_prompt(request))) - len(fake.tokenize("<|assistant|>\n"))


def fixed_part_rows(root: Path) -> list[Row]:
    from core.context.prompts import ROUTE_NOTES, SYSTEM_PROMPT

    offered, full = asyncio.run(load_tools(root, read_only=False))
    read_offered, read_full = asyncio.run(load_tools(root, read_only=True))
    fake = fake_llm_module()
    names = [tool["function"]["name"] for tool in full]
    rows = []
    for route in ("filesystem", "search", "general"):
        note = ROUTE_NOTES.get(route, "")
        ours = prompt_tokens(offered, SYSTEM_PROMPT) + len(fake.tokenize(note))
        wanted = old_group(route, names)
        old = prompt_tokens([t for t in full if t["function"]["name"] in wanted], OLD_SYSTEM_PROMPT)
        rows.append(
            row(f"fixed part, {route} route (+ its note)", ours, old, "tok", "< 2048 (4096 / 2)")
        )
    everything = prompt_tokens(offered, SYSTEM_PROMPT)
    rows.append(
        row(
            f"fixed part, all {len(offered)} tools + system (stand-in tok)",
            everything,
            None,
            "tok",
            f"figure; x{REAL_PER_STAND_IN:.2f} = ~{everything * REAL_PER_STAND_IN:.0f} real",
        )
    )
    rows.append(
        row(
            "fixed part, --read-only",
            prompt_tokens(read_offered, SYSTEM_PROMPT),
            prompt_tokens(read_full, OLD_SYSTEM_PROMPT),
            "tok",
            "figure",
        )
    )
    return rows


# -- the 30-turn session ---------------------------------------------------------------------


def notes(root: Path, size: int) -> None:
    line = "notes about the garden shed, the budget review and the list of tasks; "
    for n in range(TURNS):
        text = f"note {n}: " + line * (size // len(line) + 1)
        (root / f"note{n:02}.md").write_text(text[:size])


def run_session(context: int, size: int) -> tuple[Any, Any]:
    """The real CLI for TURNS turns; returns the stand-in (its requests and cache stats)
    and the scripted model."""
    fake = fake_llm_module()
    from local_model import LocalModel

    model = LocalModel(route=lambda turn: ROUTES[(turn - 1) % len(ROUTES)])
    with tempfile.TemporaryDirectory(prefix="fsagent-context-") as temp:
        root = Path(temp) / "root"
        root.mkdir()
        notes(root, size)
        stdin = "".join(f"read note{n:02}.md and sum it up\n" for n in range(TURNS)) + "quit\n"
        with fake.FakeLLM(model, flavour="llamacpp", context=context, slots=1) as llm:
            command = [
                *agent_command(),
                "--base-url", llm.base_url, "--root", str(root),
                "--db", str(Path(temp) / "threads.db"), "--thread", "bench",
            ]  # fmt: skip
            done = subprocess.run(
                command, input=stdin, capture_output=True, text=True, env=agent_env(), cwd=root
            )
            if done.returncode != 0:
                raise RuntimeError(f"fsagent failed: {done.stderr[-500:]}")
    return llm, model


def turns_of(requests: list[dict], kinds: list[str]) -> list[list[int]]:
    """The indices of each turn's requests: a turn starts with the router's (or with a
    summary asked just before it)."""
    turns: list[list[int]] = []
    for index, kind in enumerate(kinds):
        starts = kind == "router" and not (turns and kinds[index - 1] == "summary")
        if kind == "summary" and (index + 1 < len(kinds) and kinds[index + 1] == "router"):
            starts = True
        if starts or not turns:
            turns.append([])
        turns[-1].append(index)
    return turns


def per_turn(llm: Any, kinds: list[str]) -> tuple[list[int], list[int]]:
    """(processed, new) tokens per turn. A turn's new tokens are those of the person's
    message and the calls and results that followed it, in its last request: what the
    server must process at least once whatever it caches."""
    fake = fake_llm_module()
    stats = llm.cache_stats
    processed, new = [], []
    for turn in turns_of(llm.requests, kinds):
        processed.append(sum(stats[i].processed for i in turn))
        final = llm.requests[turn[-1]]
        messages = final["messages"]
        person = max(i for i, m in enumerate(messages) if m["role"] == "user")
        before = {**final, "messages": messages[:person]}
        whole = len(fake.tokenize(fake.render_prompt(final)))
        new.append(whole - len(fake.tokenize(fake.render_prompt(before))))
    return processed, new


class OldDesign:
    """The old design's requests for the same conversation, and the same replies."""

    def __init__(self, full: list[dict]) -> None:
        from local_model import LocalModel

        self.full = full
        self.names = [tool["function"]["name"] for tool in full]
        self.model = LocalModel()
        self.turn = 0

    def requests(self, ours: list[dict], kinds: list[str]) -> list[dict]:
        from core.context.prompts import ROUTE_NOTES

        old = []
        route = ROUTES[0]
        for request, kind in zip(ours, kinds, strict=True):
            messages = request["messages"]
            if kind == "router":
                route = ROUTES[len([r for r in old if not r.get("tools")]) % len(ROUTES)]
                person = messages[-1]["content"].split("\n\n[fsagent:")[0]
                old.append(
                    {
                        "messages": [
                            {"role": "system", "content": OLD_ROUTER_PROMPT},
                            {"role": "user", "content": person},
                        ]
                    }
                )
            elif kind == "agent":  # the old design never compacted: no summaries
                plain = []
                for message in messages[1:]:
                    content = message.get("content")
                    if message["role"] == "user" and isinstance(content, str):
                        for note in ROUTE_NOTES.values():
                            content = content.replace(f"\n\n{note}", "")
                    plain.append({**message, "content": content})
                wanted = old_group(route, self.names)
                old.append(
                    {
                        "tools": [t for t in self.full if t["function"]["name"] in wanted],
                        "messages": [{"role": "system", "content": OLD_SYSTEM_PROMPT}, *plain],
                    }
                )
        return old

    def __call__(self, request: dict) -> dict:
        fake = fake_llm_module()
        if not request.get("tools"):
            self.turn += 1
            return fake.text(ROUTES[(self.turn - 1) % len(ROUTES)])
        return self.model(request)


def baseline(llm: Any, kinds: list[str], full: list[dict]) -> list[int]:
    """Re-processed tokens per turn of the same conversation sent as the old design sent
    it, to a fresh one-slot stand-in."""
    import httpx

    fake = fake_llm_module()
    design = OldDesign(full)
    requests = design.requests(llm.requests, kinds)
    with fake.FakeLLM(design, flavour="llamacpp", slots=1) as old:
        with httpx.Client(timeout=30) as client:
            for request in requests:
                client.post(f"{old.base_url}/chat/completions", json=request).raise_for_status()
        stats = old.cache_stats
    old_kinds = ["router" if not r.get("tools") else "agent" for r in requests]
    return [sum(stats[i].processed for i in turn) for turn in turns_of(requests, old_kinds)]


def cache_rows(full: list[dict]) -> list[Row]:
    from local_model import request_kind

    llm, _ = run_session(context=32768, size=600)
    kinds = [request_kind(r) for r in llm.requests]
    processed, new = per_turn(llm, kinds)
    old = baseline(llm, kinds, full)
    size = len(ROUTES)
    switches = [n for n in range(1, TURNS) if ROUTES[n % size] != ROUTES[(n - 1) % size]]
    print("\nprompt cache, 30 turns, one-slot llama.cpp stand-in (tokens per turn):")
    print(" turn  route       new  processed  old design")
    for n in range(TURNS):
        route = ROUTES[n % len(ROUTES)]
        print(f" {n + 1:>4}  {route:<10} {new[n]:>4}  {processed[n]:>9}  {old[n]:>10}")
    later = range(1, TURNS)  # the first turn processes the fixed part either way
    median = statistics.median
    rows = [
        row(
            "re-processed tokens per turn, median",
            median(processed[n] for n in later),
            median(old[n] for n in later),
            "tok",
            "little more than new",
        ),
        row(
            "  on a route switch, median",
            median(processed[n] for n in switches),
            median(old[n] for n in switches),
            "tok",
            "figure",
        ),
        row("new tokens per turn, median", median(new[n] for n in later), None, "tok", "figure"),
        row(
            "re-processed / new tokens, turns 2-30",
            sum(processed[n] for n in later) / sum(new[n] for n in later),
            sum(old[n] for n in later) / sum(new[n] for n in later),
            "x",
            "ours <= 1.5x",
        ),
    ]
    small, model = run_session(context=4096, size=2048)
    kinds = [request_kind(r) for r in small.requests]
    processed, new = per_turn(small, kinds)
    over = [
        s.prompt_tokens + r["max_tokens"] - 4096
        for r, s in zip(small.requests, small.cache_stats, strict=True)
    ]
    rows += [
        row(
            "4096 context, 2 KB a turn: re-processed / new",
            sum(processed[n] for n in later) / sum(new[n] for n in later),
            None,
            "x",
            "figure",
        ),
        row("  summaries in 30 turns", len(model.summaries), None, "", "figure"),
        row(
            "  compactions per turn",
            len(model.summaries) / TURNS,
            COMPACTIONS_PER_TURN_BEFORE,
            "",
            "goal <= 0.25 (one every 4 turns)",
        ),
        row(
            "  agent's reply limit (max_tokens)",
            max(
                r["max_tokens"] for r, k in zip(small.requests, kinds, strict=True) if k == "agent"
            ),
            REPLY_LIMIT_BEFORE,
            "tok",
            "an eighth of 4096",
        ),
        row(
            "router's reply limit (max_tokens)",
            max(
                r["max_tokens"] for r, k in zip(small.requests, kinds, strict=True) if k == "router"
            ),
            1024,
            "tok",
            "a handful",
        ),
        row("  largest request + its reply limit", 4096 + max(over), 4096, "tok", "<= 4096"),
    ]
    return rows


def measure() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="fsagent-fixed-") as temp:
        rows = fixed_part_rows(Path(temp))
        _, full = asyncio.run(load_tools(Path(temp), read_only=False))
    return rows + cache_rows(full)


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
