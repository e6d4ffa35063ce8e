"""What a changed span holds that a screen cannot show by itself, drawn (core/changes/marks.py,
issue 41): whitespace as signs, look-alikes and odd characters named, line endings shown.
Pure functions, checked on the lines a reviewer reads and the flags the inbox gets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.changes.binding import NO_PLAN, shown
from core.changes.diff_view import first_view, first_view_flags, first_view_page
from core.changes.intraline import shown_lines
from core.changes.marks import is_legend, mark
from core.changes.preview import cut, new_file_lines

HUNK = "@@ -1 +1 @@"


def drawn(old: str, new: str) -> list[str]:
    return mark([HUNK, "-" + old, "+" + new]).lines


def test_a_trailing_space_is_drawn_and_the_legend_says_what_the_sign_is():
    assert drawn("x = 1", "x = 1 ") == [HUNK, "-x = 1", "+x = 1·", "(· a space)"]


def test_a_trailing_space_that_came_with_other_text_is_drawn():
    assert drawn("x = 1", "x = 2 ")[1:3] == ["-x = 1", "+x = 2·"]


def test_a_tab_for_spaces_is_drawn_on_both_sides():
    lines = drawn("\tx = 1", "    x = 1")
    assert lines[1:3] == ["-→x = 1", "+····x = 1"]
    assert lines[-1] == "(· a space, → a tab)"


def test_a_no_break_space_is_drawn_and_named():
    lines = drawn("rm -rf ./build", "rm -rf\u00a0./build")
    assert lines[2] == "+rm -rf⍽./build"
    assert "⚠ unusual characters (+): U+00A0 NO-BREAK SPACE" in lines


def test_spaces_that_did_not_change_are_left_alone():
    assert drawn("a b c", "a b d") == [HUNK, "-a b c", "+a b d"]


def test_latin_letters_swapped_for_cyrillic_ones_are_named():
    lines = drawn("index = https://pypi.org/simple", "index = https://руpi.org/simple")
    assert lines[3] == (
        "⚠ look-alike characters (+): р U+0440 CYRILLIC SMALL LETTER ER, "
        "у U+0443 CYRILLIC SMALL LETTER U"
    )


def test_a_word_made_wholly_of_look_alikes_is_named():
    lines = drawn("run ops now", "run орѕ now")
    assert lines[3].startswith("⚠ look-alike characters (+): о U+043E CYRILLIC SMALL LETTER O")
    assert "ѕ U+0455 CYRILLIC SMALL LETTER DZE" in lines[3]


def test_fullwidth_letters_pass_for_ascii_and_are_named():
    lines = drawn("host = pypi", "host = ｐｙｐｉ")
    assert any(line.startswith("⚠ look-alike") and "FULLWIDTH" in line for line in lines)


def test_words_of_another_script_and_accents_are_not_flagged():
    assert drawn("привет мир", "пока мир") == [HUNK, "-привет мир", "+пока мир"]
    assert drawn("naive cafe", "naïve café") == [HUNK, "-naive cafe", "+naïve café"]


def test_a_crlf_to_lf_change_is_shown_never_as_no_change():
    lines = mark(["@@ -1,2 +1,2 @@", "-one\r", "-two\r", "+one", "+two"]).lines
    assert lines == [
        "@@ -1,2 +1,2 @@",
        "-one␍",
        "-two␍",
        "+one",
        "+two",
        "(line ending CRLF -> LF)",
        "(␍ a carriage return: the line ends CRLF)",
    ]


def test_an_ending_both_sides_share_is_not_drawn():
    lines = mark(["@@ -1,2 +1,2 @@", " same\r", "-one\r", "+uno\r"]).lines
    assert lines == ["@@ -1,2 +1,2 @@", " same", "-one", "+uno"]


def test_a_form_feed_for_a_newline_is_named():
    lines = mark(["@@ -1,2 +1 @@", "-one", "-two", "+one\x0ctwo"]).lines
    assert "⚠ unusual characters (+): U+000C FORM FEED" in lines


def test_a_sign_that_is_in_the_file_does_not_draw_two_lines_alike():
    # A real middle dot where the other side has a trailing space: drawn with signs, both
    # lines would read "x·"; so neither is drawn with signs.
    lines = drawn("x·", "x ")
    assert lines[1] != lines[2][:1].replace("+", "-") + lines[2][1:]
    assert lines[1:3] == ["-x·", "+x "]


def test_a_look_alike_past_the_start_of_a_long_line_is_named():
    old = "k" * 1000 + " url = https://pypi.org/simple " + "z" * 1000
    new = old.replace("pypi", "руpi")
    lines = mark(cut(["--- a/f", "+++ b/f", HUNK, "-" + old, "+" + new])).lines
    [plus] = [line for line in lines if line.startswith("+[col")]
    assert "руpi" in plus
    assert any(line.startswith("⚠ look-alike characters (+): р U+0440") for line in lines)


def test_a_new_file_keeps_its_crlf_and_form_feeds_in_their_lines():
    lines = mark(new_file_lines("f.txt", "one\r\ntwo\x0cthree\n")).lines
    assert lines[:3] == ["new file f.txt, 2 lines, 15 bytes:", "+one␍", "+two\x0cthree"]


def test_flags_give_each_character_where_it_is_in_code_points_and_utf16_units():
    found = mark([HUNK, "-😀😀 x = 1", "+😀😀 x = 1 "]).flags
    [space] = found[2]
    assert (space.at, space.at16, space.code, space.kind, space.shown) == (
        8,
        10,
        "U+0020",
        "space",
        "·",
    )
    assert space.data()["name"] == "SPACE"


def test_flags_follow_their_lines_when_no_plan_is_said_first():
    marked = mark([HUNK, "-a", "+a "])
    call = {"id": "c", "name": "write_file", "args": {"path": "f"}}
    preview = shown("t", call, None, marked.lines, marked.flags)
    assert preview.lines[0] == NO_PLAN
    assert list(preview.flags) == [3] and preview.lines[3] == "+a·"
    assert preview.flag_data()["3"][0]["kind"] == "space"


def test_the_first_view_of_a_cut_diff_keeps_its_flags_on_its_lines():
    lines = ["--- a/f", "+++ b/f", "@@ -1,100 +1,100 @@"]
    lines += [f"-line {n}" for n in range(100)] + [f"+line {n} " for n in range(100)]
    marked = mark(shown_lines(lines))
    first = first_view(marked.lines)
    flags = first_view_flags(marked.lines, marked.flags)
    assert flags and all(first[at].endswith("·") for at in flags)
    assert all(first[at].startswith("+") for at in flags)


def test_the_first_view_of_a_cut_run_keeps_the_run_s_warning():
    """A 100-line rewrite with a look-alike in its first line: its first view shows only the
    start of the run, and the warning said after the whole run comes with it."""
    lines = ["--- a/f", "+++ b/f", "@@ -1,100 +1,100 @@"]
    lines += [f"-url {n} pypi" for n in range(100)]
    lines += [f"+url {n} {'руpi' if n == 0 else 'pipy'}" for n in range(100)]
    marked = mark(shown_lines(lines))
    first = first_view(marked.lines)
    warning = "⚠ look-alike characters (+): р U+0440 CYRILLIC SMALL LETTER ER, у U+0443"
    at = next(i for i, line in enumerate(first) if line.startswith(warning))
    assert first[at - 1].startswith("+url ") and first[at + 1].startswith("… ")
    assert (
        first[at + 1]
        == f"… {len(marked.lines) - at - 1} more lines not shown ({len(marked.lines):,} in all)"
    )
    assert list(first_view_flags(marked.lines, marked.flags)) == [first.index("+url 0 руpi")]


def test_the_first_view_of_a_cut_diff_has_the_legend_of_the_signs_it_draws():
    """A 100-line rewrite adding a trailing space to each line: the cut preview shows removed
    lines only (no sign, no legend), its first view added ones with `·`, and their legend."""
    lines = ["--- a/f", "+++ b/f", "@@ -1,100 +1,100 @@"]
    lines += [f"-line {n}" for n in range(100)] + [f"+line {n} " for n in range(100)]
    whole = mark(shown_lines(lines))
    cut_view = mark(cut(lines)).lines
    assert not any(is_legend(line) for line in cut_view)
    undo = "(undo: the file is kept as it was)"
    # What the cut preview says after its cut: the undo note (and a legend, were one there).
    first, flags = first_view_page(whole.lines, whole.flags, [undo, "(→ a tab)"])
    assert first[-3].startswith("… ") and first[-2:] == [undo, "(· a space)"]
    assert flags and all(first[at].endswith("·") for at in flags)
    assert first_view_page(whole.lines, {}, [undo, "(→ a tab)"])[0][-1] == undo  # no sign drawn


SHORT = st.text(st.sampled_from(list("ab p.") + ["\t", "\u00a0", "·", "\r", "р", "→"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(SHORT, SHORT)
def test_two_lines_that_differ_are_never_drawn_alike(old, new):
    lines = mark([HUNK, "-" + old, "+" + new]).lines
    minus, plus = lines[1][1:], lines[2][1:]
    assert (minus == plus) == (old == new)


def test_a_word_that_mixes_scripts_is_named_even_without_a_look_alike_in_it():
    # λ passes for no ASCII letter, but a Latin word with a Greek letter in it is no word.
    lines = drawn("set value", "set vaλue")
    assert "⚠ look-alike characters (+): λ U+03BB GREEK SMALL LETTER LAMDA" in lines


def test_a_carriage_return_drawn_without_its_sign_is_still_not_dropped():
    # A real ␍ on one side and a CRLF ending on the other would draw alike; drawn without
    # signs, the ending stays in the line (written out as \x0d when printed).
    assert drawn("a␍", "a\r")[1:3] == ["-a␍", "+a\r"]


def test_notes_on_a_long_line_come_after_all_of_its_parts():
    # The page reads a long line's parts as one line: a note between them would end it.
    old = "k" * 500 + " https://pypi.org/ " + "m" * 500 + " tail " + "z" * 500
    new = old.replace("pypi", "руpi").replace("tail", "TAIL")
    lines = mark(cut([HUNK, "-" + old, "+" + new])).lines
    parts = [i for i, line in enumerate(lines) if line[:1] in "-+" and "[col" in line]
    assert len(parts) == 4 and parts == list(range(parts[0], parts[0] + 4))
    assert lines[parts[-1] + 1].startswith("⚠ look-alike characters (+): р U+0440")


def test_a_bidi_override_and_a_zero_width_space_are_named():
    lines = drawn(
        "mirror = https://good.example/pkg", "mirror = https://\u202egood.exa\u200bmple/pkg"
    )
    assert (
        "⚠ unusual characters (+): U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE" in lines
    )
