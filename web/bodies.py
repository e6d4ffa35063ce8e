"""Request bodies: JSON only (the Guard checks the Content-Type), and never more than
MAX_BODY_BYTES, counted as the body arrives rather than trusted from Content-Length."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from web.auth import Refused

# Enough for an edited file of a few hundred KiB; a body past it is refused unread.
MAX_BODY_BYTES = 1024 * 1024


async def read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    too_big = Refused(413, f"the body is larger than {limit:,} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_big
    try:
        return json.loads(body)
    except ValueError as error:
        raise Refused(400, f"the body is not JSON: {error}") from None


def only_keys(body: Any, keys: set[str], what: str) -> dict[str, Any]:
    """A JSON object with no keys but `keys`: a typo is an error, never ignored."""
    if not isinstance(body, dict):
        raise Refused(400, f"{what} must be a JSON object")
    unknown = sorted(set(body) - keys)
    if unknown:
        raise Refused(400, f"{what} takes no {unknown[0]!r} (only {', '.join(sorted(keys))})")
    return body
