"""A changed long line is shown by its changes (core/changes/intraline.py, issue 28): pure
functions, checked on the lines a reviewer reads."""

from __future__ import annotations

from core.changes.intraline import CONTEXT, LINE_WIDTH, MAX_CHANGES, SPAN_SHOWN, shown_lines
from core.changes.preview import cut

OLD = "https://registry.npmjs.org/"
NEW = "https://npm.evil.example/x/"


def line(middle: str, width: int = 2000) -> str:
    side = (width - len(middle)) // 2
    return "a" * side + " " + middle + " " + "z" * side


def test_a_change_in_the_middle_shows_both_sides_with_its_column_and_elisions():
    shown = shown_lines(["@@ -1 +1 @@", "-" + line(OLD), "+" + line(NEW)])
    [old] = [s for s in shown if s.startswith("-")]
    [new] = [s for s in shown if s.startswith("+")]
    assert "registry.npmjs.org" in old and "npm.evil.example/x" in new
    column = line(OLD).index(OLD) + len("https://") + 1
    assert old.startswith(f"-[col {column:,}] …") and new.startswith(f"+[col {column:,}] …")
    assert old.endswith("…") and new.endswith("…")
    assert len(old) < 2 * CONTEXT + len(OLD) + 20
    assert shown[1].startswith("(long line, 2,")


def test_each_change_is_a_minus_line_then_a_plus_line_at_the_same_column():
    old, new = line("one two three four"), line("one TWO three FOUR")
    shown = shown_lines(["-" + old, "+" + new])
    pairs = list(zip(shown[1::2], shown[2::2], strict=True))
    assert pairs and all(o.startswith("-") and n.startswith("+") for o, n in pairs)
    assert all(o[1 : o.index("]")] == n[1 : n.index("]")] for o, n in pairs)
    said = " ".join(shown)
    assert "TWO" in said and "FOUR" in said and "two" in said and "four" in said


def test_a_huge_change_keeps_its_ends_and_counts_the_rest():
    old, new = line("x" * 10), line("x" * 10).replace("x" * 10, "y" * 3000)
    shown = shown_lines(["-" + old, "+" + new])
    [added] = [s for s in shown if s.startswith("+")]
    assert f"…[{3000 - SPAN_SHOWN:,} more changed chars]…" in added
    assert len(added) < SPAN_SHOWN + 4 * CONTEXT + 60


def test_past_the_most_changes_shown_the_rest_are_counted():
    words = [f"w{n:02}" for n in range(MAX_CHANGES + 5)]
    old = " ".join(word + " " + "k" * 60 for word in words)
    new = " ".join(word.upper() + " " + "k" * 60 for word in words)
    shown = shown_lines(["-" + old, "+" + new])
    assert sum(s.startswith("+") for s in shown) == MAX_CHANGES
    assert shown[-1] == "(and 5 more changes in this line)"


def test_long_lines_are_paired_with_the_line_most_like_them():
    first, second = line("alpha beta"), line("gamma delta")
    shown = shown_lines(["-" + first, "-" + second, "+" + second.replace("delta", "DELTA")])
    assert "-" + first[: LINE_WIDTH // 2] in shown[0]  # unpaired: cut, start kept
    assert any(s.startswith("+[col") and "DELTA" in s for s in shown)


def test_a_long_unchanged_line_is_cut_and_a_short_one_left_alone():
    long = " " + "q" * 1000
    assert cut([long, "-short", "+short!"]) == [
        f" {'q' * 149}… (+{1001 - LINE_WIDTH:,} chars) …{'q' * 150}",
        "-short",
        "+short!",
    ]
    assert shown_lines([long]) == [long]  # the whole diff keeps it whole


def test_the_cut_never_splits_a_changed_pair():
    lines = ["-" + line(OLD), "+" + line(NEW)] * 30
    shown = cut(lines, limit=5)
    plus = [s for s in shown if s.startswith("+[col")]
    minus = [s for s in shown if s.startswith("-[col")]
    assert len(plus) == len(minus) and plus
    assert shown[-1].startswith("… ") and "not shown (60 in all)" in shown[-1]
