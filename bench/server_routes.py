"""Whether another server's tools join the one tool set of a large context, or stay on the
server's route (docs/other-servers.md, "One route per server").

The real `fsagent` with the real mcp-server-git configured, against the stand-in as a
one-slot llama.cpp on a 32K context (its prompt cache keeps the last request and reply;
what the next request shares with it is not processed again), for TURNS turns that switch
between the filesystem route (the model reads a note) and git's (it asks git's status).
Ours: every request offers every tool, git's too (what fsagent does). Baseline: the same
requests and replies with git's tools offered only on git's route, sent to a second
stand-in: each switch changes the tool list, which a chat template puts before the
conversation. Figures: the tokens the server processed after the first turn, and what git's
tools add to every request's fixed part. `python -m bench.server_routes URL` also replays both
ways to a real llama.cpp server at URL and prints its counts.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Row, agent_command, agent_env, fake_llm_module, row, tests_module

TURNS = 12


class Session:
    """The model's side of the session: each turn alternately a note read on the filesystem
    route or git's status on git's; every reply kept, to be given again in the baseline."""

    def __init__(self, repo: Path) -> None:
        self.local = tests_module("local_model").LocalModel(
            route=lambda turn: "filesystem" if turn % 2 else "git"
        )
        self.repo = repo
        self.replies: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        fake = fake_llm_module()
        kind = tests_module("local_model").request_kind(request)
        last = request["messages"][-1]
        if kind == "agent" and last["role"] == "user" and "git status" in str(last["content"]):
            call = fake.tool_call("git__git_status", {"repo_path": str(self.repo)})
            answer = fake.reply(tool_calls=[call])
        elif kind == "agent" and last["role"] == "tool" and "git__" in json.dumps(request):
            asked = [m for m in request["messages"] if m["role"] == "user"][-1]
            answer = (
                fake.text("The tree is clean.")
                if "git status" in str(asked["content"])
                else self.local(request)
            )
        else:
            answer = self.local(request)
        self.replies.append(answer)
        return answer


def run(temp: Path) -> tuple[Any, Session]:
    fake = fake_llm_module()
    root = temp / "root"
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for n in range(TURNS):
        (root / f"note{n:02}.md").write_text(f"note {n}: the shed, the budget, the tasks. " * 12)
    config = temp / "config" / "fsagent"
    config.mkdir(parents=True)
    args = json.dumps(["-m", "mcp_server_git", "--repository", str(repo)])
    (config / "config.toml").write_text(
        f"[mcp_servers.git]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
        "sandbox = false\n"
    )
    env = {**agent_env(), "XDG_CONFIG_HOME": str(temp / "config")}
    env |= {"XDG_DATA_HOME": str(temp / "data"), "XDG_STATE_HOME": str(temp / "state")}
    stdin = "".join(
        f"read note{n:02}.md\n" if n % 2 == 0 else "what is the git status?\n" for n in range(TURNS)
    )
    session = Session(repo)
    with fake.FakeLLM(session, flavour="llamacpp", context=32768, slots=1) as llm:
        command = [
            *agent_command(),
            "--base-url", llm.base_url, "--root", str(root),
            "--db", str(temp / "threads.db"), "--thread", "bench",
        ]  # fmt: skip
        done = subprocess.run(
            command, input=stdin + "quit\n", capture_output=True, text=True, env=env, cwd=root
        )
        if done.returncode != 0:
            raise RuntimeError(f"fsagent failed: {done.stderr[-500:]}")
    return llm, session


def on_route(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests as they would be with git's tools only on git's route: the router's
    request offers the tools of the turn before's route, as fsagent's does."""
    kind = tests_module("local_model").request_kind
    sent, route, last_route = [], "filesystem", "filesystem"
    for request in requests:
        if kind(request) == "router":
            last_route = route
            person = str(request["messages"][-1]["content"])
            route = "git" if "git status" in person else "filesystem"
            keep_git = last_route == "git"
        else:
            keep_git = route == "git"
        tools = request.get("tools") or []
        if not keep_git:
            tools = [t for t in tools if not t["function"]["name"].startswith("git__")]
        sent.append({**request, "tools": tools})
    return sent


