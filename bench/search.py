"""Benchmark: the filesystem server's grep and search_files against GNU grep and find.

    python -m bench.search        (from the repo root)

Generates a deterministic tree (about 10,000 files, ~100 MB of text-like lines, some binary
files) in a temp folder, then times, side by side in one run, our tools called through a real
MCP stdio session (only the call is timed) and the GNU tools run on the same tree. Each figure
is the best of a few runs with a warm page cache.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
SEED = 20240607
FILES = 10_000
FOLDERS = 100
MEAN_FILE_BYTES = 10_000  # 10,000 files of ~10 KB: ~100 MB
BINARY_EVERY = 200  # one file in this many is binary
RARE_TOKEN = "XYZZY_NEEDLE"  # planted in a few files only
RARE_FILES = 25
RARE_REGEX = r"found \w+_NEEDLE"  # the same syntax for RE2 and grep -E
# Exponential for a backtracking engine on every line of words (it never matches); RE2, like
# GNU grep's DFA, runs it in linear time.
TRAP_REGEX = r"(\w+ ?)+!$"
COMMON_WORD = "error"  # appears on roughly one line in a hundred
REPEATS = 3

WORDS_TEXT = (
    "the of and to in is that for it with as was on be at by this had not are but from or have "
    "an they which one you were her all she there would their we him been has when who will more "
    "no if out so said what up its about into than them can only other new some could time these "
    "two may then do first any my now such like our over man me even most made after also did "
    "many before must through back years where much your way well down should because each just "
    "value result index buffer socket thread handler config request response parser session"
)
WORDS = WORDS_TEXT.split()


# -- the tree -------------------------------------------------------------------------------------


def text_line(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(6, 16))
    if rng.random() < 0.01:
        words.insert(rng.randrange(len(words)), COMMON_WORD)
    return " ".join(words)


def generate_tree(top: Path, seed: int = SEED) -> int:
    """Write the benchmark tree below `top`; return its size in bytes."""
    rng = random.Random(seed)
    pool = [text_line(rng) for _ in range(5000)]  # sampling lines keeps generation fast
    mean_line = sum(len(line) + 1 for line in pool) / len(pool)
    rare = set(rng.sample(range(FILES), RARE_FILES))
    total = 0
    for number in range(FILES):
        folder = top / f"pkg{number % FOLDERS:03}" / f"mod{number % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        if number % BINARY_EVERY == 0:
            data = rng.randbytes(MEAN_FILE_BYTES) + b"\x00"
            name = f"blob{number}.bin"
        else:
            target = int(rng.expovariate(1 / MEAN_FILE_BYTES)) + 200
            lines = rng.choices(pool, k=max(1, int(target / mean_line)))
            if number in rare:
                lines.insert(rng.randrange(len(lines)), f"found {RARE_TOKEN} here")
            data = ("\n".join(lines) + "\n").encode()
            name = f"file{number}.{rng.choice(['py', 'txt', 'md', 'log'])}"
        (folder / name).write_bytes(data)
        total += len(data)
    return total


# -- timing ---------------------------------------------------------------------------------------


def best_of(repeats: int, run: Callable[[], Any]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return min(timings)


def run_quietly(command: list[str] | str) -> None:
    # Output goes to a pipe, not /dev/null: GNU grep stops at the first match when it sees
    # that its output is /dev/null, which would make the baseline unfairly fast.
    subprocess.run(command, capture_output=True, shell=isinstance(command, str), check=False)


async def time_our_calls(top: Path, calls: dict[str, tuple[str, dict[str, Any]]]) -> dict:
    """Best-of timings of tool calls over one MCP session, and each call's last answer."""
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_servers.filesystem", str(top)], cwd=str(REPO)
    )
    timings: dict[str, float] = {}
    answers: dict[str, str] = {}
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for label, (tool, arguments) in calls.items():
                best = float("inf")
                for _ in range(REPEATS):
                    started = time.perf_counter()
                    result = await session.call_tool(tool, arguments)
                    best = min(best, time.perf_counter() - started)
                if result.isError:
                    raise RuntimeError(f"{tool} failed: {result.content}")
                timings[label] = best
                answers[label] = result.content[0].text if result.content else ""
    return {"timings": timings, "answers": answers}


def row(name: str, ours: float, baseline: float, goal: str) -> dict[str, Any]:
    return {
        "name": name,
        "ours": round(ours, 3),
        "baseline": round(baseline, 3),
        "unit": "s",
        "ratio": round(ours / baseline, 2) if baseline else None,
        "goal": goal,
    }


def measure() -> list[dict[str, Any]]:
    """Generate the tree, time ours and GNU's side by side, and return one row per case."""
    if shutil.which("grep") is None or shutil.which("find") is None:
        raise RuntimeError("GNU grep and find are needed for the baseline")
    with tempfile.TemporaryDirectory(prefix="fsagent-bench-") as temp:
        top = Path(temp)
        size_mb = generate_tree(top) / 1e6
        run_quietly(["grep", "-rn", RARE_TOKEN, str(top)])  # warm the page cache
        size = f"{size_mb:.0f} MB"
        calls = {
            "rare": ("grep", {"pattern": RARE_TOKEN, "path": "."}),
            "rare_i": ("grep", {"pattern": "xyzzy_needle", "path": ".", "ignore_case": True}),
            "regex": ("grep", {"pattern": RARE_REGEX, "path": "."}),
            "common": ("grep", {"pattern": COMMON_WORD, "path": ".", "max_matches": 200}),
            "trap": ("grep", {"pattern": TRAP_REGEX, "path": "."}),
            "find": ("search_files", {"path": ".", "pattern": "*.log"}),
        }
        ours = asyncio.run(time_our_calls(top, calls))["timings"]
        gnu = {
            "rare": ["grep", "-rn", RARE_TOKEN, str(top)],
            "rare_i": ["grep", "-rni", "xyzzy_needle", str(top)],
            "regex": ["grep", "-rnE", RARE_REGEX, str(top)],
            "common": f"grep -rn {COMMON_WORD} {top} | head -n 200",
            "trap": ["grep", "-rnE", TRAP_REGEX, str(top)],
            "find": ["find", str(top), "-name", "*.log"],
        }
        baseline = {
            label: best_of(REPEATS, lambda command=command: run_quietly(command))
            for label, command in gnu.items()
        }
    return [
        row(f"grep rare literal, {size}", ours["rare"], baseline["rare"], "<= 3x GNU grep"),
        row(
            f"grep rare, ignore_case, {size}",
            ours["rare_i"],
            baseline["rare_i"],
            "<= 3x GNU grep -i",
        ),
        row(f"grep rare regex, {size}", ours["regex"], baseline["regex"], "<= 3x GNU grep -E"),
        row(
            f"grep common, first 200 lines, {size}",
            ours["common"],
            baseline["common"],
            "<= 3x grep | head -200",
        ),
        row(f"grep backtracking trap, {size}", ours["trap"], baseline["trap"], "<= 3x GNU grep -E"),
        row(
            f"search_files *.log, {FILES:,} files",
            ours["find"],
            baseline["find"],
            "<= 5x find -name",
        ),
    ]


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'benchmark':<40} {'ours':>8} {'baseline':>9} {'ratio':>6}  goal"
    print(header)
    print("-" * len(header))
    for item in rows:
        print(
            f"{item['name']:<40} {item['ours']:>7.3f}{item['unit']} {item['baseline']:>8.3f}"
            f"{item['unit']} {item['ratio']:>5}x  {item['goal']}"
        )


if __name__ == "__main__":
    print_table(measure())
