"""What every set of tools shares: path arguments checked into existing files and folders,
paths named the way answers show them, and the answer limits, markers and JSON they use."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.sandbox import Resolved, Sandbox
from mcp_servers.walking import Walker

READ_CAP = 256 * 1024  # bytes of file content in one answer
MAX_LISTED = 1000  # entries in a listing or search answer


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def more_marker(hidden: int) -> str:
    return f"(+{hidden:,} more)"


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolError(f"invalid_argument: {name} must be between {low} and {high}, got {value}")


class ToolBase:
    """The shared steps of the tool sets; each public method of a subclass is a tool."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.walker = Walker(sandbox)

    # -- shared steps ---------------------------------------------------------------------

    def existing(self, given: str) -> Resolved:
        resolved = self.sandbox.resolve(given)
        if not resolved.exists:
            raise ToolError(f"not found: {given}")
        return resolved

    def existing_file(self, given: str) -> Resolved:
        resolved = self.existing(given)
        if resolved.real.is_dir():
            raise ToolError(f"{given!r} is a folder, not a file")
        if not resolved.real.is_file():
            raise ToolError(f"{given!r} is not a regular file")
        return resolved

    def existing_folder(self, given: str) -> Resolved:
        resolved = self.existing(given)
        if not resolved.real.is_dir():
            raise ToolError(f"{given!r} is a file, not a folder")
        return resolved

    def relative(self, real: Path) -> str:
        root = self.sandbox.root_of(real)
        if root is None:  # cannot happen for a resolved path; never print an outside name
            return "?"
        relative = real.relative_to(root).as_posix() or "."
        return relative if root == self.sandbox.roots[0] else str(real)

    def shown_below(self, folder: Path) -> Callable[[str], str]:
        """A function that names an entry below `folder` the way tools report paths."""
        base = self.relative(folder)
        return lambda relative: relative if base == "." else f"{base}/{relative}"
