"""Listing and walking folders inside the sandbox by descriptor, never following a link.

A walk opens each folder from its parent's descriptor with O_NOFOLLOW, so a folder swapped
for a link mid-walk is skipped instead of walked into. Each entry comes with the descriptor of
the folder holding it, valid while the walk is at it, so a consumer opens files by descriptor
too. Memory stays bounded: a folder's entries are sorted only up to SORTED_UP_TO of them; a
larger folder is walked in the order the filesystem gives. Every entry checks the budget.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mcp_servers.budget import check_budget
from mcp_servers.dirfd import LIST_FLAGS, is_ours, open_listable
from mcp_servers.sandbox import Sandbox

if TYPE_CHECKING:
    from mcp_servers.dirfd import Places

logger = logging.getLogger("fsagent.filesystem")

SORTED_UP_TO = 10_000  # entries of one folder sorted by name; a larger folder is streamed


def matches_any(name: str, relative: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(relative, g) for g in globs)


@dataclass
class Unreadable:
    """The folders one walk could not list or enter: how many, and the first of them."""

    count: int = 0
    first: str | None = None
    error: str = ""

    def add(self, path: str, error: OSError) -> None:
        self.count += 1
        if self.first is None:
            self.first, self.error = path, error.strerror or str(error)


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry as the sandbox lets a client see it.

    Names and paths are raw (see names.py for how answers show them), and plain strings:
    walks create one Entry per file, and pathlib's overhead would dominate a grep over ten
    thousand small files.
    """

    name: str
    path: str  # the entry itself, by name (a link stays a link); for display and link checks
    relative: str  # below the folder that was listed or walked
    kind: Literal["dir", "file", "link", "other", "outside-link"]
    folder_fd: int  # the folder holding it: open while the listing or walk is at this entry
    target: Path | None = None  # real target of a link that stays inside

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


class Walker:
    """Lists and walks folders without ever following a link."""

    def __init__(self, sandbox: Sandbox, places: Places) -> None:
        self.sandbox = sandbox
        self.places = places

    def classify(self, item: os.DirEntry[str], folder: int, path: str, prefix: str) -> Entry:
        name = item.name
        entry_path, relative = f"{path}/{name}", prefix + name
        if item.is_symlink():
            try:
                target = Path(os.path.realpath(entry_path, strict=True))
            except OSError:  # dangling or a loop: treated like a link that leaves
                return Entry(name, entry_path, relative, "outside-link", folder)
            if not self.sandbox.is_inside(target):
                return Entry(name, entry_path, relative, "outside-link", folder)
            return Entry(name, entry_path, relative, "link", folder, target)
        if item.is_dir(follow_symlinks=False):
            return Entry(name, entry_path, relative, "dir", folder)
        if item.is_file(follow_symlinks=False):
            return Entry(name, entry_path, relative, "file", folder)
        return Entry(name, entry_path, relative, "other", folder)

    def stream(self, folder: int, path: str, prefix: str = "") -> Iterator[Entry]:
        """The entries of a listable folder in the order the filesystem gives."""
        with os.scandir(folder) as items:
            for item in items:
                check_budget()
                if not is_ours(item.name):
                    yield self.classify(item, folder, path, prefix)

    def entries(
        self, folder: int, path: str, prefix: str = "", unreadable: Unreadable | None = None
    ) -> Generator[Entry, None, None]:
        """The entries of a listable folder, sorted by name unless there are very many."""
        check_budget()
        first: list[Entry] = []
        try:
            with os.scandir(folder) as items:
                for item in items:
                    if is_ours(item.name):
                        continue
                    first.append(self.classify(item, folder, path, prefix))
                    if len(first) > SORTED_UP_TO:
                        break
        except OSError as error:
            logger.info("cannot list %s: %s", path, error)
            if unreadable is not None:
                unreadable.add(path, error)
            return
        if len(first) <= SORTED_UP_TO:
            first.sort(key=lambda entry: entry.name)
            yield from first
            return
        del first
        try:
            yield from self.stream(folder, path, prefix)
        except OSError as error:
            logger.info("cannot list %s: %s", path, error)
            if unreadable is not None:
                unreadable.add(path, error)

    def walk(
        self,
        top: Path,
        exclude: list[str] | None = None,
        max_depth: int | None = None,
        unreadable: Unreadable | None = None,
        held: int | None = None,
    ) -> Iterator[tuple[Entry, int]]:
        """Entries below the folder `top` (checked), depth first, with their depth (0 for
        top's children); from `held`, a listable descriptor of it, when the caller has one.

        Excluded entries are neither yielded nor descended into; links are yielded but never
        descended into, and links that leave the roots are left out. Folders that cannot be
        listed or entered are counted in `unreadable` (when given).
        """
        if held is not None:
            first = open_listable(held)
        else:
            with self.places.folder(top) as reached:
                first = open_listable(reached)
        stack = [(first, self.entries(first, str(top), unreadable=unreadable))]
        try:
            while stack:
                check_budget()
                folder, items = stack[-1]
                entry = next(items, None)
                if entry is None:
                    stack.pop()
                    items.close()
                    os.close(folder)
                    continue
                if entry.kind == "outside-link":
                    continue
                if exclude and matches_any(entry.name, entry.relative, exclude):
                    continue
                depth = len(stack) - 1
                yield entry, depth
                if entry.is_dir and (max_depth is None or depth + 1 < max_depth):
                    child = self.open_child(folder, entry, unreadable)
                    if child is not None:
                        below = self.entries(child, entry.path, entry.relative + "/", unreadable)
                        stack.append((child, below))
        finally:
            for folder, items in stack:
                items.close()
                os.close(folder)

    def open_child(
        self, folder: int, entry: Entry, unreadable: Unreadable | None = None
    ) -> int | None:
        """The folder `entry` opened for listing, or None (unreadable, or swapped for a link
        or a file since it was listed: either way it is not walked into)."""
        try:
            return os.open(entry.name, LIST_FLAGS, dir_fd=folder)
        except OSError as error:
            logger.info("not walking into %s: %s", entry.path, error)
            if unreadable is not None and error.errno not in (errno.ELOOP, errno.ENOTDIR):
                unreadable.add(entry.path, error)
            return None
