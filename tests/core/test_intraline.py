"""A changed long line is shown by its changes (core/changes/intraline.py, issue 28): pure
functions, checked on the lines a reviewer reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.changes.intraline import (
    CONTEXT,
    LINE_WIDTH,
    SPAN_SHOWN,
    changed_spans,
    shown_lines,
)
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


def test_every_change_of_a_line_is_shown_and_counted_none_left_for_later():
    # Issue 41: 30 cosmetic changes and one registry swap in a 3,000-character line; a cap
    # of 12 printed "(and 19 more changes in this line)" and the swap was never shown.
    words = [f"w{n:02}" for n in range(30)]
    old = " ".join(word + " " + "k" * 60 for word in words) + " " + OLD + " " + "q" * 600
    new = " ".join(word.upper() + " " + "k" * 60 for word in words) + " " + NEW + " " + "q" * 600
    assert len(old) > 2_500
    shown = cut(["@@ -1 +1 @@", "-" + old, "+" + new])
    assert sum(s.startswith("+[col") for s in shown) == 31
    assert "31 changes" in shown[1]
    assert any("npm.evil.example" in s for s in shown if s.startswith("+[col"))
    assert not any("more change" in s or "not shown" in s for s in shown)


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


def drawn(old: str, new: str) -> tuple[list[str], list[str]]:
    """The `-` and `+` parts drawn for a changed pair, without their column."""
    shown = shown_lines(["@@ -1 +1 @@", "-" + old, "+" + new])
    minus = [s.split("] ", 1)[1] if s.startswith("-[col") else s[1:] for s in shown if s[0] == "-"]
    plus = [s.split("] ", 1)[1] if s.startswith("+[col") else s[1:] for s in shown if s[0] == "+"]
    return minus, plus


def test_an_insert_into_repeated_text_shows_the_lines_differ():
    # The shared end is looked for only past the shared start: "ab" inserted at the end of
    # "x"*200 + "ab"*100 shares all of the old line at the start; counted again at the end,
    # nothing was left between and both lines were drawn clipped alike.
    old = "x" * 200 + "ab" * 100
    new = "x" * 200 + "ab" * 101
    minus, plus = drawn(old, new)
    assert minus != plus
    assert changed_spans(old, new)
    assert any(p.count("ab") > m.count("ab") for m, p in zip(minus, plus, strict=True))


def test_a_changed_line_that_starts_like_a_file_header_is_still_compared():
    # Inside a hunk, "--- ..." is a removed line "-- ...", not the file's header.
    old = "-- " + "c" * 400 + " secret=1 " + "d" * 400
    new = "-- " + "c" * 400 + " secret=2 " + "d" * 400
    shown = shown_lines(["--- a/f", "+++ b/f", "@@ -1 +1 @@", "-" + old, "+" + new])
    assert shown[:3] == ["--- a/f", "+++ b/f", "@@ -1 +1 @@"]
    assert any(s.startswith("-[col") and "secret=1" in s for s in shown)
    assert any(s.startswith("+[col") and "secret=2" in s for s in shown)
    added = "++ " + "c" * 400 + " token=a " + "d" * 400
    shown = shown_lines(["@@ -1 +1 @@", "-" + added.replace("token=a", "token=b"), "+" + added])
    assert any(s.startswith("+[col") and "token=a" in s for s in shown)


def test_a_change_among_repeated_tokens_is_not_elided_inside_a_long_replacement():
    # difflib's autojunk never matches a token met often ("a", " "): the whole line was one
    # replacement, drawn by its first and last 200 characters, and X -> Y in its middle
    # was only counted.
    old = "S " + "a " * 200 + "X" + " a" * 200 + " E"
    new = "T " + "a " * 200 + "Y" + " a" * 200 + " F"
    minus, plus = drawn(old, new)
    assert any("X" in m for m in minus) and any("Y" in p for p in plus)
    assert not any("more changed chars" in p for p in plus)


def apply(old: str, new: str) -> str:
    """`old` with each changed span's new text put in: `new` again, if the spans are right."""
    out, at = [], 0
    for span in changed_spans(old, new):
        out += [old[at : span.old_start], new[span.new_start : span.new_end]]
        at = span.old_end
    return "".join(out) + old[at:]


ALPHABET = st.sampled_from(list("ab xy.=/\t") + ["р", "\u00a0"])
LONG = st.text(ALPHABET, min_size=LINE_WIDTH + 1, max_size=1_500)


@st.composite
def edited(draw: st.DrawFn) -> tuple[str, str]:
    """A long line and the same line with a few random edits (inserts, deletes, swaps)."""
    old = draw(LONG)
    new = old
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(new)))
        cut_out = draw(st.integers(0, 40))
        put = draw(st.text(ALPHABET, max_size=40))
        new = new[:at] + put + new[at + cut_out :]
    return old, new


@settings(max_examples=300, deadline=None)
@given(edited())
def test_whatever_the_change_the_drawn_sides_differ_where_the_text_differs(pair):
    old, new = pair
    assert apply(old, new) == new
    minus, plus = drawn(old, new)
    if old == new:
        assert minus == plus
        return
    # Each change is drawn as a - part and a + part, and no pair of them reads alike.
    assert len(minus) == len(plus) and minus
    assert all(m != p for m, p in zip(minus, plus, strict=True))


def test_a_change_is_trimmed_to_the_characters_that_differ():
    # A long change is drawn by its two ends: trimmed, its ends are where the sides differ.
    # (Two changes: the line's shared start and end trim only the first and the last.)
    spans = changed_spans("key = secret1 or secret1.", "key = secret2 or secret2.")
    assert [(s.old_start, s.old_end, s.new_start, s.new_end) for s in spans] == [
        (12, 13, 12, 13),
        (23, 24, 23, 24),
    ]
