"""One walker that copies a folder's tree, and the policies of the two tools that copy one.

A folder copy (`copy`) and a folder moved to another filesystem (`move`, moving_across.py)
both copy a tree into a folder of ours under a temp name; they differ in what they make of
each entry, which is their policy here:

- a move carries everything as it is (`Carrying`): every folder and file with its owner,
  mode, extended attributes and times, every link with its own text and times, the names of
  a file hard-linked inside the tree as links to one copy (as `mv` across filesystems keeps
  them, copying like `cp -a`), each file and folder made durable before the original goes;
  what it cannot carry (a FIFO, socket or device, a name of the server's own) was refused
  before the copy began (moving_across.py), so meeting one on the way stops it;
- a copy (`Copying`) makes new files: the source's permission bits less the umask, never an
  owner, set-id bits or attributes, and no link (it never makes one); links, special files
  and entries under the server's own names are skipped and listed, and folders it cannot
  list are counted (the copy then fails whole).

The walk follows no link: each folder is opened from its parent's descriptor with
`O_NOFOLLOW`, and every entry is read by descriptor. A folder's entries are taken in the order
of their names (a folder of more than SORTED_UP_TO in the order the filesystem gives, so one
of millions is never held whole), and the call's budget is checked per entry.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Callable, Generator
from contextlib import suppress
from dataclasses import dataclass, field

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import CappedLines, more_marker
from mcp_servers.budget import check_budget
from mcp_servers.dirfd import LIST_FLAGS, walk_down
from mcp_servers.fileio import copy_sparse, open_checked
from mcp_servers.permissions import take_over
from mcp_servers.race_hook import step
from mcp_servers.replacing import NEW_FILE_FLAGS
from mcp_servers.reserved import RESERVED_PREFIX
from mcp_servers.walking import SORTED_UP_TO, Unreadable
from mcp_servers.xattrs import attributes_of, give_attributes

Parts = tuple[str, ...]  # names below the folder copied
ShowBelow = Callable[[str], str]  # a path below the source (raw) as answers show it
PERMISSION_BITS = 0o777  # a copy keeps these of the source's mode, never setuid or setgid
SKIPPED_LISTED_BYTES = 64 * 1024  # of names a folder copy lists as skipped, per list


@dataclass
class Copied:
    """How far a folder copy got: the files copied, and the entry (below the source) it
    was at, so a copy that stops says where."""

    files: int = 0
    at: str = ""


class CannotCarry(ToolError):
    """An entry a move cannot carry, met while copying (made after the check before it)."""

    def __init__(self, parts: Parts, mode: int) -> None:
        super().__init__("/".join(parts))
        self.parts = parts
        self.mode = mode


class Policy:
    """What a tree copy makes of each entry. `shown` is the source folder's path (raw), for
    errors; `top` the copy's own top folder (listable), once the walk began."""

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.top = -1

    def path(self, parts: Parts) -> str:
        return posixpath.join(self.shown, *parts)

    def file(self, folder: int, name: str, into: int, parts: Parts) -> int:
        """Copy the regular file `name` of `folder` into `into`; its size."""
        raise NotImplementedError

    def folder(self, source: int, copy: int, parts: Parts) -> None:
        """The copy of the folder `source` is full: give it what it keeps, and close it."""
        os.close(copy)

    def link(self, folder: int, item: os.DirEntry[str], into: int, parts: Parts) -> None:
        raise NotImplementedError

    def other(self, item: os.DirEntry[str], parts: Parts) -> None:
        """A FIFO, socket or device (or an entry of no known type)."""
        raise NotImplementedError

    def reserved(self, item: os.DirEntry[str], parts: Parts) -> None:
        """An entry under one of the server's own names (reserved.py), not walked into."""
        raise NotImplementedError

    def unreadable(self, parts: Parts, error: OSError) -> None:
        """A folder that could not be opened for listing, not walked into."""
        raise error


def listing(folder: int) -> Generator[os.DirEntry[str], None, None]:
    """The entries of a listable folder: up to SORTED_UP_TO of them read whole, its listing
    closed (so a walk holds one descriptor per level of the source, not two: a deep tree
    runs out of them later) and sorted by name; a larger folder is streamed as it comes."""
    items = os.scandir(folder)
    try:
        first: list[os.DirEntry[str]] = []
        for item in items:
            first.append(item)
            if len(first) > SORTED_UP_TO:
                break
        else:
            items.close()
            first.sort(key=lambda item: item.name)
            yield from first
            return
        yield from first
        yield from items
    finally:
        items.close()


