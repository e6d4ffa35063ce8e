"""Unified diffs in bounded time and memory.

difflib holds every line of both sides and can take quadratic time: on two files of a million
short lines it took the server past half a gigabyte. So the lines both sides share at the
start and at the end are found first, by comparing blocks of text (C speed, no lines made),
and only the part between them, with its context, goes to difflib, whose matcher checks the
call's budget as it works. A part of more than MAX_DIFF_LINES lines on either side is not
diffed: `DiffTooLarge` says where it is instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

from mcp_servers.budget import check_budget

MAX_DIFF_LINES = 50_000  # lines of the changed part of either side that difflib may take
CONTEXT = 3  # lines of context around each change
NO_NEWLINE = "\\ No newline at end of file"  # after a last line that lacks one, as diff writes it
STEP = 64 * 1024  # characters compared at a time while looking for the shared start and end


class DiffTooLarge(Exception):
    """The changed part is too long to diff; `first` is its first line (1-based)."""

    def __init__(self, first: int, old_lines: int, new_lines: int) -> None:
        super().__init__(first, old_lines, new_lines)
        self.first, self.old_lines, self.new_lines = first, old_lines, new_lines

    def describe(self) -> str:
        return (
            f"lines {self.first:,}.. differ: {self.old_lines:,} lines would become "
            f"{self.new_lines:,}, too many to diff (over {MAX_DIFF_LINES:,})"
        )


class BudgetedMatcher(difflib.SequenceMatcher[str]):
    """A matcher that checks the call's budget at each of its searches (a diff of many
    lines can search long)."""

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        check_budget()
        return super().find_longest_match(alo, ahi, blo, bhi)


def shared_start(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    at, end = 0, min(len(a), len(b))
    while at < end and a[at : at + STEP] == b[at : at + STEP]:
        check_budget()
        at += STEP
    at = min(at, end)
    while at < end and a[at] == b[at]:  # within one step now: at most STEP characters
        at += 1
    return at


def shared_end(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix of `a` and `b`, at most `limit`."""
    size = 0
    while (
        size + STEP <= limit
        and a[len(a) - size - STEP : len(a) - size] == b[len(b) - size - STEP : len(b) - size]
    ):
        check_budget()
        size += STEP
    while size < limit and a[len(a) - size - 1] == b[len(b) - size - 1]:
        size += 1
    return size


def back_lines(text: str, at: int, lines: int) -> int:
    """The start of the line `lines` lines before the one holding `at`."""
    start = text.rfind("\n", 0, at) + 1
    for _ in range(lines):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def forward_lines(text: str, at: int, lines: int) -> int:
    """Just after the end of the line `lines` lines after the one ending at or after `at`."""
    end = at
    for _ in range(lines + 1):
        found = text.find("\n", end)
        if found == -1:
            return len(text)
        end = found + 1
    return end


def changed_part(old: str, new: str) -> tuple[int, int, int, int]:
    """(start, old end, new end, first line): the lines, with context, that hold every
    difference; start is the same offset in both texts."""
    start = shared_start(old, new)
    end_size = shared_end(old, new, min(len(old), len(new)) - start)
    start = back_lines(old, start, CONTEXT)
    old_end = forward_lines(old, len(old) - end_size, CONTEXT)
    new_end = forward_lines(new, len(new) - end_size, CONTEXT)
    # The shared end must hold whole lines on both sides, so it is cut at the same place.
    tail = min(len(old) - old_end, len(new) - new_end)
    return start, len(old) - tail, len(new) - tail, old.count("\n", 0, start) + 1


def split_lines(text: str) -> list[str]:
    """`text` as lines split at "\n" only, each keeping its "\n". str.splitlines also breaks
    at "\r", "\x0b", "\x0c", "\x1c"-"\x1e", "\x85", U+2028 and U+2029 and drops the ends, so
    CRLF -> LF, or a newline -> a form feed, diffed as "(no change)" (issue 41)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def unified_diff(old: str, new: str, from_name: str, to_name: str) -> Iterator[str]:
    """The unified diff of two texts, as difflib writes it, worked out on the changed part
    only. Lines are compared with their ends, so a changed ending is a changed line; each is
    given without its "\n" (a CRLF line keeps its "\r"), and when one side ends without a
    newline and the other with one, NO_NEWLINE follows the line that lacks it. Raises
    DiffTooLarge."""
    start, old_end, new_end, first = changed_part(old, new)
    old_lines = old.count("\n", start, old_end) + (not old.endswith("\n", start, old_end))
    new_lines = new.count("\n", start, new_end) + (not new.endswith("\n", start, new_end))
    if old_lines > MAX_DIFF_LINES or new_lines > MAX_DIFF_LINES:  # counted before any split
        raise DiffTooLarge(first, old_lines, new_lines)
    a = split_lines(old[start:old_end])
    b = split_lines(new[start:new_end])
    marked = old.endswith("\n") != new.endswith("\n")
    return unified_lines(a, b, from_name, to_name, first - 1, marked)


def unified_lines(
    a: Sequence[str],
    b: Sequence[str],
    from_name: str,
    to_name: str,
    skipped: int,
    marked: bool = False,
) -> Iterator[str]:
    """difflib.unified_diff's lines for `a` and `b` (each with its "\n", but the last one
    maybe), which start after `skipped` shared lines; NO_NEWLINE after a line without one
    when `marked`."""

    def out(sign: str, lines: Sequence[str]) -> Iterator[str]:
        for line in lines:
            if line.endswith("\n"):
                yield sign + line[:-1]
            else:
                yield sign + line
                if marked:
                    yield NO_NEWLINE

    started = False
    for group in BudgetedMatcher(None, a, b).get_grouped_opcodes(CONTEXT):
        if not started:
            started = True
            yield f"--- {from_name}"
            yield f"+++ {to_name}"
        first, last = group[0], group[-1]
        old_range = format_range(skipped + first[1], skipped + last[2])
        new_range = format_range(skipped + first[3], skipped + last[4])
        yield f"@@ -{old_range} +{new_range} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from out(" ", a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from out("-", a[i1:i2])
            if tag in ("replace", "insert"):
                yield from out("+", b[j1:j2])


def format_range(start: int, stop: int) -> str:
    """A unified diff range, as difflib writes it."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"
