"""What the page draws a diff with (core.changes.diff_view): totals, changed words, and a
first view of a cut rewrite that holds added lines."""

from __future__ import annotations

import difflib

from core.changes.diff_view import first_view, totals, word_spans
from core.changes.intraline import shown_lines


def diff(old: list[str], new: list[str]) -> list[str]:
    return list(difflib.unified_diff(old, new, "a/f", "b/f", lineterm=""))


def test_a_cut_rewrite_s_first_view_holds_added_lines_and_says_what_is_left_out():
    lines = diff([f"old {n}" for n in range(2000)], [f"new {n}" for n in range(2000)])
    shown = first_view(lines)
    assert "+new 0" in shown and "-old 0" in shown
    assert len(shown) == 40  # as many lines as the cut preview
    assert shown[-1] == "… 3,964 more lines not shown (4,003 in all)"
    assert totals(lines) == {"added": 2000, "removed": 2000}


def test_a_short_diff_is_its_own_first_view():
    lines = diff(["a", "b", "c"], ["a", "B", "c"])
    assert first_view(lines) == lines


def test_the_changed_word_is_marked_whole_on_both_sides():
    lines = diff(["line 1 of the notes"], ["line 1 of the papers"])
    words = word_spans(lines)
    assert [lines[3][1:][a:b] for a, b in words[3]] == ["notes"]
    assert [lines[4][1:][a:b] for a, b in words[4]] == ["papers"]


def test_a_line_changed_all_through_is_not_marked_word_by_word():
    assert word_spans(diff(["alpha beta"], ["gamma delta"])) == {}


def test_a_changed_long_line_counts_once_each_way():
    old = "x" * 400 + " host-a " + "y" * 400
    new = "x" * 400 + " host-b " + "y" * 400
    lines = shown_lines(diff([old], [new]))
    assert any(line.startswith("(long line") for line in lines)
    assert totals(lines) == {"added": 1, "removed": 1}
