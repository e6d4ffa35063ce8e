"""How a file name is shown in an answer, and read back from a path argument.

A Linux name is any bytes but `/` and NUL; Python hands it over as str, each byte that is not
UTF-8 as a lone surrogate ('surrogateescape'). An answer must be valid UTF-8, and a name must
not be able to fake a line of a listing, so one scheme is used everywhere a name is shown:

- a backslash is shown as two backslashes;
- each byte that is not UTF-8 is shown as `\\xNN`;
- a control character (newline, tab, escape, ...), format character (bidi controls,
  zero-width ones) or line/paragraph separator is shown as `\\xNN` for each of its UTF-8 bytes;
- everything else is shown as it is.

`parse` undoes it for every path argument, so a name copied from an answer names the same
file. A backslash that starts neither escape can only be a Windows separator, and a path with
one (or a drive, `C:`) is refused by the sandbox: this is a POSIX machine.
"""

from __future__ import annotations

import re
import unicodedata

ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
ESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")


def show(name: str) -> str:
    """`name` (a str from the OS, surrogates for undecodable bytes) as answers show it."""
    if name.isprintable() and "\\" not in name:  # nearly every name: nothing to escape
        return name
    return "".join(map(shown_char, name))


def shown_char(char: str) -> str:
    if char == "\\":
        return "\\\\"
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    if unicodedata.category(char) in ESCAPED_CATEGORIES:
        return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    return char


def parse(given: str) -> str:
    """A path argument in the shown form, as the str the OS functions take."""
    if "\\" not in given:
        return given
    raw = bytearray()
    done = 0
    for found in ESCAPE.finditer(given):
        raw += given[done : found.start()].encode("utf-8", "surrogateescape")
        escape = found.group(1)
        raw += b"\\" if escape == "\\" else bytes([int(escape[1:], 16)])
        done = found.end()
    raw += given[done:].encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape")


DRIVE = re.compile(r"[A-Za-z]:(?:[\\/]|$)")


def windows_style(given: str) -> bool:
    """True for a drive path ('C:\\x', 'C:/x') or a path with a backslash that starts
    neither escape (so it can only be a Windows separator: names.py shows a backslash of a
    real name as two)."""
    if DRIVE.match(given):
        return True
    return "\\" in ESCAPE.sub("", given)


def quoted(name: str) -> str:
    """A raw name shown between single quotes, for messages."""
    return f"'{show(name)}'"


def quoted_given(given: str) -> str:
    """A path argument as a message names it: parsed, then shown, so it round-trips."""
    return quoted(parse(given))
