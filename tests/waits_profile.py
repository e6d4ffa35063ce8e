"""Where a test waits: its wall time against the CPU time it and its processes spent.

Opt-in: `FSAGENT_TEST_WAITS=FOLDER python -m pytest ...` (tests/conftest.py registers the
plugin when the variable is set). Each xdist worker (or the one process without -n) appends
one JSON line per test to `FOLDER/waits-<worker>.jsonl`:

    {"test": node id, "wall": s, "cpu": s, "load": 1, "setup": s, "call": s, "teardown": s}

(and `"failed": 1` for a test that failed: a failure's wait is often a hang guard's).

`wall` covers setup, call and teardown; `cpu` is the CPU time (user + system) the worker and
every process under it spent meanwhile: the launcher and what it forked (agents, MCP servers,
pty sessions), exec'd fsagents, Chromium and its driver. Read from /proc: a process's own
time plus that of the children it has reaped, so a process that started and ended within the
test is counted through its parent; `load` is the machine's load average (1 minute) as the
test began. Not counted: what runs outside the worker's tree (the run's Postgres server, a
daemon; the other worker).

At the end the run prints the tests with the most wall time not spent on a CPU (wall - cpu):
waiting for a deadline, a sleep, a poll, a browser, or a CPU the load gave to another
process (compare with a quiet run). `python tests/waits_profile.py FOLDER [N]` prints the
same table again from the files.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WAITS_ENV = "FSAGENT_TEST_WAITS"
_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of the children it reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # After the command: state, ppid, ... utime (14), stime, cutime, cstime (17), 1-based.
    ticks = sum(int(fields[i]) for i in range(11, 15))
    return int(fields[1]), ticks / _TICK


def tree(root: int) -> dict[int, tuple[int, float]]:
    """`root` and every process under it: pid -> (parent pid, CPU seconds, reaped children
    included)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None:
                stats[int(entry.name)] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    under, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            under[pid] = stats[pid]
        todo.extend(children.get(pid, ()))
    return under


def spent(before: dict[int, tuple[int, float]], after: dict[int, tuple[int, float]]) -> float:
    """CPU seconds the tree spent between two looks. A process gone since is counted through
    the ancestor that reaped it (its time is in that one's); one whose ancestors are all gone
    too left the tree (orphaned, reaped outside it) and is left out of both looks."""

    def reaped_inside(pid: int) -> bool:
        while pid in before:
            pid = before[pid][0]
            if pid in after:
                return True
        return False

    kept = sum(cpu for pid, (_, cpu) in before.items() if pid in after or reaped_inside(pid))
    return sum(cpu for _, cpu in after.values()) - kept


class WaitsPlugin:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.phases: dict[str, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.phases = {}
        load = os.getloadavg()[0]
        cpu, wall = tree(os.getpid()), time.monotonic()
        yield
        record = {
            "test": item.nodeid,
            "wall": round(time.monotonic() - wall, 3),
            "cpu": round(spent(cpu, tree(os.getpid())), 3),
            "load": round(load, 1),
            **{phase: round(seconds, 3) for phase, seconds in self.phases.items()},
        }
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with (self.folder / f"waits-{worker}.jsonl").open("a") as log:
            log.write(json.dumps(record) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Iterator[None]:
        self.phases[call.when] = call.duration
        made = yield
        if made.get_result().failed:  # type: ignore[attr-defined]
            self.phases["failed"] = 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return
        terminalreporter.write_sep("=", f"waiting (wall - cpu), from {self.folder}")
        for line in table(self.folder, 40):
            terminalreporter.write_line(line)


def records(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.glob("waits-*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


def table(folder: Path, top: int) -> list[str]:
    rows = records(folder)
    wall = sum(r["wall"] for r in rows)
    cpu = sum(r["cpu"] for r in rows)
    lines = [f"{len(rows)} tests: {wall:.1f} s wall, {cpu:.1f} s cpu, {wall - cpu:.1f} s waiting"]
    lines.append(f"{'wait':>7} {'wall':>7} {'cpu':>7}  test")
    for r in sorted(rows, key=lambda r: r["cpu"] - r["wall"])[:top]:
        lines.append(f"{r['wall'] - r['cpu']:7.2f} {r['wall']:7.2f} {r['cpu']:7.2f}  {r['test']}")
    return lines


def register(config: pytest.Config) -> None:
    """Called by tests/conftest.py: the plugin, when FSAGENT_TEST_WAITS names a folder."""
    folder = os.environ.get(WAITS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        config.pluginmanager.register(WaitsPlugin(Path(folder)), "fsagent-waits")


if __name__ == "__main__":
    for row in table(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40):
        print(row)
