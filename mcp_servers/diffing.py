"""Unified diffs that stop at the call's budget.

difflib can take quadratic time on unlucky inputs, and a worker thread cannot be stopped from
outside; so the matcher checks the budget each time it looks for a matching block, and the
call stops with a clear error instead of running on after its answer was given.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

from mcp_servers.budget import check_budget


class BudgetedMatcher(difflib.SequenceMatcher):
    def find_longest_match(self, *args: int) -> difflib.Match:
        check_budget()
        return super().find_longest_match(*args)


def unified_diff(
    a: Sequence[str], b: Sequence[str], from_name: str, to_name: str, context: int = 3
) -> Iterator[str]:
    """difflib.unified_diff's lines (without line ends), computed within the budget."""
    started = False
    for group in BudgetedMatcher(None, a, b).get_grouped_opcodes(context):
        if not started:
            started = True
            yield f"--- {from_name}"
            yield f"+++ {to_name}"
        first, last = group[0], group[-1]
        old_range = format_range(first[1], last[2])
        new_range = format_range(first[3], last[4])
        yield f"@@ -{old_range} +{new_range} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in b[j1:j2])


def format_range(start: int, stop: int) -> str:
    """A unified diff range, as difflib writes it."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"
