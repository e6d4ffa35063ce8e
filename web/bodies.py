"""Request bodies: JSON only (the Guard checks the Content-Type), and never more than
MAX_BODY_BYTES, counted as the body arrives rather than trusted from Content-Length, within
BODY_SECONDS (a client that sends a byte a minute holds no connection for good).

JSON that two readers could read two ways is refused: a key given twice (Python keeps the
last, other parsers the first: `{"approved": false, "approved": true}` must not approve), and
nesting deeper than MAX_DEPTH (which would end in a RecursionError, here or later)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from fastapi import Request

from web.auth import Refused

# Enough for an edited file of a few hundred KiB; a body past it is refused unread.
MAX_BODY_BYTES = 1024 * 1024
# Tool arguments nest a few levels (edits: a list of objects); nothing we take needs 64.
MAX_DEPTH = 64
# A whole body within this many seconds; the tests shorten it (FSAGENT_BODY_SECONDS).
BODY_SECONDS = float(os.environ.get("FSAGENT_BODY_SECONDS") or 30)


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Duplicate(f"the key {key[:60]!r} is given twice")
        found[key] = value
    return found


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest deeper than `limit`, walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def parse_json(body: bytes | str) -> Any:
    deep = Refused(400, f"the body nests deeper than {MAX_DEPTH} levels; send flatter JSON")
    try:
        value = json.loads(body, object_pairs_hook=_no_duplicates)
    except RecursionError:  # the parser's own limit, far past ours
        raise deep from None
    except _Duplicate as error:
        raise Refused(400, f"the body is ambiguous JSON: {error}; give each key once") from None
    except ValueError as error:
        raise Refused(400, f"the body is not JSON: {error}") from None
    if too_deep(value):
        raise deep
    return value


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    too_big = Refused(413, f"the body is larger than {limit:,} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    body = bytearray()
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise too_big
    except TimeoutError:
        raise Refused(
            408, f"the body did not arrive within {BODY_SECONDS:g} s; send it at once"
        ) from None
    return parse_json(bytes(body))


def only_keys(body: Any, keys: set[str], what: str) -> dict[str, Any]:
    """A JSON object with no keys but `keys`: a typo is an error, never ignored."""
    if not isinstance(body, dict):
        raise Refused(400, f"{what} must be a JSON object")
    unknown = sorted(set(body) - keys)
    if unknown:
        raise Refused(400, f"{what} takes no {unknown[0]!r} (only {', '.join(sorted(keys))})")
    return body
