"""`fsagent serve` under load on loopback, bounded: THREADS threads each send a message that
pauses on a write, all at once; then all are approved at once. Against the LM Studio stand-in
(tests/fake_llm.py), a real `fsagent serve` process and its SQLite file.

Checked, not only timed: every answer is below 500, and every write is done exactly once (each
thread appends one line to a file of its own, which must hold that line once). The figures
are each request's latency, p50 and p95; there is no naive alternative to compare with.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import Row, agent_command, agent_env, fake_llm_module, row

THREADS = 20
TOKEN = "bench-admin-token"
READY = re.compile(rb"fsagent serve: (http://\S+/)")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def all_at_once(work: list[Any]) -> list[tuple[float, httpx.Response]]:
    """Run each callable on a thread of its own, released together; (seconds, response)."""
    start = threading.Barrier(len(work))
    results: list[tuple[float, httpx.Response]] = [None] * len(work)  # type: ignore[list-item]

    def one(index: int) -> None:
        start.wait()
        began = time.perf_counter()
        answer = work[index]()
        results[index] = (time.perf_counter() - began, answer)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return results


def approved_as_shown(item: dict[str, Any]) -> dict[str, Any]:
    """Every call of one waiting thread (an item of GET /api/admin/approvals), approved with
    the preview the list gave it."""
    return {
        "decisions": {
            call["id"]: {"type": "approve", "preview_id": call["preview_id"]}
            for call in item["calls"]
        }
    }


def start_serve(
    base_url: str, root: Path, options: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    command = [
        *agent_command(),
        *("--base-url", base_url, "--root", str(root), "--db", str(root.parent / "t.db")),
        *options,
        *("serve", "--port", "0"),
    ]
    env = agent_env() | {"FSAGENT_ADMIN_TOKEN": TOKEN}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root, env=env
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # the ready line, or EOF when it failed to start
    found = READY.search(line)
    if not found:
        process.kill()
        raise RuntimeError(f"fsagent serve did not start: {line!r}")
    return process, found.group(1).decode().rstrip("/")


def measure(threads: int = THREADS) -> list[Row]:
    fake_llm = fake_llm_module()

    def script(request: dict[str, Any]) -> Any:
        # The thread's own file, from its request: "append to log-N.txt".
        said = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
        if any(m["role"] == "tool" for m in request["messages"]):
            return fake_llm.text("Appended.")
        path = said.rsplit(" ", 1)[1]
        args = {"path": path, "content": "once\n", "mode": "append"}
        return fake_llm.reply(tool_calls=[fake_llm.tool_call("write_file", args)])

    with (
        tempfile.TemporaryDirectory(prefix="fsagent-serve-load-") as temp,
        fake_llm.FakeLLM(script, auto_route="filesystem") as llm,
    ):
        root = Path(temp) / "root"
        root.mkdir()
        process, url = start_serve(llm.base_url, root)
        try:
            with httpx.Client(timeout=300) as client:
                names = [f"load{n}" for n in range(threads)]
                paused = all_at_once([
                    lambda n=n: client.post(
                        f"{url}/api/threads/{n}/messages", json={"text": f"append to {n}.txt"}
                    )
                    for n in names
                ])  # fmt: skip
                # As a reviewer's page does: the list once, then each thread's yes bound to
                # the previews it showed (a yes without them is refused, nothing runs).
                admin = {"Authorization": f"Bearer {TOKEN}"}
                listed = client.get(f"{url}/api/admin/approvals", headers=admin).json()
                decisions = {i["thread"]: approved_as_shown(i) for i in listed["approvals"]}
                approved = all_at_once([
                    lambda n=n: client.post(
                        f"{url}/api/admin/approvals/{n}", json=decisions.get(n, {}), headers=admin
                    )
                    for n in names
                ])  # fmt: skip
        finally:
            process.terminate()
            process.wait(timeout=60)
        answers = [response for _, response in paused + approved]
        errors = [r.status_code for r in answers if r.status_code >= 500]
        if errors:
            raise AssertionError(f"5xx answers under load: {errors}")
        bad = [r.text[:200] for _, r in paused if '"status": "pending"' not in r.text]
        bad += [r.text[:200] for _, r in approved if r.status_code != 200]
        if bad:
            raise AssertionError(f"not every thread paused and was approved: {bad[:3]}")
        writes = [(root / f"{n}.txt").read_text() for n in names]
        if writes != ["once\n"] * threads:
            raise AssertionError(f"a write ran other than exactly once: {writes}")
    pause_times = [seconds for seconds, _ in paused]
    approve_times = [seconds for seconds, _ in approved]
    goal = f"{threads} at once, no 5xx, each write once"
    return [
        row(f"serve: pausing turn, p50 of {threads} at once", statistics.median(pause_times),
            None, "s", goal),
        row(f"serve: pausing turn, p95 of {threads} at once", p95(pause_times), None, "s", goal),
        row(f"serve: approval, p50 of {threads} at once", statistics.median(approve_times),
            None, "s", goal),
        row(f"serve: approval, p95 of {threads} at once", p95(approve_times), None, "s", goal),
    ]  # fmt: skip


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
