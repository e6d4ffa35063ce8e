"""A long thread of prose turns against a real llama.cpp server, by hand (issue 30): does
every turn get an answer on a small context, also after a restart? Not part of `make bench`:
the tests cannot download a server; the stand-in tests in `make test` check the same.

    bash ../shared/real-llm/start.sh 18080 2048
    .venv/bin/python -m bench.real_thread http://127.0.0.1:18080 --turns 50 --restart 10

Runs the real CLI in a pipe: one process for `--turns` turns of `--words`-word paragraphs on
one thread, then a second process on the same thread file for `--restart` more. Prints, for
each process: turns answered, error lines, compactions, and from the server's log (its
`print_timing` lines; REAL_LLM_DIR/server.log) the prompt tokens it processed per request
against the tokens the conversation grew by (the person's words and the replies, counted by
the server's /tokenize).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
LOG = Path(os.environ.get("REAL_LLM_DIR", "/tmp/real-llm")) / "server.log"
TEXT = (
    "the shed needs a new roof before winter and the garden path floods after rain so we "
    "should dig a drain near the gate plant garlic in october and move the compost heap "
    "away from the fence the neighbours asked about the hedge which has grown over their "
    "side again while the apple tree gave a poor crop this year"
)
PROCESSED = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
TOTAL = re.compile(r"stop processing: n_tokens = (\d+)")


def paragraph(words: int, seed: int) -> str:
    pick, vocabulary = random.Random(seed).choice, TEXT.split()
    return " ".join(pick(vocabulary) for _ in range(words)) + "."


def count(base: str, text: str) -> int:
    reply = httpx.post(f"{base}/tokenize", json={"content": text}, timeout=60)
    return len(reply.json()["tokens"])


def run(base: str, db: Path, root: Path, prompts: list[str]) -> dict[str, object]:
    start = LOG.stat().st_size if LOG.exists() else 0
    stdin = "".join(p + "\n" for p in prompts)
    command = [sys.executable, str(REPO / "agent.py"), "--base-url", f"{base}/v1"]
    command += ["--db", str(db), "--root", str(root), "--thread", "long", "--approve", "no"]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=root)
    out = done.stdout
    with LOG.open() as log:
        log.seek(start)
        server = log.read()
    answers = [line[len("agent> ") :] for line in out.splitlines() if line.startswith("agent> ")]
    new = sum(count(base, p) for p in prompts) + sum(count(base, a) for a in answers)
    processed = [int(n) for n in PROCESSED.findall(server)]
    return {
        "exit": done.returncode,
        "turns": len(prompts),
        "answered": len(answers),
        "errors": [line for line in (out + done.stderr).splitlines() if "error:" in line],
        "compactions": sum("summarised" in line for line in out.splitlines()),
        "requests": len(processed),
        "processed tokens": sum(processed),
        "new tokens": new,
        "largest request": max((int(n) for n in TOTAL.findall(server)), default=0),
        "stdout": out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the server, e.g. http://127.0.0.1:18080")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--restart", type=int, default=10, help="turns after a restart")
    parser.add_argument("--words", type=int, default=150)
    parser.add_argument("--keep", help="a folder to keep the thread file and the output in")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="fsagent-real-thread-"))
    (folder / "root").mkdir(parents=True, exist_ok=True)
    db = folder / "threads.db"
    prompts = [paragraph(args.words, seed) for seed in range(args.turns + args.restart)]
    for name, part in (("first", prompts[: args.turns]), ("restart", prompts[args.turns :])):
        if not part:
            continue
        result = run(args.base, db, folder / "root", part)
        (folder / f"{name}.out").write_text(str(result.pop("stdout")))
        ratio = result["processed tokens"] / max(1, result["new tokens"])  # type: ignore[operator]
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in result.items() if k != "errors"))
        print(f"  processed / new tokens: {ratio:.2f}; errors: {result['errors'] or 'none'}")
    print(f"(thread file and output in {folder})")


if __name__ == "__main__":
    main()
