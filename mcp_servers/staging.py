"""Where what has no final name yet is built: a folder no move of the destination's can carry.

A folder copy's tree (`copy` of a folder, a folder `move`d to another filesystem) and, where a
file cannot be made without a name (no O_TMPFILE: the portable path, macOS, some file systems),
a file being written exist under a temp name of ours until they are put in place
(capture.put_in_place). Built in the destination's own folder, a move of that folder (or of one
above it) out of the roots while they are built takes them along, and out there the kernel
sandbox refuses their removal: a temp entry left outside the roots.

So they are built in the destination's *staging folder*: from the destination's folder, walk up
its route toward the root while the folder above is on the same device; the last folder reached,
the root itself or, for a destination on another filesystem mounted inside the root, the folder
that filesystem is mounted on, if it is on the same mount as the destination's folder. Only the
final rename (put_in_place: checked before and after, with the staging folder as the new entry's
folder) moves the entry across folders into the folder checked. No move inside the roots can
carry the staging folder out: a tool never moves a root (and a root another process moves is
refused at every call, dirfd.Places.check_root), and a mount point cannot be renamed (EBUSY).
What is left: a folder *above* a mount point inside the root, moved out by another process,
takes the mount along with the staging folder on it.

Built in the destination's folder itself, as before:
- under Landlock ABI 1, which has no REFER right: the kernel refuses every rename across
  folders (EXDEV), so the final rename could not be made (`allow_across_folders`);
- where the destination's folder is its own staging folder (directly in the root, or at the
  top of a mount): nothing changes;
- where the folder found by device is on another mount of the same device (a bind mount: a
  rename between mounts fails with EXDEV too).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mcp_servers.journal import Place
from mcp_servers.parent_checks import Route, hold, let_go, moved, route_of
from mcp_servers.platform_calls import FOLDER_FLAGS, mount_id

_across_folders = True  # False under Landlock ABI 1 (set once at start, before any call)


def allow_across_folders(allowed: bool) -> None:
    """Whether a rename may cross folders here (the kernel sandbox says, at start)."""
    global _across_folders
    _across_folders = allowed


@dataclass(frozen=True)
class Staging:
    """The folder to build in: `fd` (held, with its route), `where` (raw, as errors name
    it) and `place` (where its root's journal finds it)."""

    fd: int
    where: str
    place: Place | None


@contextmanager
def staging_for(folder: int, where: str, place: Place | None) -> Iterator[Staging]:
    """The staging folder of the held folder `folder` (`where`, `place`: its own), held while
    the block runs; `folder` itself where it is its own or nothing may cross folders."""
    route = route_of(folder)
    depth = staging_depth(route, os.fstat(folder).st_dev) if _across_folders else None
    if depth is None:
        yield Staging(folder, where, place)
        return
    fd = reach(route, depth)
    try:
        if not same_mount(fd, folder):
            yield Staging(folder, where, place)
            return
        names = route.names[:depth]
        above = route.ids[:depth]
        hold(fd, Route(route.root, route.root_fd, names, above, route.shown, route.check_root))
        try:
            staged = None if place is None else Place(place.journal, fd, names, place.root)
            yield Staging(fd, route.shown(route.root.joinpath(*names)), staged)
        finally:
            let_go(fd)
    finally:
        os.close(fd)


def staging_depth(route: Route, device: int) -> int | None:
    """How many names below the root the staging folder of the route's folder (on `device`)
    is: the topmost of the folders above it on the same device, up to the root; None when
    that is the folder itself."""
    depth = len(route.names)
    while depth > 0 and device_at(route, depth - 1) == device:
        depth -= 1
    return None if depth == len(route.names) else depth


def device_at(route: Route, depth: int) -> int:
    """The device of the folder `depth` names below the root (0: the root)."""
    if depth == 0:
        return os.fstat(route.root_fd).st_dev
    return route.ids[depth - 1][0]


def reach(route: Route, depth: int) -> int:
    """The folder `depth` names below the root, walked again from the root without following
    a link. Held with the route the check met (`staging_for`), it is compared with the folders
    met then before the final rename and right after it (capture.put_in_place), as every
    folder a tool acts in: one replaced meanwhile refuses the call there."""
    route.check_root(route.root)
    current = os.dup(route.root_fd)
    try:
        for index, name in enumerate(route.names[:depth]):
            try:
                following = os.open(name, FOLDER_FLAGS, dir_fd=current)
            except OSError:  # gone, a link or a file now: not the folder checked
                raise moved(route, index, during=False) from None
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def same_mount(first: int, second: int) -> bool:
    """Whether two open folders are on one mount (True where the system cannot say, not
    Linux or before 5.8: then the device, compared already, is all there is)."""
    ids = mount_id(first), mount_id(second)
    return None in ids or ids[0] == ids[1]
