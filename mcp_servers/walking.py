"""Listing and walking folders inside the sandbox without following a link that leaves it."""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mcp_servers.sandbox import Sandbox

logger = logging.getLogger("fsagent.filesystem")


def matches_any(name: str, relative: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(relative, g) for g in globs)


@dataclass(frozen=True)
class Entry:
    """One directory entry as the sandbox lets a client see it.

    Paths are plain strings here: walks create one Entry per file, and pathlib's overhead
    would dominate a grep over ten thousand small files.
    """

    name: str
    path: str  # the entry itself (a link stays a link)
    relative: str  # below the folder that was listed or walked
    kind: Literal["dir", "file", "link", "other", "outside-link"]
    target: Path | None = None  # real target of a link that stays inside

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


class Walker:
    """Lists and walks folders without ever following a link that leaves the roots."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def classify(self, item: os.DirEntry[str], prefix: str) -> Entry:
        name, path, relative = item.name, item.path, prefix + item.name
        if item.is_symlink():
            try:
                target = Path(os.path.realpath(path, strict=True))
            except OSError:  # dangling or a loop: treated like a link that leaves
                return Entry(name, path, relative, "outside-link")
            if not self.sandbox.is_inside(target):
                return Entry(name, path, relative, "outside-link")
            return Entry(name, path, relative, "link", target)
        if item.is_dir(follow_symlinks=False):
            return Entry(name, path, relative, "dir")
        if item.is_file(follow_symlinks=False):
            return Entry(name, path, relative, "file")
        return Entry(name, path, relative, "other")

    def scan(self, folder: Path | str, prefix: str = "") -> list[Entry]:
        """The entries of one folder sorted by name; an unreadable folder is empty."""
        try:
            with os.scandir(folder) as items:
                entries = [self.classify(item, prefix) for item in items]
        except OSError as error:
            logger.info("cannot list %s: %s", folder, error)
            return []
        entries.sort(key=lambda entry: entry.name)
        return entries

    def walk(
        self, top: Path, exclude: list[str] | None = None, max_depth: int | None = None
    ) -> Iterator[tuple[Entry, int]]:
        """Entries below `top`, depth first, with their depth (0 for top's children).

        Excluded entries are neither yielded nor descended into; links are yielded but never
        descended into, and links that leave the roots are left out.
        """
        stack = [iter(self.scan(top))]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            if entry.kind == "outside-link":
                continue
            if exclude and matches_any(entry.name, entry.relative, exclude):
                continue
            depth = len(stack) - 1
            yield entry, depth
            if entry.is_dir and (max_depth is None or depth + 1 < max_depth):
                stack.append(iter(self.scan(entry.path, entry.relative + "/")))
