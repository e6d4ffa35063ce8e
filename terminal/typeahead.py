"""An answer counts only if it was typed after its question was on the screen (issue 41).

Keys a person types while fsagent starts, while the model streams or while a preview is
worked out wait in the terminal's input; the next read takes them as the answer to whatever
it asks, a question the person had not seen yet. So before every question that decides
something (an approval, `fsagent approve`'s yes, an undo's, a model's question, the other
roots' question, `threads rm`'s) whatever waits is read and dropped, and the screen says how
many keys were: `(2 keys typed before this question were ignored)`.

What waits is in two places: the kernel's input queue of the terminal (the keys no one read
yet, a partial line in canonical mode too) and prompt_toolkit's typeahead (keys its last
prompt read past the Enter that ended it; the line editor passes those in as `held`).

A prompt for the model (`you>`) never comes here: a request typed ahead is not a decision.
Neither does piped input, which is read line by line, each line the answer to the next
question: that is what a regression run or a script relies on.
"""

from __future__ import annotations

import os
import re
import termios
from collections.abc import Callable
from typing import TextIO

# A terminal's answer to a cursor position request (prompt_toolkit asks when it draws): in
# the input, but not typed by anyone.
POSITION_REPORT = re.compile(r"\x1b\[\d+;\d+R")
# A bracketed paste's text between its marks; an escape sequence (a key such as an arrow).
PASTE = re.compile(r"\x1b\[200~(.*?)(?:\x1b\[201~|\Z)", re.DOTALL)
SEQUENCE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)


def counted_keys(text: str) -> int:
    """How many keys `text` (what a terminal sent) stands for: an escape sequence is one
    key, a paste one per character pasted, a position report none."""
    text = POSITION_REPORT.sub("", text)
    pasted = 0

    def paste(match: re.Match[str]) -> str:
        nonlocal pasted
        pasted += len(match.group(1))
        return ""

    text = PASTE.sub(paste, text)
    return pasted + len(SEQUENCE.sub("\x1b", text))


def read_waiting(fd: int) -> bytes:
    """Everything waiting in the terminal's input, read without waiting for more: canonical
    mode is left for the read, so a line not yet ended is taken too, and echo, so nothing
    that arrives meanwhile is drawn. The terminal's settings are put back as they were."""
    before = termios.tcgetattr(fd)
    reading = list(before)
    reading[3] = before[3] & ~(termios.ICANON | termios.ECHO)
    special = list(before[6])
    special[termios.VMIN] = 0  # return at once with what there is, or nothing
    special[termios.VTIME] = 0
    reading[6] = special
    data = b""
    try:
        termios.tcsetattr(fd, termios.TCSANOW, reading)
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:  # prompt_toolkit may have left the descriptor non-blocking
                break
            if not chunk:
                break
            data += chunk
        termios.tcflush(fd, termios.TCIFLUSH)  # and whatever came between the reads
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, before)
    return data


def discard_typed_ahead(stdin: TextIO, held: Callable[[], int] | None = None) -> int:
    """Drop the keys typed before the question that is about to be asked; how many there
    were. Input that is not a terminal (a pipe, a file, the empty input of a piped `-p`) is
    left alone: its lines are the answers, in order."""
    if not stdin.isatty():
        return 0
    waiting = read_waiting(stdin.fileno())
    return (held() if held is not None else 0) + counted_keys(waiting.decode("utf-8", "replace"))


def ignored_line(count: int) -> str:
    keys = "1 key" if count == 1 else f"{count} keys"
    return f"({keys} typed before this question {'was' if count == 1 else 'were'} ignored)"


def before_question(
    stdin: TextIO, say: Callable[[str], None], held: Callable[[], int] | None = None
) -> None:
    """The one step every deciding question takes before it is asked: what was typed ahead
    dropped, and said when there was any."""
    count = discard_typed_ahead(stdin, held)
    if count:
        say(ignored_line(count))
