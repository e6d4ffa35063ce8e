"""The test terminal reads lines as they were written, wherever the terminal wrapped them, so
a test's assertion never depends on the length of a temp path in the line (issue: a line that
wrapped between two letters of a word read as "recorded s ettings" at one path length)."""

from __future__ import annotations

import pyte
import pytest

from pty_screen import COLUMNS, PtyScreen, _logical_lines, _Screen


def drawn(data: str) -> list[str]:
    screen = _Screen(lambda _: None)
    pyte.ByteStream(screen).feed(data.encode())
    rows = list(screen.history.top) + [screen.buffer[y] for y in range(screen.lines)]
    return [line for line in _logical_lines(rows, screen.columns) if line]


@pytest.mark.parametrize("shift", range(6))
def test_a_wrapped_line_reads_as_written_wherever_it_wraps(shift: int):
    # The wrap falls before, on and after the space between two words, as paths of other
    # lengths would put it.
    line = "x" * (COLUMNS - 3 + shift) + " recorded settings are not readable"
    assert drawn(f"first\r\n{line}\r\nlast\r\n") == ["first", line, "last"]


def test_a_line_that_exactly_fills_a_row_is_not_joined_to_the_next():
    full = "y" * COLUMNS
    assert drawn(f"{full}\r\nnext\r\n") == [full, "next"]


def test_a_wrapped_line_scrolled_into_the_history_still_reads_whole():
    line = "z" * (COLUMNS * 2 + 7)
    assert drawn(f"{line}\r\n" + "".join(f"row {n}\r\n" for n in range(60)))[0] == line


def test_a_row_erased_to_its_end_is_no_longer_joined():
    # prompt_toolkit redraws a line by erasing it: what was wrapped there is gone.
    line = "w" * (COLUMNS + 5)
    assert drawn(f"{line}\x1b[A\r\x1b[Knew\r\n\r\n") == ["new", "wwwww"]


def test_a_real_process_line_is_read_whole(tmp_path):
    words = " ".join(f"word{n}" for n in range(60))  # wraps twice at 120 columns
    screen = PtyScreen(["printf", "%s\\n", words], str(tmp_path), {})
    assert screen.close() == 0
    assert screen.screen_text() == words


def test_a_screen_erased_below_the_cursor_joins_none_of_its_rows():
    # prompt_toolkit redraws its lines by moving up and erasing the rest of the screen.
    line = "v" * (COLUMNS * 2 + 5)  # three rows, the first two wrapped
    redrawn = f"{line}\x1b[2A\r\x1b[Jnew\r\nnext\r\nlast\r\n"
    assert drawn(redrawn) == ["new", "next", "last"]
