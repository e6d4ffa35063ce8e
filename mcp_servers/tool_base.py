"""What every set of tools shares: path arguments checked into existing files and folders and
reached by descriptor, and paths named the way answers show them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.dirfd import Places, entry_stat, open_listable
from mcp_servers.fileio import kind_of, open_regular
from mcp_servers.names import quoted_given, show
from mcp_servers.sandbox import Resolved, Sandbox
from mcp_servers.walking import Walker

MAX_LISTED = 1000  # entries in a listing or search answer


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolError(f"invalid_argument: {name} must be between {low} and {high}, got {value}")


class ToolBase:
    """The shared steps of the tool sets; each public method of a subclass is a tool."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.places = Places(sandbox)
        self.walker = Walker(sandbox, self.places)

    # -- shared steps ---------------------------------------------------------------------

    def existing(self, given: str) -> Resolved:
        resolved = self.sandbox.resolve(given)
        if not resolved.exists:
            raise ToolError(f"not found: {show_given(given)}")
        return resolved

    def existing_folder(self, given: str) -> Resolved:
        resolved = self.existing(given)
        if not resolved.real.is_dir():
            kind = kind_of(self.stat_of(resolved).st_mode)
            raise ToolError(f"{quoted_given(given)} is a {kind}, not a folder")
        return resolved

    def stat_of(self, resolved: Resolved) -> os.stat_result:
        """The entry at a checked path, reached by descriptor (a link stays a link)."""
        if resolved.real in self.sandbox.roots:
            return os.stat(self.places.root_fds[resolved.real])
        with self.places.parent(resolved.real) as (folder, name):
            return entry_stat(folder, name)

    @contextmanager
    def opened_file(self, given: str) -> Iterator[tuple[int, os.stat_result, Resolved]]:
        """(descriptor, stat, resolved) of the existing regular file `given`, open to read."""
        resolved = self.existing(given)
        with self.places.parent(resolved.real) as (folder, name):
            fd, found = open_regular(folder, name, self.raw_relative(resolved.real))
        try:
            yield fd, found, resolved
        finally:
            os.close(fd)

    @contextmanager
    def listed_folder(self, resolved: Resolved) -> Iterator[int]:
        """A listable descriptor of a checked folder."""
        with self.places.folder(resolved.real) as folder:
            fd = open_listable(folder)
        try:
            yield fd
        finally:
            os.close(fd)

    def raw_relative(self, real: Path) -> str:
        """`real` relative to the first root (in full when in another root), not escaped."""
        return self.places.shown(real)

    def relative(self, real: Path) -> str:
        """`real` as answers show it (see names.py)."""
        return show(self.raw_relative(real))

    def shown_below(self, folder: Path) -> Callable[[str], str]:
        """A function that shows an entry below `folder` (given raw, relative to it)."""
        base = self.raw_relative(folder)
        if base == ".":
            return show
        shown_base = show(base)
        return lambda relative: f"{shown_base}/{show(relative)}"


def show_given(given: str) -> str:
    """A path argument as answers show it: parsed and shown again, so it round-trips."""
    return quoted_given(given)[1:-1]
