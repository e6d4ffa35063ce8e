"""grep's engine: RE2 patterns (linear time: no pattern can hang the server), files streamed
a block at a time (memory is bounded by the block, not by the file), hit lines collected
within the answer cap.

Patterns use RE2 syntax (https://github.com/google/re2/wiki/Syntax): Python's and Perl's
syntax less backreferences, lookaround and possessive or atomic groups. `^` and `$` match at
line boundaries, and no match spans a newline (`\\s` and `[^x]` do not match one), as with
`grep`.

A file is searched a block (1 MiB) at a time, cut at the last newline; a line longer than a
block is searched in pieces of one, so a match across two pieces of such a line is missed, and
it is shown by its first 400 characters. A NUL byte anywhere makes the file binary: skipped.
"""

from __future__ import annotations

import os
import re

import re2
from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import CappedLines, utf8_len
from mcp_servers.budget import check_budget
from mcp_servers.fileio import BLOCK
from mcp_servers.lines import lines_from
from mcp_servers.must_contain import must_contain

MAX_LINE_SHOWN = 400  # characters of one grep line
HEAD_BYTES = 4 * MAX_LINE_SHOWN  # bytes kept of a line to show it (4 per character at most)
NO_LOOKAROUND_HINT = "RE2 syntax: no backreferences or lookaround"

Hit = tuple[int, bytes, int | None]  # line number, its first bytes, its length (None: long)

# Escapes that can never match a newline: \w \d \b \B \A \z \S \r \f \v, and an escaped
# ASCII punctuation character. (Not \t: a range such as [\t-z] holds the newline.)
NEWLINE_FREE_ESCAPE = re.compile(r"\\[wdbBAzSrfv]|\\[!-/:-@\[-`{-~]")


