"""Calls, results and long text in a line or a few: how every front-end and message shows them.
Long text is always cut visibly: the reader sees that, and how much, was left out."""

from __future__ import annotations

import json
from typing import Any

CLIP_AT = 300
RESULT_LINES = 3


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
