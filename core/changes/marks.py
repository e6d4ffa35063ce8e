"""What a changed span holds that a screen cannot show by itself, drawn so it can (issue 41).

A diff line is text, and some changes leave the text looking the same: a trailing space, a
tab for spaces, a no-break space inside `rm -rf ./build`, a CRLF line ending, Latin letters
swapped for Cyrillic look-alikes (`pypi` -> `руpi`, `ops` -> `орѕ`). Within each changed span
(intraline's changed_spans, the one comparison) such characters are marked:

- whitespace is drawn with one sign per character, so offsets stay the same: `·` a space,
  `→` a tab (trailing ones always; inside a line when the change is about whitespace, or
  when a line with tabs replaces another), `⍽` any other space (named on a note line), `␍` a
  carriage return ending the line (CRLF); an unchanged CRLF ending is dropped from the view;
- control and format characters are named on a note line (`core.text.visible` writes them
  out as `\\xNN` when they are printed);
- look-alikes: in a changed word that mixes scripts (ASCII letters count as Latin), or whose
  every letter can pass for ASCII, the non-ASCII letters are named on a note line:
  `⚠ look-alike characters (+): р U+0440 CYRILLIC SMALL LETTER ER, ...`.

Which characters are confusable with ASCII comes from the `confusable_homoglyphs` package
(Unicode's confusables.txt, kept up to date upstream, MIT), rather than a table of our own
that would cover only the Cyrillic and Greek letters someone thought of; NFKC catches the
fullwidth and mathematical forms of ASCII letters. It is imported only when a changed word
holds a non-ASCII letter, so a plain preview never loads its data.

The notes come after each run of removed and added lines (so the run stays paired on every
view), and a one-line legend after the diff when a sign was drawn. The marks are also given
as data (`Marked.flags`, by line index) so the inbox can mark the same characters.

Pure: the terminal's review, `fsagent approve` and the HTTP payloads all draw from this.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from core.changes.intraline import changed_spans

SIGNS = {"space": "·", "tab": "→", "other-space": "⍽", "line-ending": "␍"}
LEGEND = {
    "space": "· a space",
    "tab": "→ a tab",
    "other-space": "⍽ another kind of space (named above)",
    "line-ending": "␍ a carriage return: the line ends CRLF",
}
# How each note said after a run starts (run_notes): a page that shows part of a run keeps them.
NOTE_STARTS = ("⚠ look-alike characters (", "⚠ unusual characters (", "(line ending ")
# A long line's part as intraline draws it: its column, then its text.
COLUMN = re.compile(r"\[col [\d,]+\] ")
WORD = re.compile(r"\w+")
# Names for the control characters unicodedata leaves unnamed.
CONTROL_NAMES = {
    "\x00": "NULL",
    "\x08": "BACKSPACE",
    "\t": "CHARACTER TABULATION",  # a tab drawn as → is named in the inbox's title
    "\x0b": "LINE TABULATION",
    "\x0c": "FORM FEED",
    "\x0d": "CARRIAGE RETURN",
    "\x1b": "ESCAPE",
    "\x1c": "FILE SEPARATOR",
    "\x1d": "GROUP SEPARATOR",
    "\x1e": "RECORD SEPARATOR",
    "\x7f": "DELETE",
    "\x85": "NEXT LINE",
}


@dataclass(frozen=True)
class Flag:
    """One marked character: where it is in its line's text after the sign (code points,
    and UTF-16 units for a browser), what it is and the sign drawn in its place, if any."""

    at: int
    at16: int
    code: str  # "U+0440"
    name: str
    kind: str  # space, tab, other-space, line-ending, control, look-alike
    shown: str | None

    def data(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "at16": self.at16,
            "code": self.code,
            "name": self.name,
            "kind": self.kind,
            "shown": self.shown,
        }


@dataclass(frozen=True)
class Marked:
    """A preview's lines as drawn, and the characters marked in them (line index -> flags)."""

    lines: list[str]
    flags: dict[int, list[Flag]] = field(default_factory=dict)


def name_of(char: str) -> str:
    return unicodedata.name(char, "") or CONTROL_NAMES.get(char) or "a control character"


def code_of(char: str) -> str:
    return f"U+{ord(char):04X}"


def is_space(char: str) -> bool:
    return char in " \t" or unicodedata.category(char) == "Zs"


# --- look-alikes ----------------------------------------------------------------------------


@functools.cache
def passes_for_ascii(char: str) -> bool:
    """Whether `char` (not ASCII) can be read as an ASCII letter or digit."""
    folded = unicodedata.normalize("NFKC", char)
    if folded != char and folded.isascii() and folded.isalnum():
        return True  # fullwidth, mathematical and other forms of ASCII letters
    from confusable_homoglyphs import confusables  # its data only when a word needs it

    found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin"])
    return bool(found) and any(
        glyph["c"].isascii() and glyph["c"].isalnum()
        for entry in found
        for glyph in entry["homoglyphs"]
    )


