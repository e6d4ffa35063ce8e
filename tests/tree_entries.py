"""A folder's entries as a test compares them before and after a call: each file's bytes, each
link's text, each folder's presence, by its path below the folder."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any


def entries(top: Path, *, leaving_out: re.Pattern[str] | None = None) -> dict[str, Any]:
    """Every entry below `top`, hidden ones included; those whose own name `leaving_out`
    matches whole are left out (what is below such a folder is not: it would show)."""
    seen: dict[str, Any] = {}
    for current, dirs, files in os.walk(top):
        for name in dirs + files:
            if leaving_out is not None and leaving_out.fullmatch(name):
                continue
            path = Path(current, name)
            relative = str(path.relative_to(top))
            if path.is_symlink():
                seen[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[relative] = "folder"
            else:
                seen[relative] = path.read_bytes()
    return seen
