"""The inbox's listing by versions (issue 43: the page fetched every waiting thread, with its
calls and cut previews, on every change and every poll).

Each waiting thread's entry carries an `etag`: a digest of the entry itself, as it is sent, so
anything the page would draw differently (a call's `preview_id` first: the state its diff is
of) is another etag, and an etag the page holds is the entry it drew, byte for byte. The
listing's own ETag is a digest of its threads' names and etags, in order.

A page that has drawn a listing asks for what changed:

    GET /api/admin/approvals?known=NAME:ETAG,NAME:ETAG   (each NAME percent-encoded)
    If-None-Match: "<the listing's ETag it drew>"

and is answered 304 when the listing is the one it names; otherwise `threads` (every waiting
thread's name and etag, in order), `approvals` (the entries whose etag is not the one the page
named for that thread: new or changed), and `gone` (the names it named that wait no more).
Without `known`, every entry is sent. The entries are built as before (web/payloads.py), their
diffs from web/preview_cache.py: an unchanged thread costs its look (a plan, a count) and a
digest, never a diff, and is not sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote


class BadKnown(ValueError):
    """A `known` query that is not NAME:ETAG pairs."""


def digest(value: Any) -> str:
    """32 hex of a sha256 over `value` as canonical JSON: equal values, equal digests."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def with_etag(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with its etag: the digest of everything else in it."""
    return {**entry, "etag": digest({k: v for k, v in entry.items() if k != "etag"})}


def listing_etag(threads: Sequence[Mapping[str, str]]) -> str:
    """The listing's ETag header: its threads and their etags, in order (quoted, as HTTP
    writes an entity tag)."""
    return f'"{digest([[t["thread"], t["etag"]] for t in threads])}"'


def parse_known(query: str | None) -> dict[str, str]:
    """`NAME:ETAG,...` (each NAME percent-encoded, so a legacy name's `,` or `:` cannot split
    it) as name -> etag."""
    known: dict[str, str] = {}
    for pair in (query or "").split(","):
        if not pair:
            continue
        name, colon, etag = pair.rpartition(":")
        if not colon or not name or not etag:
            raise BadKnown(
                f"known={pair[:80]!r} is not NAME:ETAG (a thread's percent-encoded name and "
                "the etag its last listing gave it, pairs separated by commas)"
            )
        known[unquote(name)] = etag
    return known


def matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an If-None-Match header names `etag` (weakly compared, as RFC 9110 says for
    this header; `*` names any)."""
    if not if_none_match:
        return False
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return "*" in tags or etag in [tag.removeprefix("W/") for tag in tags]


def changes(entries: Sequence[dict[str, Any]], known: Mapping[str, str] | None) -> dict[str, Any]:
    """The answer to a page that holds `known` (None: it holds nothing, send all)."""
    threads = [{"thread": e["thread"], "etag": e["etag"]} for e in entries]
    if known is None:
        return {"threads": threads, "approvals": list(entries), "gone": []}
    waiting = {e["thread"] for e in entries}
    return {
        "threads": threads,
        "approvals": [e for e in entries if known.get(e["thread"]) != e["etag"]],
        "gone": [name for name in known if name not in waiting],
    }