@functools.cache
def script_of(char: str) -> str:
    from confusable_homoglyphs import categories

    return str(categories.alias(char))


def look_alikes(word: str) -> list[int]:
    """The positions in `word` of its non-ASCII letters when the word is suspect: it mixes
    scripts (`руpi`), or each of its letters can pass for ASCII (`орѕ`, `ｏｐｓ`)."""
    foreign = [at for at, char in enumerate(word) if not char.isascii() and char.isalnum()]
    if not foreign:
        return []
    scripts = {"LATIN" if char.isascii() else script_of(char) for char in word if char.isalpha()}
    scripts -= {"COMMON", "INHERITED"}
    mixed = len(scripts) > 1
    if mixed or all(passes_for_ascii(word[at]) for at in foreign):
        return foreign
    return [at for at in foreign if passes_for_ascii(word[at]) and "LATIN" in scripts]


# --- one side of a change -------------------------------------------------------------------


def side_flags(text: str, spans: list[tuple[int, int]], other: list[str] | None) -> list[Flag]:
    """The marked characters of one side's changed spans. `other` is the other side's text of
    each span, None for a line with no counterpart (added or removed whole)."""
    found: dict[int, tuple[str, str | None]] = {}
    trailing_from = len(text)
    while trailing_from and (is_space(text[trailing_from - 1]) or text[trailing_from - 1] == "\r"):
        trailing_from -= 1
    for number, (start, end) in enumerate(spans):
        piece = text[start:end]
        their = None if other is None else other[number]
        about_space = not piece.strip() or (their is not None and not their.strip())
        for at in range(start, end):
            char = text[at]
            kind = whitespace_kind(char, at, text, trailing_from, about_space, their is not None)
            if kind is not None:
                found[at] = (kind, SIGNS.get(kind))
    for word in WORD.finditer(text):
        if any(word.end() >= start and word.start() <= end for start, end in spans):
            for at in look_alikes(word.group()):
                found[word.start() + at] = ("look-alike", None)
    return [flag(text, at, kind, shown) for at, (kind, shown) in sorted(found.items())]


def whitespace_kind(
    char: str, at: int, text: str, trailing_from: int, about_space: bool, paired: bool
) -> str | None:
    if char == "\r" and at == len(text) - 1:
        return "line-ending"
    category = unicodedata.category(char)
    if category == "Zs" and char != " ":
        return "other-space"
    if category in ("Cc", "Cf") and char != "\t":
        return "control"
    trailing = at >= trailing_from
    if char == " " and (trailing or about_space):
        return "space"
    if char == "\t" and (trailing or about_space or paired):
        return "tab"
    return None


def flag(text: str, at: int, kind: str, shown: str | None) -> Flag:
    char = text[at]
    at16 = len(text[:at].encode("utf-16-le", "surrogatepass")) // 2
    return Flag(at, at16, code_of(char), name_of(char), kind, shown)


def drawn(text: str, flags: list[Flag]) -> str:
    """`text` with each marked character that has a sign replaced by it (one for one)."""
    chars = list(text)
    for found in flags:
        if found.shown is not None:
            chars[found.at] = found.shown
    return "".join(chars)


# --- a preview's lines ---------------------------------------------------------------------


def body(line: str) -> tuple[str, str]:
    """A diff line's sign and prefix (a long line part's column), and its text."""
    match = COLUMN.match(line, 1)
    cut_at = match.end() if match else 1
    return line[:cut_at], line[cut_at:]


def runs(lines: list[str]) -> Iterator[tuple[list[int], list[int]]]:
    """Each run of removed lines and the added lines right after it, as indexes, within the
    diff proper (after an "@@" or a new file's first line)."""
    started = False
    removed: list[int] = []
    added: list[int] = []
    for index, line in enumerate(lines):
        started = started or line.startswith(("@@", "new file "))
        is_removed = started and line.startswith("-")
        if is_removed and not added:
            removed.append(index)
            continue
        if started and line.startswith("+"):
            added.append(index)
            continue
        if removed or added:
            yield removed, added
        removed, added = ([index], []) if is_removed else ([], [])
    if removed or added:
        yield removed, added


def mark(lines: list[str]) -> Marked:
    """A preview's lines with what a changed span holds drawn or named (see above): signs in
    place of whitespace, a note after each run naming look-alikes and other characters, a
    legend after the diff; context lines lose their CRLF's `\\r` (an unchanged ending)."""
    flagged: dict[int, list[Flag]] = {}
    notes: dict[int, list[str]] = {}  # after this line index
    for removed, added in runs(lines):
        for at, line_flags in run_flags(lines, removed, added).items():
            flagged[at] = line_flags
        said = run_notes(lines, removed, added, flagged)
        if said:
            notes.setdefault(after_parts(lines, (added or removed)[-1]), []).extend(said)
    out: list[str] = []
    flags: dict[int, list[Flag]] = {}
    started = False
    for index, line in enumerate(lines):
        started = started or line.startswith(("@@", "new file "))
        found = flagged.get(index, [])
        if found:
            prefix, text = body(line)
            line = prefix + drawn(text, found)
            flags[len(out)] = found
        ending = any(f.kind == "line-ending" for f in found)
        if started and line[:1] in " +-" and line.endswith("\r") and not ending:
            line = line[:-1]  # an ending both sides share, or a line not compared
        out.append(line)
        out += notes.get(index, [])
    out += legend(f for found in flags.values() for f in found)
    return Marked(out, flags)


