"""What a page needs besides a diff's lines to draw it well: the whole diff's +N/-M totals,
which words changed within a changed line, and a first view of a cut diff that shows added
lines too (issue 32: a 2,000-line rewrite cut to its first 40 lines showed deletions only).

The lines are a preview as it is shown (core.changes.intraline): a changed long line comes
as a "(long line, ..." line and its changes, each "-[col N] ..." / "+[col N] ...".

Pure, like intraline: the words are found by its changed_spans, the one token comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from core.changes.intraline import LINE_WIDTH, changed_spans
from core.changes.marks import Flag, is_legend, legend, notes_after
from core.changes.preview import PREVIEW_LINES
from core.text import counted

FIRST_VIEW_LINES = PREVIEW_LINES  # the same screenful as the cut preview it stands in for
LONG_LINE = "(long line, "
# The lines that stand for one changed long line, after its "(long line, ..." line.
LONG_PART = re.compile(r"[-+]\[col [\d,]+\] ")
# Past this share of a line changed, the whole line is new: marking words would mark it all.
MOST_CHANGED = 0.6
WORD = re.compile(r"\w")

WordSpans = dict[int, list[list[int]]]  # line index -> [start, end) in the text after the sign


def diff_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """The lines of the diff proper, with their index: those of its hunks (after an "@@"),
    or a new file's added lines (after its "new file ..." line)."""
    started = False
    for index, line in enumerate(lines):
        if line.startswith("@@") or line.startswith("new file "):
            started = True
        elif started:
            yield index, line


def is_diff(lines: list[str]) -> bool:
    return any(line.startswith("@@") or line.startswith("new file ") for line in lines)


def totals(lines: list[str]) -> dict[str, int]:
    """Lines added and removed; a changed long line counts once each way, however many of
    its changes are shown."""
    added = removed = 0
    in_long = False
    for _, line in diff_lines(lines):
        if line.startswith(LONG_LINE):
            added, removed, in_long = added + 1, removed + 1, True
            continue
        if in_long and LONG_PART.match(line):
            continue
        in_long = False
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return {"added": added, "removed": removed}


def runs(lines: list[str]) -> Iterator[tuple[list[int], list[int]]]:
    """Each run of removed lines and the added lines right after it, as line indexes."""
    removed: list[int] = []
    added: list[int] = []
    for index, line in diff_lines(lines):
        if line.startswith("-") and not added:
            removed.append(index)
            continue
        if line.startswith("+"):
            added.append(index)
            continue
        if removed or added:
            yield removed, added
        removed, added = ([index], []) if line.startswith("-") else ([], [])
    if removed or added:
        yield removed, added


def word_spans(lines: list[str]) -> WordSpans:
    """Where a changed line differs from its counterpart: in each run, the k-th removed line
    is paired with the k-th added one (the page draws them side by side); a pair that shares
    too little is left unmarked, as is a line too long to be drawn whole."""
    found: WordSpans = {}
    for removed, added in runs(lines):
        for old_at, new_at in zip(removed, added, strict=False):
            old, new = lines[old_at][1:], lines[new_at][1:]
            if max(len(old), len(new)) > LINE_WIDTH:
                continue
            spans = changed_spans(old, new)
            changed = sum(max(s.old_end - s.old_start, s.new_end - s.new_start) for s in spans)
            if not spans or changed > MOST_CHANGED * max(len(old), len(new)):
                continue
            old_marks = [whole_words(old, s.old_start, s.old_end) for s in spans]
            new_marks = [whole_words(new, s.new_start, s.new_end) for s in spans]
            old_marks = [mark for mark in old_marks if mark[1] > mark[0]]
            new_marks = [mark for mark in new_marks if mark[1] > mark[0]]
            if old_marks:
                found[old_at] = old_marks
            if new_marks:
                found[new_at] = new_marks
    return found


def whole_words(text: str, start: int, end: int) -> list[int]:
    """A change widened to the words it cuts into: changed_spans trims the characters
    shared at a line's start and end ("notes" -> "papers" shares the "s"), but a reader
    reads the word."""
    if start == end:
        return [start, end]
    while start > 0 and WORD.match(text[start - 1]) and WORD.match(text[start]):
        start -= 1
    while end < len(text) and WORD.match(text[end]) and WORD.match(text[end - 1]):
        end += 1
    return [start, end]


def first_view(lines: list[str], limit: int = FIRST_VIEW_LINES) -> list[str]:
    """About `limit` lines of a whole diff for its first screen: a run of removed lines too
    long for what is left is shown by its first removed lines and as many of the added ones
    that replace them, so new lines are in view; then how many lines were left out."""
    picked, tail = first_view_picks(lines, limit)
    return [lines[i] for i in picked] + ([tail] if tail else [])


def first_view_page(
    lines: list[str], flags: Mapping[int, list[Flag]], tail: list[str]
) -> tuple[list[str], dict[int, list[Flag]]]:
    """A cut diff's first view as the page draws it, with its marked characters: first_view,
    then `tail` (what the cut preview says after its cut, such as the undo note) without the
    cut preview's legend, then the legend of the signs this view draws (the cut preview may
    show only removed lines where this view shows added ones with signs)."""
    shown = first_view_flags(lines, flags)
    said = [line for line in tail if not is_legend(line)]
    return first_view(lines) + said + legend(f for found in shown.values() for f in found), shown


def first_view_flags(
    lines: list[str], flags: Mapping[int, list[Flag]], limit: int = FIRST_VIEW_LINES
) -> dict[int, list[Flag]]:
    """The marked characters (core.changes.marks) of first_view's lines, by their index there."""
    picked, _ = first_view_picks(lines, limit)
    return {at: flags[i] for at, i in enumerate(picked) if i in flags}


def first_view_picks(lines: list[str], limit: int) -> tuple[list[int], str | None]:
    """first_view as the indexes of the lines it shows, and its last line (None: all shown)."""
    shown: list[int] = []
    used = 0
    at = 0
    for removed, added in runs(lines):
        start = (removed or added)[0]
        before = list(range(at, start))
        if len(shown) + len(before) >= limit:
            room = max(0, limit - len(shown))
            shown += before[:room]
            used += room
            break
        shown += before
        used += len(before)
        room = limit - len(shown)
        if len(removed) + len(added) <= room:
            shown += removed + added
            used += len(removed) + len(added)
            at = (added or removed)[-1] + 1
            continue
        half = max(1, room // 2) if removed and added else room
        # The run's notes (core.changes.marks: its look-alikes and unusual characters, a line
        # ending that changed) come after all of it; the part shown keeps them, so a warning
        # is on the first screen with the letters it names.
        taken = removed[:half] + added[:half] + notes_after(lines, (added or removed)[-1])
        shown += taken
        used += len(taken)
        break
    else:
        shown += list(range(at, len(lines)))
        used += len(lines) - at
    if used < len(lines):
        more = counted(len(lines) - used, "more line")
        return shown, f"… {more} not shown ({len(lines):,} in all)"
    return shown, None
