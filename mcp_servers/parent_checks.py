"""The act runs in the folder that was checked.

A tool checks a path by walking down from its root's descriptor one name at a time
(dirfd.walk_down), then acts with `*at` calls in the folder descriptor it reached. A descriptor
follows its folder wherever the folder goes: a folder on the way moved out of the roots, or
replaced by another folder or a link, between the check and the act, would take the act with it
(outside, where only the kernel sandbox, if there is one, still stands in the way). So every
folder a tool may act in is held with its route: the root, the names from the root and each
folder's device and inode as the check met them. Right before a tool creates, renames or
removes anything, `verify` walks the same names again from the root (O_NOFOLLOW, so a link is
no folder) and compares each folder with the one met at the check; the first that differs
refuses the call, by the path the person knows.

What remains is the instant between `verify` and the act's one call; capture.py checks again
right after each act that can be undone and undoes it (docs/filesystem-server.md says what
each platform guarantees).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp_servers.names import quoted
from mcp_servers.platform_calls import FOLDER_FLAGS
from mcp_servers.sandbox import SandboxError

FolderId = tuple[int, int]  # device, inode


class ParentChanged(SandboxError):
    """A folder on the way to where a call acts is no longer the one checked."""


@dataclass(frozen=True)
class Route:
    """How a held folder was reached at the check: from `root_fd` (the root `root`) by
    `names`, meeting the folders `ids` (one per name)."""

    root: Path
    root_fd: int
    names: tuple[str, ...]
    ids: tuple[FolderId, ...]
    shown: Callable[[Path], str]  # a path as errors name it (dirfd.Places.shown)
    check_root: Callable[[Path], None]  # refuses a root replaced since the start


# The folders held now, by descriptor: a descriptor is one folder while it is open, and is
# taken out before it is closed (dirfd.Places).
_routes: dict[int, Route] = {}
_lock = threading.Lock()


def hold(fd: int, route: Route) -> None:
    with _lock:
        _routes[fd] = route


def let_go(fd: int) -> None:
    with _lock:
        _routes.pop(fd, None)


def route_of(fd: int) -> Route:
    with _lock:
        route = _routes.get(fd)
    if route is None:  # every folder a tool acts in is held: never act in one that is not
        raise ParentChanged("internal error: a folder to act in was not reached from its root")
    return route


def identity(found: os.stat_result) -> FolderId:
    return found.st_dev, found.st_ino


def verify(fd: int, during: bool = False) -> None:
    """Refuse unless the folder held as `fd` is still where the check met it: every folder on
    its way from the root, reached by the same names without following a link, is the one
    met then (`during`: the check right after an act, whose error says the act was undone)."""
    route = route_of(fd)
    route.check_root(route.root)
    current = os.dup(route.root_fd)
    try:
        for index, name in enumerate(route.names):
            try:
                following = os.open(name, FOLDER_FLAGS, dir_fd=current)
            except OSError:  # gone, a link or a file now: not the folder checked
                raise moved(route, index, during) from None
            os.close(current)
            current = following
            if identity(os.fstat(current)) != route.ids[index]:
                raise moved(route, index, during)
    finally:
        os.close(current)


def moved(route: Route, index: int, during: bool) -> ParentChanged:
    shown = quoted(route.shown(route.root.joinpath(*route.names[: index + 1])))
    if during:
        return ParentChanged(
            f"changed while acting: {shown} was moved or replaced during the act; what was "
            "done there was undone; look at it and try again"
        )
    return ParentChanged(
        f"changed while waiting: {shown} was moved or replaced after the check; nothing "
        "was changed; look at it and try again"
    )