def replayed(requests: list[dict[str, Any]], replies: list[dict[str, Any]]) -> list[int]:
    """The tokens a fresh one-slot stand-in processes for each request, given the replies
    again in order."""
    import httpx

    fake = fake_llm_module()
    with fake.FakeLLM(list(replies), flavour="llamacpp", slots=1) as llm:
        with httpx.Client(timeout=60) as client:
            for request in requests:
                body = {k: v for k, v in request.items() if k != "stream"}
                client.post(f"{llm.base_url}/chat/completions", json=body).raise_for_status()
        return [stat.processed for stat in llm.cache_stats]


def real_replayed(base: str, requests: list[dict[str, Any]]) -> list[int]:
    """The tokens a real llama.cpp server (one slot, `--cache-ram 0`) processes for each
    request (its `timings.prompt_n`), replying one token each: the next request holds the
    session's reply instead, so it shares the prompt before it and no more, either way."""
    import httpx

    processed = []
    with httpx.Client(timeout=600) as client:
        for request in requests:
            body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
            body |= {"max_tokens": 1, "stream": False}
            body.pop("response_format", None)
            answer = client.post(f"{base}/v1/chat/completions", json=body)
            answer.raise_for_status()
            processed.append(int(answer.json()["timings"]["prompt_n"]))
    return processed


def tool_tokens(tools: list[dict[str, Any]]) -> int:
    fake = fake_llm_module()
    return len(fake.tokenize(fake.render_prompt({"tools": tools, "messages": []})))


def measure() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="fsagent-server-routes-") as temp:
        llm, session = run(Path(temp))
    requests = llm.requests
    kinds = [tests_module("local_model").request_kind(r) for r in requests]
    first_turn_end = next(i for i, k in enumerate(kinds) if k == "router" and i > 0)
    ours = replayed(requests, session.replies)
    # The replay of fsagent's own requests processes what the session's stand-in did.
    assert ours == [stat.processed for stat in llm.cache_stats], "the replay is not faithful"
    theirs = replayed(on_route(requests), session.replies)
    later = slice(first_turn_end, None)
    every = requests[0].get("tools") or []
    without = [t for t in every if not t["function"]["name"].startswith("git__")]
    git_tokens = tool_tokens(every) - tool_tokens(without)
    routers = [i for i, k in enumerate(kinds) if k == "router" and i >= first_turn_end]
    print(f"\nanother server's tools on a 32K context, {TURNS} turns switching routes:")
    print(f"  requests: {len(requests)}; git's 12 tools add {git_tokens} stand-in tokens")
    print(f"  processed after turn 1: one set {sum(ours[later]):,}, on git's route "
          f"{sum(theirs[later]):,}")  # fmt: skip
    switch = statistics.median(theirs[i] + theirs[i + 1] for i in routers)
    same = statistics.median(ours[i] + ours[i + 1] for i in routers)
    print(f"  median per turn (router + first step): one set {same}, on git's route {switch}")
    return [
        row(
            "processed after turn 1, git's tools in the one set (vs on its route)",
            sum(ours[later]), sum(theirs[later]), "tokens", "smaller",
        ),
        row("what git's tools add to every request", git_tokens, None, "tokens", "info"),
    ]  # fmt: skip


def measure_real(base: str) -> None:
    """The same session's requests, both ways, counted by a real llama.cpp server (run by
    hand: bash ../shared/real-llm/start.sh PORT 32768 --cache-ram 0)."""
    with tempfile.TemporaryDirectory(prefix="fsagent-server-routes-") as temp:
        llm, _ = run(Path(temp))
    requests = llm.requests
    kinds = [tests_module("local_model").request_kind(r) for r in requests]
    later = slice(next(i for i, k in enumerate(kinds) if k == "router" and i > 0), None)
    ours = real_replayed(base, requests)
    theirs = real_replayed(base, on_route(requests))
    print(f"\nthe same on a real llama.cpp ({base}), tokens it processed:")
    print(f"  first request: one set {ours[0]:,}, on git's route {theirs[0]:,}")
    print(f"  after turn 1: one set {sum(ours[later]):,}, on git's route {sum(theirs[later]):,}")


if __name__ == "__main__":
    measure()
    if len(sys.argv) > 1:
        measure_real(sys.argv[1])
