"""`make bench`'s serving section runs as the bench runs it, at a small size: a real `fsagent
serve`, threads that pause on a write, each approved as its listed preview shows it. The
section checks its own work (no 5xx, every thread paused and approved, each write done once)
and raises otherwise; it broke once unseen when a yes came to need its preview's id, and the
whole `make bench` stopped at its last section."""

from __future__ import annotations

from bench import serving_load


def test_the_serving_bench_pauses_and_approves_each_thread_and_writes_once() -> None:
    rows = serving_load.measure(threads=3)
    assert [row["name"] for row in rows] == [
        "serve: pausing turn, p50 of 3 at once",
        "serve: pausing turn, p95 of 3 at once",
        "serve: approval, p50 of 3 at once",
        "serve: approval, p95 of 3 at once",
    ]
    assert all(row["ours"] > 0 for row in rows)
