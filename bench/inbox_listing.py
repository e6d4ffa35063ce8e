"""The inbox's listing (`GET /api/admin/approvals`) with threads waiting on big diffs, against
threads waiting on one-line changes, side by side in one run (issue 43). A real `fsagent
serve` on loopback, the LM Studio stand-in, a SQLite file each.

- one 2,000-line rewrite's first listing: the thread paused, the server restarted (nothing
  kept), then listed;
- eight threads each waiting on a 2,000-line rewrite: listed after a restart (each diff worked
  out, as every listing did before), and then again once worked out (the median of REPEATS);
- eight threads each waiting on a one-line change, listed the same way: the baseline.

Checked, not only timed: every listing is a 200 that lists every thread with its diff's
totals, and the diffs' first views show the rewrite's added lines.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import Row, fake_llm_module, row
from bench.serving_load import TOKEN, start_serve

THREADS = 8
LINES = 2000
REPEATS = 5
OLD = "".join(f"old line {n}\n" for n in range(LINES))
NEW = "".join(f"new line {n}\n" for n in range(LINES))
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
# The rewrite's content comes in the model's reply: room for it.
SERVE_ARGS = ("--max-tokens", "30000")


class Server:
    """One `fsagent serve` on a root of its own, restartable (its threads stay in its file)."""

    def __init__(self, base_url: str, root: Path) -> None:
        self.base_url, self.root = base_url, root
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.start()

    def start(self) -> None:
        self.process, self.url = start_serve(self.base_url, self.root, SERVE_ARGS)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self, client: httpx.Client, thread: str, text: str) -> None:
        said = client.post(f"{self.url}/api/threads/{thread}/messages", json={"text": text})
        if '"status": "pending"' not in said.text:
            raise AssertionError(f"{thread} did not pause: {said.text[-300:]}")

    def listing(self, client: httpx.Client, threads: int) -> float:
        """Seconds for one listing, checked."""
        began = time.perf_counter()
        answer = client.get(f"{self.url}/api/admin/approvals", headers=ADMIN)
        seconds = time.perf_counter() - began
        listed = answer.json()["approvals"] if answer.status_code == 200 else []
        calls = [item["calls"][0] for item in listed]
        if len(calls) != threads or not all("diff_totals" in call for call in calls):
            raise AssertionError(f"listing: {answer.status_code} {answer.text[:300]}")
        firsts = [call["preview_first"] for call in calls if "preview_first" in call]
        if not all("+new line 0" in first for first in firsts):
            raise AssertionError("a rewrite's first view shows no added line")
        return seconds


def script(fake_llm: Any) -> Any:
    def answer(request: dict[str, Any]) -> Any:
        said = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
        if any(m["role"] == "tool" for m in request["messages"]):
            return fake_llm.text("Done.")
        path = said.rsplit(" ", 1)[1]
        content = NEW if path.startswith("big") else "two\n"
        call = fake_llm.tool_call("write_file", {"path": path, "content": content})
        return fake_llm.reply(tool_calls=[call])

    return answer


def measure(threads: int = THREADS) -> list[Row]:
    fake_llm = fake_llm_module()
    with (
        tempfile.TemporaryDirectory(prefix="fsagent-inbox-bench-") as temp,
        fake_llm.FakeLLM(script(fake_llm), auto_route="filesystem") as llm,
        httpx.Client(timeout=600) as client,
    ):
        servers = []
        for kind in ("big", "small"):
            root = Path(temp) / kind / "root"
            root.mkdir(parents=True)
            for n in range(threads):
                (root / f"{kind}{n}.txt").write_text(OLD if kind == "big" else "one\n")
            servers.append(Server(llm.base_url, root))
        big, small = servers
        try:
            big.pause(client, "big0", "rewrite big0.txt")
            big.restart()
            first_one = big.listing(client, 1)
            for n in range(1, threads):
                big.pause(client, f"big{n}", f"rewrite big{n}.txt")
            big.restart()
            big_cold = big.listing(client, threads)
            big_kept = statistics.median(big.listing(client, threads) for _ in range(REPEATS))
            for n in range(threads):
                small.pause(client, f"small{n}", f"change small{n}.txt")
            small.restart()
            small_cold = small.listing(client, threads)
            small_kept = statistics.median(small.listing(client, threads) for _ in range(REPEATS))
        finally:
            for server in servers:
                server.stop()
    rewrites = f"{threads} x {LINES:,}-line rewrite"
    return [
        row(f"inbox: 1 x {LINES:,}-line rewrite, 1st listing", first_one, None, "s",
            "<= 0.15 s"),
        row(f"inbox: {rewrites}, 1st listing", big_cold, small_cold, "s",
            f"vs {threads} one-line, 1st listing"),
        row(f"inbox: {rewrites}, listed again", big_kept, small_kept, "s",
            f"<= 1.5x {threads} one-line changes"),
        row(f"inbox: {threads} x one-line change, listed again", small_kept, None, "s", "-"),
    ]  # fmt: skip


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
