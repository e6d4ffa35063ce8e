"""The agent's own time per tool step, and its peak memory, over a thread of 50 steps.

How: the real `fsagent` runs as a subprocess against the scripted LM Studio stand-in, which
answers at once. The stand-in notes when it finished sending reply N (a tool call) and when
request N+1 arrived; the time between is everything that is ours for that step: parsing the
stream, routing, the approval review (piped `y`), the MCP call on the open session, the
SQLite checkpoints with durability="sync", and building the next request. Measured from the
stand-in's side it needs no hook in the agent and includes nothing of the model's.

The same threads run again on a Postgres database (a throwaway local server with its default
durability), and the Postgres rows compare its steps with SQLite's.

Baseline: the same tool call made the naive way, `MultiServerMCPClient.get_tools()`, which
starts a new server process and session for every call. It is only the call, without any of
the graph's work, so the ratio flatters the naive agent; ours still has to win by 20x.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    Row,
    agent_command,
    agent_env,
    fake_llm_module,
    median,
    postgres_server,
    row,
)

TURNS = 5
STEPS_PER_TURN = 10  # 5 turns of 10 tool steps: a thread of 50 steps; our cap is 25 per turn
BASELINE_CALLS = 6  # each starts a server process: about a second apiece on 2 cores
FILE_TEXT = "a line of notes about the project, as a person would keep them\n" * 16  # ~1 KB


@dataclass
class Exchange:
    """One chat request as the stand-in saw it, on the benchmark's clock."""

    arrived: float
    finished: float
    with_tools: bool  # False for the router's request (no tool may be called), auto_route'd


def timed_fake(script: list[dict[str, Any]]) -> tuple[Any, list[Exchange]]:
    """The stand-in with a handler that logs when each request came and its answer ended."""
    fake_llm = fake_llm_module()
    log: list[Exchange] = []

    class TimedHandler(fake_llm._Handler):
        def do_POST(self) -> None:
            arrived = time.perf_counter()
            super().do_POST()
            with_tools = fake_llm._may_call_tools(self.server.fake.requests[-1])
            log.append(Exchange(arrived, time.perf_counter(), with_tools))

    fake = fake_llm.FakeLLM(script, auto_route="filesystem")
    fake.bind().RequestHandlerClass = TimedHandler
    return fake, log


def step_times(log: list[Exchange], is_call: list[bool]) -> list[float]:
    """Seconds from the end of each tool-call reply to the agent's next request.

    Requests with tools consume the script in order, so the n-th of them got script step n.
    """
    times = []
    scripted = 0
    for exchange, following in zip(log, log[1:], strict=False):
        if not exchange.with_tools:
            continue
        if is_call[scripted]:
            times.append(following.arrived - exchange.finished)
        scripted += 1
    return times


def approve_flag_supported() -> bool:
    """`--approve yes` answers every approval itself; until it exists, pipe `y` lines."""
    help_text = subprocess.run(
        [*agent_command(), "--help"], capture_output=True, text=True, env=agent_env()
    ).stdout
    return "--approve" in help_text


@dataclass
class Thread:
    """A scripted thread: what the stand-in answers and what is typed at the agent."""

    script: list[dict[str, Any]]
    is_call: list[bool]
    stdin: str
    args: list[str]


def build_thread(tool: str, approvals: bool, flag: bool) -> Thread:
    fake_llm = fake_llm_module()
    script: list[dict[str, Any]] = []
    is_call: list[bool] = []
    lines: list[str] = []
    for turn in range(TURNS):
        lines.append(f"turn {turn}: please use {tool}")
        for step in range(STEPS_PER_TURN):
            if tool == "read_file":
                args = {"path": "notes.md"}
            else:
                args = {"path": f"out/t{turn}s{step}.md", "content": FILE_TEXT}
            script.append(fake_llm.reply(tool_calls=[fake_llm.tool_call(tool, args)]))
            is_call.append(True)
            if approvals and not flag:
                lines.append("y")
        script.append(fake_llm.text(f"done with turn {turn}"))
        is_call.append(False)
    lines.append("quit")
    args = ["--approve", "yes"] if approvals and flag else []
    return Thread(script, is_call, "\n".join(lines) + "\n", args)


