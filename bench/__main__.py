"""`make bench`: every benchmark in one run, one table, and bench/results.json.

Each section measures ours and its naive alternative side by side in the same run, so a
regression shows as a changed ratio even on a machine busier than the last one.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import (
    big_move,
    context,
    growth,
    inbox_listing,
    overhead,
    server_routes,
    serving_load,
    staging,
    startup,
    unnamed_temp,
)
from bench.common import REPO, Row, machine, print_table


def search_rows() -> list[Row]:
    """bench/search.py belongs to the filesystem server's owner and may not be here yet."""
    try:
        from bench import search
    except ImportError as error:
        print(f"note: search rows skipped: {error}", file=sys.stderr)
        return []
    return search.measure()


SECTIONS: list[tuple[str, Callable[[], list[Row]]]] = [
    ("overhead per tool call, and memory", overhead.measure),
    ("start-up", startup.measure),
    ("thread growth", growth.measure),
    ("context and prompt cache", context.measure),
    ("another server's tools: in the one set or on its route", server_routes.measure),
    ("search", search_rows),
    ("serving under load", serving_load.measure),
    ("inbox listing", inbox_listing.measure),
    ("a 300,000-file move beside a second server", big_move.measure),
    ("a small write's temp file, unnamed until checked", unnamed_temp.measure),
    ("built in the staging folder or in place", staging.measure),
]


def main() -> int:
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}")
    print(f"         {info['platform']}", flush=True)
    rows: list[Row] = []
    timings: dict[str, float] = {}
    for title, measure in SECTIONS:
        print(f"measuring {title} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        section = measure()
        timings[title] = round(time.perf_counter() - started, 1)
        rows += [{**item, "section": title} for item in section]
    print()
    print_table(rows)
    results: dict[str, Any] = {"machine": info, "seconds": timings, "rows": rows}
    (REPO / "bench" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten: bench/results.json ({sum(timings.values()):.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