def legend(flags: Iterable[Flag]) -> list[str]:
    """The legend line of the signs these flags draw (none drawn: no line)."""
    kinds = {f.kind for f in flags if f.shown is not None}
    return ["(" + ", ".join(LEGEND[k] for k in LEGEND if k in kinds) + ")"] if kinds else []


def is_legend(line: str) -> bool:
    return line.startswith("(") and line[1:].startswith(tuple(LEGEND.values()))


def notes_after(lines: list[str], at: int) -> list[int]:
    """The indexes of the notes said right after line `at`, the last of a run."""
    found = []
    while at + 1 < len(lines) and lines[at + 1].startswith(NOTE_STARTS):
        at += 1
        found.append(at)
    return found


def after_parts(lines: list[str], at: int) -> int:
    """The last line of the long line whose part is at `at` (its parts are each a run of
    one `-` and one `+`): a note goes after them all, so the page reads them as one line."""
    while at + 1 < len(lines) and lines[at + 1][:1] in "-+" and COLUMN.match(lines[at + 1], 1):
        at += 1
    return at


def run_flags(lines: list[str], removed: list[int], added: list[int]) -> dict[int, list[Flag]]:
    """Each line of a run with its marked characters: the k-th removed line compared with
    the k-th added one (as the page draws them side by side, and as intraline lays out a
    long line's parts), a line with no counterpart marked whole."""
    found: dict[int, list[Flag]] = {}
    for k in range(max(len(removed), len(added))):
        old_at = removed[k] if k < len(removed) else None
        new_at = added[k] if k < len(added) else None
        if old_at is None or new_at is None:
            at = old_at if old_at is not None else new_at
            assert at is not None
            text = body(lines[at])[1]
            found[at] = side_flags(text, [(0, len(text))], None)
            continue
        old, new = body(lines[old_at])[1], body(lines[new_at])[1]
        spans = changed_spans(old, new)
        old_spans = [(s.old_start, s.old_end) for s in spans]
        new_spans = [(s.new_start, s.new_end) for s in spans]
        old_flags = side_flags(old, old_spans, [new[a:b] for a, b in new_spans])
        new_flags = side_flags(new, new_spans, [old[a:b] for a, b in old_spans])
        if old != new and drawn(old, old_flags) == drawn(new, new_flags):
            # A sign that is in the file itself (a real `·` where the other side has a
            # trailing space) would draw two different lines alike: draw neither's signs.
            old_flags, new_flags = unsigned(old_flags), unsigned(new_flags)
        found[old_at], found[new_at] = old_flags, new_flags
    return {at: flags for at, flags in found.items() if flags}


def unsigned(flags: list[Flag]) -> list[Flag]:
    return [replace(found, shown=None) for found in flags]


def run_notes(
    lines: list[str], removed: list[int], added: list[int], flagged: dict[int, list[Flag]]
) -> list[str]:
    """The notes said after a run: its look-alikes and other unusual characters by name, for
    each side, and a line ending that changed."""
    said: list[str] = []
    for sign, indexes in (("-", removed), ("+", added)):
        flags = [f for at in indexes for f in flagged.get(at, [])]
        look = named(flags, {"look-alike"})
        if look:
            said.append(f"⚠ look-alike characters ({sign}): {look}")
        odd = named(flags, {"other-space", "control"})
        if odd:
            said.append(f"⚠ unusual characters ({sign}): {odd}")
    endings = {
        (body(lines[old])[1].endswith("\r"), body(lines[new])[1].endswith("\r"))
        for old, new in zip(removed, added, strict=False)
        if body(lines[old])[1].rstrip("\r") == body(lines[new])[1].rstrip("\r")
    }
    for old_cr, new_cr in sorted(endings):
        if old_cr != new_cr:
            said.append(
                f"(line ending {'CRLF' if old_cr else 'LF'} -> {'CRLF' if new_cr else 'LF'})"
            )
    return said


def named(flags: list[Flag], kinds: set[str]) -> str:
    """The distinct characters of these kinds, each as itself (if printable), its code point
    and its name."""
    texts = {f.code: f for f in flags if f.kind in kinds}
    shown = []
    for code, found in texts.items():
        char = chr(int(code[2:], 16))
        glyph = char if char.isprintable() and not is_space(char) else ""
        shown.append(" ".join(part for part in (glyph, code, found.name) if part))
    return ", ".join(shown)