def compile_pattern(pattern: str, ignore_case: bool) -> re2._Regexp:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    # No match may span lines, as with grep. RE2's never_nl does that but halves its speed,
    # so it is set only for a pattern that could match a newline at all.
    options.never_nl = can_match_newline(pattern)
    options.log_errors = False
    try:
        return re2.compile("(?m)" + pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        if "escape sequence: \\" in str(reason) or "perl operator" in str(reason):
            reason = f"{reason} ({NO_LOOKAROUND_HINT})"
        raise ToolError(f"invalid_argument: bad regular expression {pattern!r}: {reason}") from None


def can_match_newline(pattern: str) -> bool:
    """False only when nothing in `pattern` can match a newline: no control character, no
    escape but the newline-free ones, no negated class and no `s` flag (`.` then stays on
    its line). Anything else may, and is matched with never_nl."""
    if any(ord(char) < 0x20 for char in pattern):
        return True
    rest = NEWLINE_FREE_ESCAPE.sub("", pattern)
    dot_all = re.search(r"\(\?[a-zA-Z-]*s", rest) is not None
    return "\\" in rest or "^" in rest.lstrip("^") or dot_all


def shown_line(head: bytes, length: int | None) -> str:
    """A hit or context line as shown: at most MAX_LINE_SHOWN characters, then a marker."""
    text = head.rstrip(b"\r").decode("utf-8", errors="replace")
    if length is None:
        return text[:MAX_LINE_SHOWN] + "… [a line over 1 MiB, cut]"
    if len(text) <= MAX_LINE_SHOWN and length <= len(head):
        return text
    shown = text[:MAX_LINE_SHOWN]
    return shown + f"… [+{length - utf8_len(shown):,} bytes]"


class FileSearch:
    """The hit lines of one file, found a block at a time."""

    def __init__(self, regex: re2._Regexp, needle: bytes, budget: int) -> None:
        self.search = regex.search
        self.needle = needle  # text every match holds: a region without it has no match
        self.budget = budget  # hit lines still wanted
        self.hits: list[Hit] = []
        self.more = False  # a match was found past the budget
        self.line = 1  # the number of the line the next region starts with
        self.long_head: bytes | None = None  # the head of a long line being searched in pieces
        self.long_reported = False

    def run(self, fd: int, size: int) -> list[Hit] | None:
        """The hits, or None when the file is binary. `size` is the file's size as last seen:
        a file up to a block is read in one go, into a buffer of its size."""
        wanted = min(size + 1, BLOCK)
        first = os.read(fd, wanted)
        if b"\x00" in first:
            return None
        if len(first) < wanted:  # a short read of a regular file: its end
            if first:
                self.region(first, 0, len(first), piece=False, last=True)
            return self.hits
        return self.run_blocks(fd, first)

    def run_blocks(self, fd: int, first: bytes) -> list[Hit] | None:
        """The rest of a file larger than a block, read into one reused buffer: the lines a
        block ends in the middle of are carried to the front of the buffer for the next."""
        buffer = bytearray(2 * BLOCK)
        view = memoryview(buffer)
        buffer[: len(first)] = first
        filled = len(first)
        del first
        while not self.more:
            check_budget()
            count = os.readv(fd, [view[filled : filled + BLOCK]])  # filled < BLOCK here
            if buffer.find(b"\x00", filled, filled + count) != -1:
                return None
            end = filled + count
            if not count:  # the end of the file
                if end:
                    self.region(buffer, 0, end, piece=False, last=True)
                return self.hits
            cut = buffer.rfind(b"\n", 0, end) + 1
            if cut:
                self.region(buffer, 0, cut, piece=False)
            if end - cut >= BLOCK:  # a line longer than a block: search this piece of it
                self.region(buffer, cut, end, piece=True)
                filled = 0
            else:
                buffer[: end - cut] = buffer[cut:end]
                filled = end - cut
        return self.hits

    def region(
        self, data: bytes | bytearray, low: int, high: int, piece: bool, last: bool = False
    ) -> None:
        """Search data[low:high], whole lines (or one piece of a long line) starting at line
        `self.line`."""
        continues_long = self.long_head is not None
        if piece and not continues_long:
            self.long_head, self.long_reported = bytes(data[low : low + HEAD_BYTES]), False
        number, counted_to, position = self.line, low, low
        if self.needle and data.find(self.needle, low, high) == -1:
            position = high + 1  # no match can be here: only count the lines
        while position <= high:
            found = self.search(data, position, high)
            if found is None:
                break
            if len(self.hits) >= self.budget:
                self.more = True
                return
            newline_before = data.rfind(b"\n", low, found.start())
            start = low if newline_before == -1 else newline_before + 1
            end = data.find(b"\n", found.start(), high)
            end = high if end == -1 else end
            number += data.count(b"\n", counted_to, start)
            counted_to = start
            if start == low and (piece or continues_long):
                if not self.long_reported:
                    self.hits.append((number, self.long_head or b"", None))
                    self.long_reported = True
            else:
                head = bytes(data[start : min(end, start + HEAD_BYTES)])
                self.hits.append((number, head, end - start))
            position = end + 1
            if position > high:
                break
        if not piece and not last:  # the last region's lines need no counting
            self.line += data.count(b"\n", low, high)
            self.long_head = None


class GrepRun:
    """One grep: searches file after file, collects hit lines within the answer cap."""

    def __init__(self, pattern: str, ignore_case: bool, context: int, max_matches: int) -> None:
        self.regex = compile_pattern(pattern, ignore_case)
        self.needle = b"" if ignore_case else must_contain(pattern)
        self.context = context
        self.max_matches = max_matches
        self.lines = CappedLines()
        self.matches = 0
        self.skipped_binary = 0
        self.unreadable = 0  # files and folders that could not be opened or listed
        self.full = False

    def search_file(self, fd: int, size: int, shown_as: str) -> None:
        """Search the open regular file `fd` (at offset 0, `size` bytes as last seen);
        `shown_as` is its shown path."""
        search = FileSearch(self.regex, self.needle, self.max_matches - self.matches)
        hits = search.run(fd, size)
        if hits is None:
            self.skipped_binary += 1
            return
        self.full = self.full or search.more
        if not hits:
            return
        self.matches += len(hits)
        if self.context == 0:
            for number, head, length in hits:
                self.emit(f"{shown_as}:{number}:{shown_line(head, length)}")
            return
        self.emit_with_context(fd, hits, shown_as)

    def emit_with_context(self, fd: int, hits: list[Hit], shown_as: str) -> None:
        """Hit lines with `context` lines around them, read again from the file's start."""
        hit_numbers = {number for number, _, _ in hits}
        windows = [(number - self.context, number + self.context) for number, _, _ in hits]
        last_wanted = windows[-1][1]
        window = 0
        last_printed = 0
        for number, (head, length) in enumerate(lines_from(fd, 0, HEAD_BYTES), start=1):
            if number > last_wanted:
                break
            while windows[window][1] < number:
                window += 1
            if number < windows[window][0]:
                continue
            if last_printed and number > last_printed + 1:
                self.emit("--")
            mark = ":" if number in hit_numbers else "-"
            ends = len(head) - len(head.rstrip(b"\n"))
            line = shown_line(head[: len(head) - ends], length - ends)
            self.emit(f"{shown_as}{mark}{number}{mark}{line}")
            last_printed = number

    def emit(self, line: str) -> None:
        if not self.lines.add(line):
            self.full = True

    def report(self, pattern: str) -> str:
        notes = []
        if self.full:
            notes.append(
                f"(+more: stopped after {self.matches:,} matching lines; narrow path, glob or "
                "pattern, or raise max_matches)"
            )
        if self.skipped_binary:
            notes.append(f"({self.skipped_binary:,} binary files skipped)")
        if self.unreadable:
            notes.append(unreadable_note(self.unreadable))
        if not self.lines.lines:
            return "\n".join([f"No match for {pattern!r}", *notes])
        return self.lines.text(*notes)


def unreadable_note(count: int) -> str:
    return (
        f"({count:,} {'entry' if count == 1 else 'entries'} could not be read (no permission, "
        "or gone meanwhile) and {'was' if count == 1 else 'were'} not searched)"
    )
