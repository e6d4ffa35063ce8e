"""A diff's lines as a screen shows them: a long line is cut to stay readable, and a long
line that changed is shown by its changes.

Cut the same way, a long line and its changed version print alike: a change in the middle
of a 2,000-character config line never showed before the question (issue 28). So, within a
run of removed lines followed by added ones, a long removed line is paired with the added line
most like it (the most characters shared at the start and the end), the two are compared
token by token, and each change is shown with CONTEXT characters around it and the column it
starts at; what is left out is marked `…`. Every character outside the changes shown is the
same on both sides, in the same order, whatever the matcher finds (difflib's opcodes only
call equal what is equal). What cannot be shown whole is said, never dropped in silence: a
change longer than SPAN_SHOWN keeps its start and end (which differ on the two sides: see
`tight`) and counts the rest. Every change of a line is shown, however many: a cap once
printed "(and 19 more changes in this line)" before the question, and the one change that
mattered (a registry swapped among 30 cosmetic ones) was among those never shown (issue 41).
The count is said in the line's header; a preview is never cut inside a changed pair
(core.changes.preview.cut), so the person reads every change before a yes.

Pure: the terminal's review, `fsagent approve`, undo and the HTTP payloads show these lines.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from core.text import counted

LINE_WIDTH = 300  # a longer line is cut, or shown by its changes
CONTEXT = 24  # characters shown on each side of a change
SPAN_SHOWN = 400  # of one change, at most this much is shown: its start and its end
MAX_TOKENS = 5_000  # past this, the part between the shared start and end is one change
JUNK_FREE = 1_000_000  # token pairs a line's two sides are compared by without autojunk
MAX_PAIRINGS = 1_600  # a run with more (removed x added) candidates pairs them in order

# Words, runs of spaces, and every other character alone: a changed URL shows as its changed
# host, not as a changed line.
TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass(frozen=True)
class Span:
    """One change: old[old_start:old_end] became new[new_start:new_end]."""

    old_start: int
    old_end: int
    new_start: int
    new_end: int


def clip_line(line: str) -> str:
    """A long line that did not change against a partner keeps its start and its end
    (where a path says where it lands), the middle elided and counted."""
    if len(line) <= LINE_WIDTH:
        return line
    half = LINE_WIDTH // 2
    return f"{line[:half]}… (+{len(line) - LINE_WIDTH:,} chars) …{line[-half:]}"


def shared_start(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving (compared at C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def shared_end(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most `limit`."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def changed_spans(old: str, new: str) -> list[Span]:
    """Where `old` and `new` differ, in order; outside these spans they are the same."""
    start = shared_start(old, new)
    end = shared_end(old, new, min(len(old), len(new)) - start)
    old_middle, new_middle = old[start : len(old) - end], new[start : len(new) - end]
    if not old_middle and not new_middle:
        return []
    a, b = TOKEN.findall(old_middle), TOKEN.findall(new_middle)
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        return [Span(start, len(old) - end, start, len(new) - end)]
    at_a, at_b = offsets(a, start), offsets(b, start)
    spans = [
        tight(old, new, Span(at_a[i1], at_a[i2], at_b[j1], at_b[j2]))
        for tag, i1, i2, j1, j2 in matcher(a, b).get_opcodes()
        if tag != "equal"
    ]
    return [s for s in spans if s.old_end > s.old_start or s.new_end > s.new_start]


def matcher(a: list[str], b: list[str]) -> difflib.SequenceMatcher[str]:
    """difflib's matcher without its "popular" heuristic while that stays cheap: with it, a
    token met often (a space, `a` in "a a a ...") is never matched, so two lines that differ
    at a few places become one replacement too long to show whole, its differences elided in
    the middle. Without it the worst case is quadratic, so past JUNK_FREE pairs of tokens the
    heuristic stays (such a change is still shown by its ends and counted)."""
    return difflib.SequenceMatcher(None, a, b, autojunk=len(a) * len(b) > JUNK_FREE)


def tight(old: str, new: str, span: Span) -> Span:
    """A span without the characters its two sides share at their start and end. difflib
    (autojunk) may call a run of equal tokens part of a replacement; trimmed, a change's first
    and last characters differ on the two sides, so even a change too long to show whole
    (SPAN_SHOWN) shows a difference at its start and its end."""
    a, b = old[span.old_start : span.old_end], new[span.new_start : span.new_end]
    front = shared_start(a, b)
    back = shared_end(a, b, min(len(a), len(b)) - front)
    return Span(
        span.old_start + front, span.old_end - back, span.new_start + front, span.new_end - back
    )


def offsets(tokens: list[str], start: int) -> list[int]:
    """Where each token starts, and where the last one ends."""
    found = [start]
    for token in tokens:
        found.append(found[-1] + len(token))
    return found


def windows(spans: list[Span]) -> list[Span]:
    """Changes close enough to share their context, as one (while it stays short)."""
    merged: list[Span] = []
    for span in spans:
        last = merged[-1] if merged else None
        if (
            last is not None
            and span.old_start - last.old_end <= 2 * CONTEXT
            and max(span.old_end - last.old_start, span.new_end - last.new_start) <= SPAN_SHOWN
        ):
            merged[-1] = Span(last.old_start, span.old_end, last.new_start, span.new_end)
        else:
            merged.append(span)
    return merged


def side(sign: str, text: str, start: int, end: int) -> str:
    """One side of one change: its column, the change with CONTEXT characters around it,
    `…` where the line goes on; a change longer than SPAN_SHOWN keeps its ends, counted."""
    low, high = max(0, start - CONTEXT), min(len(text), end + CONTEXT)
    changed = text[start:end]
    if len(changed) > SPAN_SHOWN:
        half = SPAN_SHOWN // 2
        left_out = len(changed) - SPAN_SHOWN
        changed = f"{changed[:half]}…[{left_out:,} more changed chars]…{changed[-half:]}"
    before = ("…" if low else "") + text[low:start]
    after = text[end:high] + ("…" if high < len(text) else "")
    return f"{sign}[col {start + 1:,}] {before}{changed}{after}"


def changed_pair(old: str, new: str) -> list[str]:
    """A removed line and the added one paired with it (signs included) as their changes."""
    old_text, new_text = old[1:], new[1:]
    shown = windows(changed_spans(old_text, new_text))
    if not shown:
        return [clip_line(old), clip_line(new)]
    lines = [
        f"(long line, {len(old_text):,} → {len(new_text):,} characters, "
        f"{counted(len(shown), 'change')}: each change at the column it starts, with the text "
        "around it; … marks what is left out)"
    ]
    for span in shown:
        lines.append(side("-", old_text, span.old_start, span.old_end))
        lines.append(side("+", new_text, span.new_start, span.new_end))
    return lines


def pairs(removed: list[str], added: list[str]) -> dict[int, int]:
    """removed index -> added index, for each long line and the line most like it on the
    other side of its run (greedy, by the characters shared at the start and the end)."""
    # Counted before they are listed: a rewrite of 2,000 short lines has 4,000,000 pairs and
    # none long (listing them took seconds).
    long_old = [i for i, old in enumerate(removed) if len(old) > LINE_WIDTH]
    long_new = [j for j, new in enumerate(added) if len(new) > LINE_WIDTH]
    count = len(long_old) * len(added) + len(removed) * len(long_new)
    if count - len(long_old) * len(long_new) > MAX_PAIRINGS:  # a long rewrite: in order
        return {i: i for i in range(min(len(removed), len(added)))}
    candidates = sorted(
        {(i, j) for i in long_old for j in range(len(added))}
        | {(i, j) for i in range(len(removed)) for j in long_new}
    )

    def shared(pair: tuple[int, int]) -> int:
        old, new = removed[pair[0]][1:], added[pair[1]][1:]
        start = shared_start(old, new)
        return start + shared_end(old, new, min(len(old), len(new)) - start)

    paired: dict[int, int] = {}
    taken: set[int] = set()
    for i, j in sorted(candidates, key=lambda pair: (-shared(pair), pair)):
        if i not in paired and j not in taken:
            paired[i] = j
            taken.add(j)
    return paired


Block = tuple[list[str], int]  # lines to show, and how many lines of the diff they stand for


def run_blocks(removed: list[str], added: list[str], whole: bool) -> Iterator[Block]:
    """A run's lines: each removed line where it was, with its paired added line beside it
    as their changes; then the added lines no long line was paired with."""
    paired = pairs(removed, added)
    for i, old in enumerate(removed):
        if i in paired and max(len(old), len(added[paired[i]])) > LINE_WIDTH:
            yield changed_pair(old, added[paired[i]]), 2
        else:
            yield [old if whole else clip_line(old)], 1
    kept = {j for i, j in paired.items() if max(len(removed[i]), len(added[j])) > LINE_WIDTH}
    for j, new in enumerate(added):
        if j not in kept:
            yield [new if whole else clip_line(new)], 1


def blocks(lines: list[str], *, whole: bool = False) -> Iterator[Block]:
    """The lines of a preview as they are shown, a block at a time (worked out as they are
    taken, so a cut preview of a huge diff compares only what it shows). `whole` keeps long
    lines that have no partner whole (the page's whole diff); cut, they are clipped."""
    in_hunk = False
    at = 0
    while at < len(lines):
        line = lines[at]
        if line.startswith("@@"):
            in_hunk = True
        header = not in_hunk and line.startswith(("---", "+++"))
        if header or not line.startswith("-"):
            yield [line if whole else clip_line(line)], 1
            at += 1
            continue
        end = at
        while end < len(lines) and lines[end].startswith("-"):
            end += 1
        removed_end = end
        while end < len(lines) and lines[end].startswith("+"):
            end += 1
        yield from run_blocks(lines[at:removed_end], lines[removed_end:end], whole)
        at = end


def shown_lines(lines: list[str]) -> list[str]:
    """Every line of a preview as it is shown whole: changed long lines by their changes."""
    return [shown for block, _ in blocks(lines, whole=True) for shown in block]