def copy_tree(source: int, folder: int, name: str, policy: Policy, progress: Copied) -> None:
    """Copy everything below the listable folder `source` into the folder `name` in
    `folder` (made by the caller, mode 0o700), entry by entry as `policy` says."""
    top = os.open(name, LIST_FLAGS, dir_fd=folder)
    policy.top = top
    stack: list[tuple[int, Generator[os.DirEntry[str], None, None], int, Parts]] = []
    try:
        first = os.dup(source)
        try:
            stack.append((first, listing(first), os.dup(top), ()))
        except BaseException:
            os.close(first)
            raise
        while stack:
            check_budget()
            current, items, copy, parts = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                items.close()
                try:
                    policy.folder(current, copy, parts)
                finally:
                    os.close(current)
                continue
            below = (*parts, item.name)
            progress.at = "/".join(below)
            if item.name.startswith(RESERVED_PREFIX):
                policy.reserved(item, below)
            elif item.is_dir(follow_symlinks=False):
                try:
                    child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                except OSError as error:
                    policy.unreadable(below, error)
                    continue
                try:
                    os.mkdir(item.name, 0o700, dir_fd=copy)
                    made = os.open(item.name, LIST_FLAGS, dir_fd=copy)
                except BaseException:
                    os.close(child)
                    raise
                stack.append((child, listing(child), made, below))
            elif item.is_file(follow_symlinks=False):
                policy.file(current, item.name, copy, below)
                progress.files += 1
            elif item.is_symlink():
                policy.link(current, item, copy, below)
            else:
                policy.other(item, below)
    finally:
        for current, items, copy, _ in stack:
            items.close()
            os.close(current)
            os.close(copy)
        os.close(top)
        policy.top = -1


def times_of(found: os.stat_result) -> tuple[int, int]:
    """The access and modification times a moved entry keeps, as `mv` keeps them."""
    return found.st_atime_ns, found.st_mtime_ns


class Carrying(Policy):
    """A move's: everything as it is, hard links inside the tree kept, all made durable."""

    def __init__(self, shown: str) -> None:
        super().__init__(shown)
        # (device, inode) of a source file with other names -> where its copy is (below the
        # copy's top) and how many of its names are still to come.
        self.linked: dict[tuple[int, int], tuple[Parts, int]] = {}

    def file(self, folder: int, name: str, into: int, parts: Parts) -> int:
        shown = self.path(parts)
        reader, found = open_checked(folder, name, shown)
        try:
            if found.st_nlink > 1 and self.link_again(found, name, into, parts):
                return 0
            writer = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=into)
            try:
                size, _ = copy_sparse(reader, writer)
                take_over(writer, found)
                give_attributes(writer, attributes_of(folder, name), shown)
                os.utime(writer, ns=times_of(found))
                os.fsync(writer)
                if found.st_nlink > 1:  # its other names, met later, are linked to this copy
                    key = (found.st_dev, found.st_ino)
                    self.linked.setdefault(key, (parts, found.st_nlink - 1))
            finally:
                os.close(writer)
        finally:
            os.close(reader)
        return size

    def link_again(self, found: os.stat_result, name: str, into: int, parts: Parts) -> bool:
        """Give the copy made for another name of this file the name `name` in `into`, as a
        hard link (True), when that file was copied already."""
        key = (found.st_dev, found.st_ino)
        first = self.linked.get(key)
        if first is None:
            return False
        where, left = first
        step("linking", "/".join(parts))
        # Its folder is reached from the copy's own top one name at a time, following no
        # link (the copy's folders are ours, but under a root: a folder swapped for a link
        # there must not make this a link to a file elsewhere).
        holder = walk_down(self.top, where[:-1], self.path(where[:-1]))
        try:
            os.link(where[-1], name, src_dir_fd=holder, dst_dir_fd=into, follow_symlinks=False)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            return False  # Landlock ABI 1 (no REFER) refuses a link across folders: a copy
        finally:
            os.close(holder)
        if left > 1:
            self.linked[key] = (where, left - 1)
        else:  # every name of it met: forgotten
            del self.linked[key]
        return True

    def folder(self, source: int, copy: int, parts: Parts) -> None:
        try:
            found = os.fstat(source)
            take_over(copy, found)
            give_attributes(copy, attributes_of(source, "."), self.path(parts))
            # Last: every entry made in it changed its modification time.
            os.utime(copy, ns=times_of(found))
            os.fsync(copy)
        finally:
            os.close(copy)

    def link(self, folder: int, item: os.DirEntry[str], into: int, parts: Parts) -> None:
        found = item.stat(follow_symlinks=False)
        os.symlink(os.readlink(item.name, dir_fd=folder), item.name, dir_fd=into)
        with suppress(PermissionError):  # not root: the link is ours, as a file's
            os.chown(item.name, found.st_uid, found.st_gid, dir_fd=into, follow_symlinks=False)
        os.utime(item.name, ns=times_of(found), dir_fd=into, follow_symlinks=False)

    def other(self, item: os.DirEntry[str], parts: Parts) -> None:
        raise CannotCarry(parts, item.stat(follow_symlinks=False).st_mode)

    def reserved(self, item: os.DirEntry[str], parts: Parts) -> None:
        raise CannotCarry(parts, item.stat(follow_symlinks=False).st_mode)


