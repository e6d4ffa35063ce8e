"""Lines start..end of a file, streamed: memory is bounded by the answer, not by the file.

A line is never held whole: only as much of it as could be shown is kept, and the rest is
counted as it streams past, so a 2 GiB line costs no more memory than a short one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mcp_servers.budget import check_budget
from mcp_servers.fileio import BLOCK
from mcp_servers.platform_calls import next_data, read_at


@dataclass(frozen=True)
class Excerpt:
    """What read_file shows of a file, before decoding."""

    data: bytes  # whole lines start.. (or the head of line `start` alone, when `long_line`)
    start: int
    cut_at: int = 0  # the first line not shown, when the excerpt was cut (0: not cut)
    rest: int = 0  # bytes not shown, up to `end` or the end of the file
    long_line: bool = False  # line `start` alone was over the room; data is its head
    lines_in_file: int | None = None  # set when `start` is past the end


def blocks_at(
    fd: int, offset: int, skip_holes: Callable[[], bool] = lambda: True
) -> Iterator[tuple[int, bytearray]]:
    """(offset, block) through the file from `offset`, read into one reused buffer: a block
    is valid until the next is asked for (a new 1 MiB buffer per block costs page faults).

    Holes of a sparse file hold only zero bytes, and so no line end: while `skip_holes()`
    says so they are skipped, not read (reading gigabytes of hole fills the page cache).
    """
    size = os.fstat(fd).st_size
    buffer = bytearray(BLOCK)
    while True:
        check_budget()
        if skip_holes():
            offset = next_data(fd, offset, size)
        count = read_at(fd, buffer, offset)
        if not count:
            return
        yield offset, buffer if count == BLOCK else buffer[:count]
        offset += count


def nth_newline(block: bytearray, count: int) -> int:
    at = -1
    for _ in range(count):
        at = block.index(b"\n", at + 1)
    return at


def skip_to_line(fd: int, start: int) -> tuple[int, int]:
    """(offset of line `start`, or of the end of the file; newlines before that offset)."""
    newlines = 0
    for at, block in blocks_at(fd, 0):
        found = block.count(b"\n")
        if newlines + found < start - 1:
            newlines += found
            continue
        return at + nth_newline(block, start - 1 - newlines) + 1, start - 1
    return os.fstat(fd).st_size, newlines


class Head:
    """The first `keep` bytes of the line being read."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.data = bytearray()

    def full(self) -> bool:
        return len(self.data) >= self.keep


def lines_from(fd: int, offset: int, keep: int) -> Iterator[tuple[bytes, int]]:
    """(head, length) of each line from `offset`: its first `keep` bytes and its full length
    in bytes, both with the newline when it has one. Holes are skipped once a line's head is
    full (the zeros of a hole in a head are kept, so a caller sees them)."""
    head, line_start = Head(keep), offset
    for at, block in blocks_at(fd, offset, skip_holes=head.full):
        position, size = 0, len(block)
        while position < size:
            newline = block.find(b"\n", position)
            end = size if newline == -1 else newline + 1
            if not head.full():
                head.data += block[position : min(end, position + keep - len(head.data))]
            position = end
            if newline != -1:
                yield bytes(head.data), at + end - line_start
                head.data, line_start = bytearray(), at + end
    size = os.fstat(fd).st_size
    if size > line_start:
        yield bytes(head.data), size - line_start


def bytes_through_line(fd: int, offset: int, lines: int) -> int:
    """Bytes from `offset` through the end of the `lines`-th line from there (or the file)."""
    for at, block in blocks_at(fd, offset):
        found = block.count(b"\n")
        if found < lines:
            lines -= found
            continue
        return at + nth_newline(block, lines) + 1 - offset
    return os.fstat(fd).st_size - offset


def excerpt(fd: int, start: int, end: int | None, room: int) -> Excerpt:
    """Lines start..end (1-based, inclusive) that fit in `room` bytes."""
    size = os.fstat(fd).st_size
    offset, newlines = skip_to_line(fd, start) if start > 1 else (0, 0)
    if newlines < start - 1 or offset >= size:
        ends_open = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        return Excerpt(b"", start, lines_in_file=newlines + int(ends_open))
    kept: list[bytes] = []
    used, number = 0, start - 1
    for head, length in lines_from(fd, offset, room):
        number += 1
        if end is not None and number > end:
            break
        if used + length <= room:
            kept.append(head)
            used += length
            continue
        if number == start:
            return Excerpt(head, start, cut_at=start + 1, rest=length - len(head), long_line=True)
        if end is None:
            rest = size - offset - used
        else:
            rest = bytes_through_line(fd, offset + used, end - number + 1)
        return Excerpt(b"".join(kept), start, cut_at=number, rest=rest)
    return Excerpt(b"".join(kept), start)