def run_agent(thread: Thread, base_url: str, root: Path, db: Path | str) -> tuple[str, Any]:
    """Run the CLI to the end of its input; its output and its resource usage.

    os.wait4 gives the rusage of this one process (RUSAGE_CHILDREN would also count every
    other process the benchmark ever waited for).
    """
    command = [*agent_command(), "--base-url", base_url, "--root", str(root), "--db", str(db)]
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [*command, "--thread", "bench", *thread.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=root,
            env=agent_env(),
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(thread.stdin.encode())  # far below a pipe's buffer
        process.stdin.close()
        output = process.stdout.read().decode()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        if process.returncode != 0:
            raise RuntimeError(
                f"fsagent exited {process.returncode}:\n{output[-2000:]}\n{errors.read().decode()}"
            )
    return output, usage


def cpu_seconds(usage: Any) -> float:
    """User and system time of the agent and the children it waited for (its MCP server)."""
    return float(usage.ru_utime + usage.ru_stime)


def measure_thread(thread: Thread, root: Path, db: Path | str) -> tuple[list[float], Any]:
    fake, log = timed_fake(thread.script)
    with fake:
        _, usage = run_agent(thread, fake.base_url, root, db)
        if fake.remaining or fake.exhausted:
            raise RuntimeError(f"the thread did not follow its script ({fake.remaining} left)")
    return step_times(log, thread.is_call), usage


def idle_usage(root: Path, db: Path) -> Any:
    """The same launch answering `quit` at once: start-up, to subtract from a thread's CPU."""
    fake, _ = timed_fake([])
    with fake:
        return run_agent(Thread([], [], "quit\n", []), fake.base_url, root, db)[1]


# -- the naive way --------------------------------------------------------------------------------


async def per_call_session_times(root: Path, tool: str, calls: list[dict[str, Any]]) -> list[float]:
    """The same calls through `MultiServerMCPClient.get_tools()`: a new server per call."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from core.tools.server_process import server_command

    command, args, env = server_command([root], read_only=False)
    connection = {"transport": "stdio", "command": command, "args": args, "env": env}
    client = MultiServerMCPClient({"fs": {**connection, "cwd": str(root)}})
    by_name = {t.name: t for t in await client.get_tools()}
    times = []
    for arguments in calls:
        started = time.perf_counter()
        await by_name[tool].ainvoke(arguments)
        times.append(time.perf_counter() - started)
    return times


def bare_import_rss() -> int:
    """Peak RSS of a process that only imports langgraph and langchain_openai, in KiB."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import langgraph.graph, langchain_openai"], env=agent_env()
    )
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0
    return usage.ru_maxrss


def measure() -> list[Row]:
    flag = approve_flag_supported()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="fsagent-overhead-") as temp:
        root = Path(temp) / "root"
        (root / "out").mkdir(parents=True)
        (root / "notes.md").write_text(FILE_TEXT)
        idle = cpu_seconds(idle_usage(root, root / "i.db"))
        reads, read_usage = measure_thread(
            build_thread("read_file", False, flag), root, root / "r.db"
        )
        writes, write_usage = measure_thread(
            build_thread("write_file", True, flag), root, root / "w.db"
        )
        # The same paths again, in a thread of its own: each write now replaces a file (the
        # server swaps the new content in for the entry it checked).
        overwrites, _ = measure_thread(build_thread("write_file", True, flag), root, root / "w2.db")
        naive_reads = asyncio.run(
            per_call_session_times(root, "read_file", [{"path": "notes.md"}] * BASELINE_CALLS)
        )
        naive_writes = asyncio.run(
            per_call_session_times(
                root,
                "write_file",
                [{"path": f"naive{n}.md", "content": FILE_TEXT} for n in range(BASELINE_CALLS)],
            )
        )
        with postgres_server() as server:
            pg_reads, _ = measure_thread(
                build_thread("read_file", False, flag), root, server.create_database("reads")
            )
            pg_writes, _ = measure_thread(
                build_thread("write_file", True, flag), root, server.create_database("writes")
            )
    goal = "<= 0.05x per-call session, < 15 ms"
    how = "--approve yes" if flag else "piped y"
    steps = TURNS * STEPS_PER_TURN
    rows.append(
        row(
            f"read step, agent's own time (median of {len(reads)})",
            median(reads) * 1000,
            median(naive_reads) * 1000,
            "ms",
            goal,
        )
    )
    rows.append(
        row(
            f"approved write step ({how}), median of {len(writes)}",
            median(writes) * 1000,
            median(naive_writes) * 1000,
            "ms",
            goal,
        )
    )
    rows.append(
        row(
            f"approved overwrite step ({how}), median of {len(overwrites)}",
            median(overwrites) * 1000,
            median(naive_writes) * 1000,
            "ms",
            "figure: the same paths again, each file replaced",
        )
    )
    rows.append(
        row(
            "Postgres: read step (vs SQLite)",
            median(pg_reads) * 1000,
            median(reads) * 1000,
            "ms",
            "figure: a local server, fsync on",
        )
    )
    rows.append(
        row(
            "Postgres: approved write step (vs SQLite)",
            median(pg_writes) * 1000,
            median(writes) * 1000,
            "ms",
            "figure: a local server, fsync on",
        )
    )
    # CPU seconds barely move when the machine is busy, unlike wall time: the steady figure.
    for kind, usage in (("read", read_usage), ("approved write", write_usage)):
        rows.append(
            row(
                f"{kind} step, agent+server CPU per step",
                (cpu_seconds(usage) - idle) / steps * 1000,
                None,
                "ms",
                "figure: (CPU of thread - CPU of quit) / steps",
            )
        )
    rows.append(
        row(
            f"peak RSS of fsagent over {steps} steps",
            max(read_usage.ru_maxrss, write_usage.ru_maxrss) / 1024,
            bare_import_rss() / 1024,
            "MB",
            "figure; baseline: bare langgraph+openai import",
        )
    )
    return rows


if __name__ == "__main__":
    from bench.common import print_table

    sys.path.insert(0, str(REPO))
    print_table(measure())
