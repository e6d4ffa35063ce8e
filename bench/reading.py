"""The reading commands' cost: `fsagent threads` on a 20-thread store, `threads show`,
`approvals`, `audit`, `--version` and `--help`, each as the CPU (user + sys) of its whole
process tree, against the bare `import langgraph.graph, langchain_openai` measured in the same
rounds. The store is made by the real CLI on the scripted stand-in: 19 threads of two turns,
and one paused for approval of a write (so `approvals` and `audit` have something to show).

The same threads are copied (`migrate-db`) into a Postgres database of the benchmark's own
server, and read there too. Before and after, side by side: `threads` and `threads show`
read through the graph (FSAGENT_TEST_HEAVY_READ, the way every reading command went before
the light readers) on each store.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import (
    Row,
    agent_command,
    agent_env,
    fake_llm_module,
    median,
    postgres_server,
    row,
)

RUNS = 7
THREADS = 20
BARE_IMPORT_CODE = "import langgraph.graph, langchain_openai"
NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: a reading command must not ask
HEAVY = {"FSAGENT_TEST_HEAVY_READ": "1"}  # terminal.reading: read through the graph


def cpu_seconds(
    command: list[str],
    cwd: Path,
    stdin: str = "",
    check: bool = True,
    env: dict[str, str] | None = None,
) -> float:
    """User + sys CPU of `command` and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, cwd=cwd,
        env={**agent_env(), **(env or {})},
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-1000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def make_threads(fsagent: list[str], root: Path) -> None:
    """THREADS - 1 idle threads of two turns each, and `waits` paused at a write."""
    fake_llm = fake_llm_module()
    answers: Callable[[dict[str, Any]], Any] = lambda request: fake_llm.text("Done.")  # noqa: E731
    with fake_llm.FakeLLM(answers, auto_route="general") as llm:
        for number in range(THREADS - 1):
            command = [*fsagent, "--base-url", llm.base_url, "--thread", f"thread-{number}"]
            cpu_seconds(command, root, "first request\nsecond request\n")
    write = fake_llm.tool_call("write_file", {"path": "a.txt", "content": "a"}, id="call_1")
    with fake_llm.FakeLLM([fake_llm.reply(tool_calls=[write])], auto_route="filesystem") as llm:
        # Piped, with nothing to read for the approval: it stays paused (exit 3).
        command = [*fsagent, "--base-url", llm.base_url, "--thread", "waits"]
        cpu_seconds(command, root, "write a.txt\n", check=False)


def measure() -> list[Row]:
    with (
        tempfile.TemporaryDirectory(prefix="fsagent-reading-") as temp,
        postgres_server() as server,
    ):
        root = Path(temp)
        db = str(root / "t.db")
        fsagent = [*agent_command(), "--root", str(root), "--db", db]
        make_threads(fsagent, root)
        url = server.create_database("reading")
        cpu_seconds([*agent_command(), "--base-url", NO_LLM, "migrate-db", db, url], root)
        reading = [*fsagent, "--base-url", NO_LLM]
        on_pg = [*agent_command(), "--root", str(root), "--db", url, "--base-url", NO_LLM]
        commands = {
            "bare": [sys.executable, "-c", BARE_IMPORT_CODE],
            "threads": [*reading, "threads"],
            "show": [*reading, "threads", "show", "thread-0"],
            "approvals": [*reading, "approvals"],
            "audit": [*reading, "audit"],
            "version": [*agent_command(), "--version"],
            "help": [*agent_command(), "--help"],
            "pg threads": [*on_pg, "threads"],
            "pg show": [*on_pg, "threads", "show", "thread-0"],
            "pg approvals": [*on_pg, "approvals"],
            "pg audit": [*on_pg, "audit"],
        }
        through_graph = {"graph threads", "graph show", "graph pg threads", "graph pg show"}
        for name in through_graph:
            commands[name] = commands[name.removeprefix("graph ")]
        for name, command in commands.items():  # warm-up: bytecode, page cache
            cpu_seconds(command, root, env=HEAVY if name in through_graph else None)
        timings: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(RUNS):
            for name, command in commands.items():
                env = HEAVY if name in through_graph else None
                timings[name].append(cpu_seconds(command, root, env=env))
    cpu = {name: median(values) for name, values in timings.items()}
    bare = cpu["bare"]
    labels = {
        "threads": (f"fsagent threads ({THREADS} threads), CPU", "<= 0.25x bare import"),
        "show": ("fsagent threads show NAME, CPU", "figure"),
        "approvals": ("fsagent approvals, CPU", "figure"),
        "audit": ("fsagent audit, CPU", "figure"),
        "version": ("fsagent --version, CPU", "figure"),
        "help": ("fsagent --help, CPU", "figure"),
        "graph threads": ("  before: threads via the graph, CPU", "figure"),
        "graph show": ("  before: threads show via the graph, CPU", "figure"),
        "pg threads": (f"Postgres: fsagent threads ({THREADS} threads), CPU", "<= 0.25x bare"),
        "pg show": ("Postgres: fsagent threads show NAME, CPU", "figure"),
        "pg approvals": ("Postgres: fsagent approvals, CPU", "figure"),
        "pg audit": ("Postgres: fsagent audit, CPU", "figure"),
        "graph pg threads": ("  before: Postgres threads via the graph, CPU", "figure"),
        "graph pg show": ("  before: Postgres show via the graph, CPU", "figure"),
    }
    return [
        row("bare langgraph+openai import, CPU", bare, None, "s", "the baseline"),
        *(row(label, cpu[name], bare, "s", goal) for name, (label, goal) in labels.items()
          if name in cpu),
    ]  # fmt: skip


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
