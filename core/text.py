"""Calls, results and long text in a line or a few: how every front-end and message shows them.
Long text is always cut visibly: the reader sees that, and how much, was left out."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

# How a note of fsagent's own in a thread begins (an undo's): the model reads it as a
# person's message, the only kind it takes between turns; `threads show` prints it as
# fsagent's, not as the person's.
NOTE_MARK = "(fsagent) "

CLIP_AT = 300
RESULT_LINES = 3


# What must never reach a screen raw, from a file, a tool result, the model or a thread name:
# control characters (ESC starts every CSI and OSC sequence; C1 has its own CSI, 0x9b), format
# characters (bidi controls such as U+202E, U+2066-2069, U+200E/F, U+061C, and zero-width
# ones), surrogates and line/paragraph separators. The MCP server escapes the same categories
# in file names (mcp_servers/names.py, which stands alone), the same way: `\xNN` for each
# UTF-8 byte. Everything else, backslashes included, is kept as it is.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class _Shown(dict[int, "int | str"]):
    """A `str.translate` table built as characters are met: each character is judged once,
    then looked up at C speed."""

    def __init__(self, keep: str, form: str) -> None:
        super().__init__()
        self.keep = frozenset(map(ord, keep))
        self.form = form

    def __missing__(self, code: int) -> int | str:
        char = chr(code)
        if code in self.keep or unicodedata.category(char) not in HIDDEN_CATEGORIES:
            shown: int | str = code
        elif self.form == "json":
            shown = "".join(f"\\u{unit:04x}" for unit in _utf16_units(char))
        else:
            shown = "".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass"))
        self[code] = shown
        return shown


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


# One table per set of kept characters: "\t\n" for text shown as lines, "\t" for one line
# of a file (a preview), "" for a name or a value inside a line of ours.
_TABLES: dict[str, _Shown] = {}
_JSON = _Shown("\t\n", "json")  # raw in JSON text they are only its layout (indent)


def visible(text: str, keep: str = "\t\n") -> str:
    """`text` as it may reach a screen: every hidden character (HIDDEN_CATEGORIES) but those
    in `keep` written out as `\\xNN` per UTF-8 byte, so nothing can move the cursor, clear
    or recolour the screen, draw a fake prompt or reorder what is shown. Printable text is
    kept byte for byte."""
    if text.isprintable():  # nearly every text: nothing to do
        return text
    table = _TABLES.get(keep) or _TABLES.setdefault(keep, _Shown(keep, "text"))
    return text.translate(table)


def json_visible(line: str) -> str:
    """A line of JSON (ensure_ascii=False) with the hidden characters `visible` writes out
    escaped as JSON does (`\\u202e`): the same value, safe to print or `cat`."""
    if line.isprintable():
        return line
    return line.translate(_JSON)


def counted(count: int, word: str) -> str:
    """`1 line`, `2 lines`, `1,024 lines`: a count and its noun, the plural right."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def clip(text: str, limit: int = CLIP_AT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def format_call(name: str, args: Any, limit: int = CLIP_AT) -> str:
    if not isinstance(args, dict):
        return f"{name}({clip(repr(args), limit)})"
    shown = ", ".join(f"{key}={clip(repr(value), limit)}" for key, value in args.items())
    return f"{name}({shown})"


def format_result(text: str) -> str:
    """A tool result in a few lines: JSON on one line, text by its first lines."""
    try:
        return clip(json.dumps(json.loads(text), ensure_ascii=False), 200)
    except ValueError:
        pass
    lines = text.splitlines() or [""]
    shown = [clip(line, 200) for line in lines[:RESULT_LINES]]
    if len(lines) > RESULT_LINES:
        shown.append(f"… (+{counted(len(lines) - RESULT_LINES, 'more line')})")
    return "\n  ".join(shown)


def content_text(content: Any) -> str:
    """MCP results come as content blocks; models and people want the text."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict):
            parts.append(str(block.get("text", "")))
        else:
            parts.append(str(block))
    return "\n".join(parts)
