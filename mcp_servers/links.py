"""Links stay inside: where a relative symlink would point once a move puts it elsewhere.

A relative link is read from where it sits, so moving it, or a folder holding it, to another
depth changes where it points: `notes -> ../../shared/notes` is inside the root at one depth
and outside it at another. A move is checked before it is made: the moved links are resolved
from their new places (reading the moved tree at its old place, since it is not there yet),
and a move that would turn a link that pointed inside into one that points outside is refused.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from mcp_servers.sandbox import Sandbox, is_within
from mcp_servers.walking import Walker

MAX_HOPS = 40  # links followed while resolving one path, as the kernel allows


def resolve_after_move(path: str, source: Path, destination: Path) -> Path | None:
    """Where the absolute `path` leads once `source` is moved to `destination`: the real
    path, or its lexical end where something on the way is missing; None for a link loop.

    Entries below `destination` are looked up at their old place below `source`; nothing is
    left at `source` after the move.
    """
    pending = deque(Path(path).parts[1:])
    current = Path("/")
    hops = 0
    while pending:
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        following = current / name
        if is_within(following, destination):
            on_disk: Path | None = source / following.relative_to(destination)
        else:
            on_disk = None if is_within(following, source) else following
        try:
            found = os.lstat(on_disk) if on_disk is not None else None
        except OSError:
            found = None
        if on_disk is None or found is None:  # missing: the rest is taken as it is written
            return Path(os.path.normpath(following.joinpath(*pending)))
        if not stat.S_ISLNK(found.st_mode):
            current = following
            continue
        hops += 1
        if hops > MAX_HOPS:
            return None
        target = os.readlink(on_disk)
        if os.path.isabs(target):
            current = Path("/")
        parts = Path(target).parts
        pending.extendleft(reversed(parts[1:] if os.path.isabs(target) else parts))
    return current


def relative_links(walker: Walker, source: Path, is_link: bool) -> Iterator[tuple[str, str]]:
    """(place below `source`, "" for `source` itself; link text) of each relative link a
    move of `source` takes along: itself when it is a link, else each link below it that
    points inside now (a link that points outside already is never followed anyway)."""
    if is_link:
        text = os.readlink(source)
        if not os.path.isabs(text):
            yield "", text
        return
    for entry, _ in walker.walk(source):
        if entry.kind == "link":
            text = os.readlink(entry.name, dir_fd=entry.folder_fd)
            if not os.path.isabs(text):
                yield entry.relative, text


def links_leaving(
    sandbox: Sandbox, walker: Walker, source: Path, destination: Path, is_link: bool
) -> list[tuple[str, str]]:
    """(place below `source`, link text) of each link that the move of `source` to
    `destination` would leave pointing outside the roots."""
    leaving = []
    for below, text in relative_links(walker, source, is_link):
        moved_to = destination / below if below else destination
        lands = resolve_after_move(str(moved_to.parent / text), source, destination)
        if lands is not None and not sandbox.is_inside(lands):
            leaving.append((below, text))
    return leaving
