"""Answer caps, counted in UTF-8 bytes over everything an answer holds: content, paths,
headers and the markers that say what was left out."""

from __future__ import annotations

import json
from typing import Any

READ_CAP = 256 * 1024  # bytes in one answer
MARKER_ROOM = 512  # bytes kept free for the notes that close a capped answer


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def cut_to_bytes(text: str, limit: int) -> str:
    """The longest start of `text` that is at most `limit` bytes, whole characters only."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def plural(count: int, word: str) -> str:
    """`1 file`, `2 files`, `1,024 files`: a count and its noun, the plural right (the agent
    has its own, core/text.py; the server imports nothing of the agent's)."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def more_marker(hidden: int) -> str:
    return f"(+{hidden:,} more)"


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


class CappedLines:
    """The lines of an answer, kept while they fit in the cap with room for closing notes.

    Once a line does not fit, it and every later one are only counted (`hidden`), so the
    answer ends where it was cut and says how much is missing.
    """

    def __init__(self, cap: int = READ_CAP, max_lines: int | None = None) -> None:
        self.cap = cap
        self.max_lines = max_lines
        self.lines: list[str] = []
        self.used = 0
        self.hidden = 0

    @property
    def full(self) -> bool:
        return self.hidden > 0

    def add(self, line: str) -> bool:
        """Keep `line` if it fits; return whether it was kept."""
        if self.hidden:
            self.hidden += 1
            return False
        size = utf8_len(line) + 1
        over_count = self.max_lines is not None and len(self.lines) >= self.max_lines
        if over_count or self.used + size > self.cap - MARKER_ROOM:
            self.hidden += 1
            return False
        self.lines.append(line)
        self.used += size
        return True

    def text(self, *notes: str) -> str:
        """The kept lines and the notes (short lines that close the answer), within the cap."""
        return cut_to_bytes("\n".join([*self.lines, *filter(None, notes)]), self.cap)


def capped_json_lines(lines: list[str], room: int) -> tuple[list[str], int]:
    """As many of `lines` as fit in `room` bytes once in a JSON list; and how many did not."""
    kept: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        size = utf8_len(json.dumps(line, ensure_ascii=False)) + 8  # indent, comma, newline
        if used + size > room:
            return kept, len(lines) - number
        kept.append(line)
        used += size
    return kept, 0
