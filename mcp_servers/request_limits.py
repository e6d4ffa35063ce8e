"""How big one request may be, checked on its bytes before any JSON is built.

Building a request's JSON costs far more memory than its bytes: measured before these caps, a
19 MB line of 4 million short paths took the server to 1,016 MB before the tool could say "at
most 50 paths". So a line is checked first for its length (MAX_LINE_BYTES, while it is read)
and then for how many JSON values it holds (MAX_JSON_VALUES), counted on the bytes: a value
other than the first is preceded by ',', '[', '{' or ':', so those outside strings bound the
count. Strings are stepped over only when the plain count is over the cap, so a normal request
costs one `bytes.count` per character class.

Each argument is then held to its own cap by the tool that takes it (paths, patterns, globs,
excludes, edits, write content), with an error that names the argument and the cap.
"""

from __future__ import annotations

import re

from mcp.server.fastmcp.exceptions import ToolError

MAX_LINE_BYTES = 24 * 1024 * 1024  # 8 MiB of write content, escaped as JSON, fits
MAX_JSON_VALUES = 100_000  # values of every kind (objects, arrays, strings, numbers...)
# Caps on single arguments (characters); content is capped in bytes by the write tools.
MAX_PATTERN_CHARS = 1000  # a glob, an exclude glob or a grep pattern
MAX_EXCLUDES = 100  # exclude globs of one call
MAX_EDITS = 1000  # edits of one patch_file call

STRING = re.compile(rb'"[^"]*"')  # once escapes are dropped
STRUCTURAL = (b",", b"[", b"{", b":")


def json_values_over_cap(line: bytes) -> int | None:
    """About how many JSON values `line` holds when that is over MAX_JSON_VALUES, or None.

    With escapes dropped (`\\\\`, then `\\"`), every quote left opens or closes a string, so
    strings are counted by their quotes; only a line with fewer strings than the cap is
    stepped through string by string, to count the marks outside them.
    """
    if sum(line.count(mark) for mark in STRUCTURAL) < MAX_JSON_VALUES:
        return None
    plain = line.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = plain.count(b'"') // 2
    if strings >= MAX_JSON_VALUES:
        return strings
    outside_strings = STRING.sub(b"", plain)
    count = strings + sum(outside_strings.count(mark) for mark in STRUCTURAL)
    return count if count >= MAX_JSON_VALUES else None


def too_large(line: bytes) -> str | None:
    """Why `line` is refused before it is parsed, or None."""
    count = json_values_over_cap(line)
    if count is None:
        return None
    return (
        f"Invalid Request: a request may hold at most {MAX_JSON_VALUES:,} JSON values "
        f"(this one holds about {count:,}); split the work into smaller calls"
    )


def check_pattern(name: str, value: str | None) -> None:
    if value is not None and len(value) > MAX_PATTERN_CHARS:
        raise ToolError(
            f"invalid_argument: {name} is {len(value):,} characters long "
            f"(at most {MAX_PATTERN_CHARS:,})"
        )


def check_excludes(excludes: list[str] | None) -> None:
    if not excludes:
        return
    if len(excludes) > MAX_EXCLUDES:
        raise ToolError(
            f"invalid_argument: exclude holds {len(excludes):,} globs (at most {MAX_EXCLUDES})"
        )
    for item in excludes:
        check_pattern("an exclude glob", item)