@dataclass
class Skipped:
    """What a folder copy left out, listed by path as answers show it."""

    links: CappedLines = field(default_factory=lambda: CappedLines(SKIPPED_LISTED_BYTES))
    other: CappedLines = field(default_factory=lambda: CappedLines(SKIPPED_LISTED_BYTES))
    reserved: CappedLines = field(default_factory=lambda: CappedLines(SKIPPED_LISTED_BYTES))


class Copying(Policy):
    """A copy's: new files with the source's permission bits less the umask; links,
    special files and the server's own entries skipped and listed; folders that cannot be
    listed counted (the caller refuses the copy then)."""

    def __init__(self, shown: str, umask: int, show_below: ShowBelow) -> None:
        super().__init__(shown)
        self.umask = umask
        self.show_below = show_below
        self.folders = 0
        self.bytes = 0
        self.skipped = Skipped()
        self.unreadable_folders = Unreadable()

    def file(self, folder: int, name: str, into: int, parts: Parts) -> int:
        reader, found = open_checked(folder, name, self.path(parts))
        try:
            mode = stat.S_IMODE(found.st_mode) & PERMISSION_BITS & ~self.umask
            writer = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=into)
            try:
                size, _ = copy_sparse(reader, writer)
                os.fchmod(writer, mode)
            finally:
                os.close(writer)
        finally:
            os.close(reader)
        self.bytes += size
        return size

    def folder(self, source: int, copy: int, parts: Parts) -> None:
        """Given its source's permission bits (less the umask) now that it is full."""
        try:
            mode = stat.S_IMODE(os.fstat(source).st_mode) & PERMISSION_BITS & ~self.umask
            os.fchmod(copy, mode)
        finally:
            os.close(copy)
        self.folders += 1 if parts else 0

    def link(self, folder: int, item: os.DirEntry[str], into: int, parts: Parts) -> None:
        self.skipped.links.add(self.show_below("/".join(parts)))

    def other(self, item: os.DirEntry[str], parts: Parts) -> None:
        self.skipped.other.add(self.show_below("/".join(parts)))

    def reserved(self, item: os.DirEntry[str], parts: Parts) -> None:
        self.skipped.reserved.add(self.show_below("/".join(parts)))

    def unreadable(self, parts: Parts, error: OSError) -> None:
        self.unreadable_folders.add(self.path(parts), error)

    def summary(self, files: int) -> dict[str, object]:
        return {
            "files": files,
            "folders": self.folders,
            "bytes": self.bytes,
            "skipped_links": listed_names(self.skipped.links),
            "skipped_other": listed_names(self.skipped.other),
            "skipped_reserved": listed_names(self.skipped.reserved),
        }


def listed_names(names: CappedLines) -> list[str]:
    """The names kept, and how many more there were."""
    return names.lines + ([more_marker(names.hidden)] if names.hidden else [])
