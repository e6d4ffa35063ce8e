"""What a model server said when it refused a request: its own words, read in one place.

Servers put their reason in different shapes, and openai-python carries each differently:

- llama.cpp and OpenAI answer `{"error": {"message": "...", "type": ...}}`; the client's
  exception text is "Error code: 400 - <message>" and `error.body` is the inner dict;
- LM Studio answers `{"error": "<a plain string>"}` (HTTP 400 for an overflow, 500 for a crash);
  openai-python puts only a dict error's `message` into the exception text, so the text is
  just "Error code: 400" and the string is in `error.body` (openai/_base_client.py,
  `_make_status_error_from_response`; openai/_client.py, `_make_status_error`, which unwraps
  the "error" key);
- LM Studio 0.4.2x answers an overflow with HTTP 200 and one SSE `event: error`; the client
  raises a plain `APIError` whose `body` is the frame's "error" value (openai/_streaming.py).

Everything that decides on a server's answer (is it an overflow, what context does it name)
and everything that shows it reads `server_words`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_MESSAGE_KEYS = ("message", "error", "detail", "msg")


def server_words(error: BaseException) -> str:
    """The server's own reason for an error, or the exception's text when it gave none."""
    found = _words_in(getattr(error, "body", None))
    if found:
        return found
    message = getattr(error, "message", None)
    return message if isinstance(message, str) and message else str(error)


def _words_in(body: Any, depth: int = 0) -> str:
    if isinstance(body, str):
        return body.strip()
    if isinstance(body, Mapping) and depth < 3:
        for key in _MESSAGE_KEYS:
            found = _words_in(body.get(key), depth + 1)
            if found:
                return found
    return ""


def one_line(text: str, limit: int = 200) -> str:
    """A server's words on one line, cut visibly."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    return f"{flat[: limit - 1].rstrip()}…"
