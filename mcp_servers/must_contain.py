"""The literal text every match of a pattern must contain, so grep can skip a block without it.

RE2 skips ahead quickly only to a literal a match starts with; a pattern such as
`(\\w+ ?)+!$` has none, and its automaton then steps through every byte. GNU grep looks first
for a string every match must hold (`!` here) and skips what lacks it; so does grep here, with
`bytes.find`. The literal is read off the top level of the pattern only, and only where that
is sure: no alternation, no flags, no counts, no quoting; anything in a group or a class, and any
character a quantifier makes optional, ends a run. When unsure, there is no literal.
"""

from __future__ import annotations

QUANTIFIERS = frozenset("?*+")
# Alternation, flags, quoting, escapes that name characters, and `{` (a count, or a literal
# brace when it is not one) are not read: a pattern with any of them has no literal here.
UNSURE = ("|", "(?", "{", "\\Q", "\\E", "\\p", "\\P", "\\x", "\\C")


def must_contain(pattern: str) -> bytes:
    """The longest run of characters every match of `pattern` contains ('' when unsure)."""
    if any(mark in pattern for mark in UNSURE):
        return b""
    runs, run = [], ""
    at = 0
    while at < len(pattern):
        char, following = literal_at(pattern, at)
        if char is None:  # a class, group, escape class, anchor or dot: not a literal
            runs.append(run)
            run = ""
            at = following
            continue
        quantifier = pattern[following] if following < len(pattern) else ""
        if quantifier in ("?", "*"):  # optional: not surely there
            runs.append(run)
            run = ""
        elif quantifier == "+":  # there at least once, but the run cannot go on past it
            runs.append(run + char)
            run = ""
        else:
            run += char
        at = following
    runs.append(run)
    return max(runs, key=len).encode("utf-8")


def literal_at(pattern: str, at: int) -> tuple[str | None, int]:
    """(the literal character at `at`, or None; where the next item starts)."""
    char = pattern[at]
    if char == "\\":
        escaped = pattern[at + 1 : at + 2]
        if escaped and not escaped.isalnum() and escaped.isascii():
            return escaped, at + 2
        return None, at + 2
    if char == "[":
        return None, class_end(pattern, at)
    if char == "(":
        return None, group_end(pattern, at)
    if char in ".^$" or char in QUANTIFIERS or char == ")":
        return None, at + 1
    return char, at + 1


def class_end(pattern: str, at: int) -> int:
    """Where the character class starting at `at` ends (just after its `]`)."""
    at += 1
    if pattern[at : at + 1] == "^":
        at += 1
    if pattern[at : at + 1] == "]":
        at += 1
    while at < len(pattern):
        if pattern[at] == "\\":
            at += 2
            continue
        if pattern[at] == "[" and pattern[at + 1 : at + 2] == ":":
            close = pattern.find(":]", at + 2)
            at = close + 2 if close != -1 else at + 1
            continue
        if pattern[at] == "]":
            return at + 1
        at += 1
    return len(pattern)


def group_end(pattern: str, at: int) -> int:
    """Where the group starting at `at` ends (just after its `)`), classes and escapes
    inside it skipped."""
    depth = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            at = class_end(pattern, at)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at + 1
        at += 1
    return len(pattern)
