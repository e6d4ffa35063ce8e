"""Start-up: from launch to the `you> ` prompt on a terminal (on SQLite and on Postgres, and
as it was before the early prompt: FSAGENT_TEST_LATE_PROMPT), and `echo quit | fsagent` to
exit, against a Python that only imports what any LangGraph + OpenAI agent must import; the
filesystem server's launch against the same, and against `import mcp`, its floor. And the
filesystem server's cost of the kernel sandbox (Landlock): its start to `initialize`
answered and one call, restricted and with the test switch that says there is no Landlock
(FSAGENT_LANDLOCK_ABI=0), side by side.

The prompt is awaited on a pseudo-terminal, the way a person sees it; LM Studio is the
scripted stand-in (only `/v1/models` is asked). One unmeasured launch first, so every
measured one finds compiled bytecode and a warm page cache.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import (
    Row,
    agent_command,
    agent_env,
    fake_llm_module,
    median,
    postgres_server,
    row,
    tests_module,
)

RUNS = 5
# prompt_toolkit draws the prompt's trailing space apart from its text.
PROMPT = b"you>"
BARE_IMPORT = [sys.executable, "-c", "import langgraph.graph, langchain_openai"]
MCP_IMPORT = [sys.executable, "-c", "import mcp"]
# cli.chat.TEST_LATE_PROMPT_ENV: the prompt only once everything has started, as before issue 31.
LATE = {"FSAGENT_TEST_LATE_PROMPT": "1"}


def time_to_prompt(
    command: list[str], cwd: Path, timeout: float = 30, more_env: dict[str, str] | None = None
) -> float:
    """Seconds from launch until `you>` appears on the terminal; then answers `quit`."""
    controller, terminal = pty.openpty()
    started = time.perf_counter()
    # A person's terminal: line editing and the status line load (the history goes to cwd).
    env = agent_env() | {"TERM": "xterm-256color", "XDG_STATE_HOME": str(cwd)} | (more_env or {})
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        command, stdin=terminal, stdout=terminal, stderr=terminal, cwd=cwd, env=env
    )
    os.close(terminal)
    seen = b""
    try:
        while PROMPT not in seen:
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"no prompt within {timeout}s: {seen.decode(errors='replace')}")
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(controller, 4096)
                except OSError as error:  # EIO: the agent closed the terminal, i.e. exited
                    raise RuntimeError(
                        f"fsagent exited: {seen.decode(errors='replace')}"
                    ) from error
        elapsed = time.perf_counter() - started
        os.write(controller, b"quit\r")  # Enter, as a terminal sends it
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return elapsed


def time_to_exit(command: list[str], cwd: Path, stdin: str = "") -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, cwd=cwd, env=agent_env()
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr[-1000:]}")
    return elapsed


def interleaved(cases: dict[str, Callable[[], float]]) -> dict[str, float]:
    """The median of RUNS of each case, taken in rounds of one of each, so a machine that
    gets busier or quieter part-way (other work on a shared box) weighs on all of them."""
    timings: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(RUNS):
        for name, measure_once in cases.items():
            timings[name].append(measure_once())
    return {name: median(values) for name, values in timings.items()}


CALLS = 200  # read_file calls a round, one after the other
NO_LANDLOCK = {"FSAGENT_LANDLOCK_ABI": "0"}


def server_round(root: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds from launch to `initialize` answered, seconds a read_file call) of one server."""
    raw_server = tests_module("mcp_session").RawServer
    started = time.perf_counter()
    server = raw_server([root], env=env)  # launched, initialize asked and answered
    launched = time.perf_counter() - started
    try:
        report = server.initialized["capabilities"]["experimental"]["fsagent/kernel-sandbox"]
        if report["holds"] != (env.get("FSAGENT_LANDLOCK_ABI") != "0"):
            raise RuntimeError(f"the kernel sandbox is not as measured: {report}")
        started = time.perf_counter()
        for _ in range(CALLS):
            server.ask("tools/call", {"name": "read_file", "arguments": {"path": "a.txt"}})
        per_call = (time.perf_counter() - started) / CALLS
    finally:
        server.close()
    return launched, per_call


def kernel_sandbox_rows(root: Path) -> list[Row]:
    (root / "a.txt").write_text("a line to read\n" * 20)
    cases = {"landlock": dict(os.environ), "off": {**os.environ, **NO_LANDLOCK}}
    server_round(root, cases["landlock"])  # warm-up
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(RUNS):
        for name, env in cases.items():
            times[name].append(server_round(root, env))
    start = {name: median([t[0] for t in found]) for name, found in times.items()}
    call = {name: median([t[1] for t in found]) * 1000 for name, found in times.items()}
    return [
        row("filesystem server, launch to initialize: Landlock vs none", start["landlock"],
            start["off"], "s", "figure (restricting is a few syscalls)"),
        row("filesystem server, one read_file call: Landlock vs none", call["landlock"],
            call["off"], "ms", "~1.0x (the kernel checks at open)"),
    ]  # fmt: skip


def server_launch(root: Path) -> float:
    """Seconds from launch to `initialize` answered, of the filesystem server alone."""
    started = time.perf_counter()
    server = tests_module("mcp_session").RawServer([root])  # launched, initialize answered
    launched = time.perf_counter() - started
    server.close()
    return launched


def measure() -> list[Row]:
    fake_llm = fake_llm_module()
    with (
        tempfile.TemporaryDirectory(prefix="fsagent-startup-") as temp,
        fake_llm.FakeLLM([]) as llm,
        postgres_server() as pg,
    ):
        root = Path(temp)
        on = ("--base-url", llm.base_url, "--root", str(root))
        fsagent = [*agent_command(), *on, "--db", str(root / "t.db")]
        on_pg = [*agent_command(), *on, "--db", pg.create_database("startup")]
        for command in (fsagent, on_pg):  # warm-up: bytecode, page cache, the thread's store
            time_to_prompt(command, root)
        timings = interleaved(
            {
                "prompt": lambda: time_to_prompt(fsagent, root),
                "late prompt": lambda: time_to_prompt(fsagent, root, more_env=LATE),
                "pg prompt": lambda: time_to_prompt(on_pg, root),
                "pg late prompt": lambda: time_to_prompt(on_pg, root, more_env=LATE),
                "piped": lambda: time_to_exit(fsagent, root, "quit\n"),
                "help": lambda: time_to_exit([*agent_command(), "--help"], root),
                "server": lambda: server_launch(root),
                "mcp import": lambda: time_to_exit(MCP_IMPORT, root),
                "bare": lambda: time_to_exit(BARE_IMPORT, root),
            }
        )
        sandbox = kernel_sandbox_rows(root)
    from bench import reading  # the reading commands' CPU, on a store of their own

    bare = timings["bare"]
    labels = {
        "prompt": ("start-up to `you> ` prompt (pty)", "<= 0.5x bare import"),
        "late prompt": ("  before: the prompt after the whole start (pty)", "figure"),
        "pg prompt": ("Postgres: start-up to `you> ` prompt (pty)", "<= 0.5x bare import"),
        "pg late prompt": ("  before: Postgres, the prompt after the whole start", "figure"),
        "piped": ("echo quit | fsagent, launch to exit", "figure (a pipe waits for all)"),
        "help": ("fsagent --help, launch to exit", "figure (lazy imports)"),
        "server": ("filesystem server, launch to initialize", "figure"),
        "mcp import": ("  its floor: python -c 'import mcp'", "figure (the SDK's __init__)"),
    }
    return [
        *(row(label, timings[name], bare, "s", goal) for name, (label, goal) in labels.items()),
        *sandbox,
        *reading.measure(),
    ]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
