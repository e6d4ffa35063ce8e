"""The inbox's listing (`GET /api/admin/approvals`) with threads waiting on big diffs, against
threads waiting on one-line changes, side by side in one run (issue 43). A real `fsagent
serve` on loopback, the LM Studio stand-in, a SQLite file each.

- one 2,000-line rewrite's first listing: the thread paused, the server restarted (nothing
  kept), then listed;
- eight threads each waiting on a 2,000-line rewrite: listed after a restart (each diff worked
  out, as every listing did before), and then again once worked out (the median of REPEATS);
- eight threads each waiting on a one-line change, listed the same way: the baseline;
- the page's refresh of the eight rewrites (web/listing.py): its bytes and time when nothing
  changed (the listing's ETag: a 304) and when one new thread arrives (the etags it holds:
  that thread's entry alone), each against today's full refetch, and the diffs the server
  worked out across the arrival (its Server-Timing counts: the new thread's only).

Checked, not only timed: every listing is a 200 that lists every thread with its diff's
totals, and the diffs' first views show the rewrite's added lines.
"""

from __future__ import annotations

import re
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

    def refresh(
        self, client: httpx.Client, known: dict[str, str] | None, tag: str | None = None
    ) -> tuple[float, httpx.Response]:
        """Seconds and the answer of a listing asked as the page asks it: the etags it holds
        (None: a full refetch, as the page did before) and the listing's ETag."""
        pairs = None if known is None else ",".join(f"{k}:{v}" for k, v in known.items())
        params = None if pairs is None else {"known": pairs}
        headers = {**ADMIN, **({"If-None-Match": tag} if tag else {})}
        began = time.perf_counter()
        answer = client.get(f"{self.url}/api/admin/approvals", params=params, headers=headers)
        seconds = time.perf_counter() - began
        if answer.status_code not in (200, 304):
            raise AssertionError(f"refresh: {answer.status_code} {answer.text[:300]}")
        return seconds, answer


def held(answer: httpx.Response) -> dict[str, str]:
    """What a page holds once it drew a full answer: each thread's etag."""
    return {item["thread"]: item["etag"] for item in answer.json()["threads"]}


def counted(answer: httpx.Response, name: str) -> int:
    """One of the preview cache's counts from the listing's Server-Timing header."""
    found = re.search(rf"previews-{name};desc=(\d+)", answer.headers.get("server-timing", ""))
    if found is None:
        raise AssertionError(f"no previews-{name} in {answer.headers}")
    return int(found.group(1))


def timed(runs: list[tuple[float, httpx.Response]]) -> tuple[float, int, float]:
    """The median seconds, the body's bytes (the same answer each time) and the median of the
    server's own seconds (its Server-Timing `listing;dur`, before the body is written) of a
    few refreshes."""
    spent = [
        re.search(r"listing;dur=([\d.]+)", a.headers.get("server-timing", "")) for _, a in runs
    ]
    if not all(spent):
        raise AssertionError("a listing without its Server-Timing")
    server = statistics.median(float(found.group(1)) / 1000 for found in spent if found)
    return statistics.median(s for s, _ in runs), len(runs[-1][1].content), server


def side_by_side(
    big: Server, client: httpx.Client, known: dict[str, str], tag: str
) -> tuple[list[tuple[float, httpx.Response]], list[tuple[float, httpx.Response]]]:
    """REPEATS refreshes as the page asks them and as many full refetches, interleaved and
    each first in turn (a loaded machine's drift, and whatever the first of two pays, fall on
    both alike), after one of each unmeasured."""
    big.refresh(client, known, tag)
    big.refresh(client, None)
    ours, full = [], []
    for n in range(REPEATS * 2):
        if n % 2 == 0:
            ours.append(big.refresh(client, known, tag))
            full.append(big.refresh(client, None))
        else:
            full.append(big.refresh(client, None))
            ours.append(big.refresh(client, known, tag))
    return ours, full


def refreshes(big: Server, client: httpx.Client, threads: int) -> list[Row]:
    """The page's refresh of `threads` rewrites, nothing changed and one arriving, against a
    full refetch, each the median of REPEATS."""
    _, full = big.refresh(client, None)
    known, tag = held(full), full.headers["etag"]
    same, full_same = side_by_side(big, client, known, tag)
    if any(answer.status_code != 304 for _, answer in same):
        raise AssertionError("an unchanged listing was not a 304")
    before = counted(same[-1][1], "computed")
    big.pause(client, f"big{threads}", f"rewrite big{threads}.txt")
    arrived, full_arrived = side_by_side(big, client, known, tag)
    sent = [item["thread"] for item in arrived[-1][1].json()["approvals"]]
    if sent != [f"big{threads}"]:
        raise AssertionError(f"the arrival's refresh sent {sent}")
    worked_out = counted(arrived[-1][1], "computed") - before
    (same_time, same_bytes, same_server), (full_time, full_bytes, full_server) = (
        timed(same),
        timed(full_same),
    )
    (new_time, new_bytes, new_server), (all_time, all_bytes, all_server) = (
        timed(arrived),
        timed(full_arrived),
    )
    rewrites = f"inbox refresh: {threads} rewrites"
    return [
        row(f"{rewrites}, nothing changed", same_time, full_time, "s", "vs full refetch"),
        row(f"{rewrites}, nothing changed, server", same_server, full_server, "s", "the same work"),
        row(f"{rewrites}, nothing changed", same_bytes, full_bytes, "B", "304: no body"),
        row(f"{rewrites}, 1 new arrives", new_time, all_time, "s", "vs full refetch"),
        row(f"{rewrites}, 1 new arrives, server", new_server, all_server, "s", "the same work"),
        row(f"{rewrites}, 1 new arrives", new_bytes, all_bytes, "B", "its entry alone"),
        row(f"{rewrites}, 1 new: diffs worked out", worked_out, None, "",
            "1: the new thread's"),
    ]  # fmt: skip


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
            for n in range(threads + 1):  # one more: the thread that arrives
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
            refreshed = refreshes(big, client, threads)
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
        *refreshed,
    ]  # fmt: skip


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
