"""What every benchmark shares: the result row, the table, the machine, and medians."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"

Row = dict[str, Any]


def row(name: str, ours: float, baseline: float | None, unit: str, goal: str) -> Row:
    """One line of the table; `ratio` is ours / baseline, so smaller is better for us."""
    return {
        "name": name,
        "ours": round(ours, 3),
        "baseline": None if baseline is None else round(baseline, 3),
        "unit": unit,
        "ratio": round(ours / baseline, 3) if baseline else None,
        "goal": goal,
    }


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fake_llm_module() -> Any:
    """tests/fake_llm.py, the scripted LM Studio stand-in the end-to-end tests use."""
    return tests_module("fake_llm")


def tests_module(name: str) -> Any:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    return __import__(name)


@contextmanager
def postgres_server() -> Iterator[Any]:
    """A throwaway Postgres server of the benchmark's own (tests/pg_server.py), with the
    server's default durability (fsync on), as a person would run it; `.create_database(name)`
    gives a URL."""
    pg_server = tests_module("pg_server")
    with tempfile.TemporaryDirectory(prefix="fsagent-bench-pg-") as temp:
        os.chmod(temp, 0o755)  # the server runs as the postgres user, inside
        server = pg_server.start_server(Path(temp) / "cluster", fast=False)
        try:
            yield server
        finally:
            server.stop()


def agent_command() -> list[str]:
    """The `fsagent` a person runs: the console script of this venv, or the module."""
    script = Path(sys.executable).parent / "fsagent"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys, agent; sys.exit(agent.main())"]


def agent_env() -> dict[str, str]:
    """No FSAGENT_* setting (nor DATABASE_URL) leaks in from the person running the
    benchmark."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FSAGENT_") and k != "DATABASE_URL"
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f} {unit}" if abs(value) >= 10 else f"{value:.2f} {unit}"


def print_table(rows: list[Row]) -> None:
    header = f"{'benchmark':<46} {'ours':>11} {'baseline':>11} {'ratio':>7}  goal"
    print(header)
    print("-" * len(header))
    for item in rows:
        ratio = "-" if item["ratio"] is None else f"{item['ratio']:.2f}x"
        print(
            f"{item['name']:<46} {format_value(item['ours'], item['unit']):>11} "
            f"{format_value(item['baseline'], item['unit']):>11} {ratio:>7}  {item['goal']}"
        )
