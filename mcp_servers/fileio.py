"""Reading, hashing and classifying file bytes without following a final symlink.

Every open goes through `open_nofollow`, so a link swapped in after the sandbox checked a
path makes the open fail instead of reaching somewhere else.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

BINARY_PROBE = 8 * 1024  # a NUL byte in this many leading bytes marks a file as binary


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_nofollow(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """Open without following a final symlink, so a link swapped in after the check fails."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def read_bytes(path: Path) -> bytes:
    with os.fdopen(open_nofollow(path), "rb") as handle:
        return handle.read()


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with os.fdopen(open_nofollow(path), "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_PROBE]


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary (a NUL byte early on, or not UTF-8)."""
    if looks_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
