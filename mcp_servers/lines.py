"""Lines start..end of a file, streamed: memory is bounded by the answer, not by the file.

A line is never held whole: only as much of it as could be shown is kept, and the rest is
counted as it streams past, so a 2 GiB line costs no more memory than a short one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from mcp_servers.budget import check_budget
from mcp_servers.fileio import BLOCK


@dataclass(frozen=True)
class Excerpt:
    """What read_file shows of a file, before decoding."""

    data: bytes  # whole lines start.. (or the head of line `start` alone, when `long_line`)
    start: int
    cut_at: int = 0  # the first line not shown, when the excerpt was cut (0: not cut)
    rest: int = 0  # bytes not shown, up to `end` or the end of the file
    long_line: bool = False  # line `start` alone was over the room; data is its head
    lines_in_file: int | None = None  # set when `start` is past the end


def blocks_at(fd: int, offset: int) -> Iterator[bytes]:
    while True:
        check_budget()
        block = os.pread(fd, BLOCK, offset)
        if not block:
            return
        offset += len(block)
        yield block


def skip_to_line(fd: int, start: int) -> tuple[int, int]:
    """(offset of line `start`, or of the end of the file; newlines before that offset)."""
    offset, newlines = 0, 0
    for block in blocks_at(fd, 0):
        found = block.count(b"\n")
        if newlines + found < start - 1:
            newlines += found
            offset += len(block)
            continue
        at = -1
        for _ in range(start - 1 - newlines):
            at = block.index(b"\n", at + 1)
        return offset + at + 1, start - 1
    return offset, newlines


def lines_from(fd: int, offset: int, keep: int) -> Iterator[tuple[bytes, int]]:
    """(head, length) of each line from `offset`: its first `keep` bytes and its full length
    in bytes, both with the newline when it has one."""
    head, length = bytearray(), 0
    for block in blocks_at(fd, offset):
        at, size = 0, len(block)
        while at < size:
            newline = block.find(b"\n", at)
            end = size if newline == -1 else newline + 1
            if len(head) < keep:
                head += block[at : min(end, at + keep - len(head))]
            length += end - at
            at = end
            if newline != -1:
                yield bytes(head), length
                head, length = bytearray(), 0
    if length:
        yield bytes(head), length


def bytes_through_line(fd: int, offset: int, lines: int) -> int:
    """Bytes from `offset` through the end of the `lines`-th line from there (or the file)."""
    total = 0
    for block in blocks_at(fd, offset):
        found = block.count(b"\n")
        if found < lines:
            lines -= found
            total += len(block)
            continue
        at = -1
        for _ in range(lines):
            at = block.index(b"\n", at + 1)
        return total + at + 1
    return total


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
