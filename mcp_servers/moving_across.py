"""A folder moved to another filesystem: what cannot go, and the copy that goes.

A rename cannot cross filesystems (nor, under Landlock ABI 1, folders), so `move` copies a
folder there (tree_writes.move_across) and removes the original once the copy is in place.
The copy carries everything a move would: every folder (its owner, mode and extended
attributes), every file (its bytes, holes kept, owner, mode and extended attributes, made
durable before the original goes) and every link (its own text; `refuse_links_leaving` has
checked where each leads from its new place). A FIFO, socket or device has no copy that is
the same thing, so a tree holding one is refused before anything is copied, in one line,
rather than moved without it (a folder copy skips and lists them; a move must not drop
anything). Hard links inside the tree arrive as separate files with the same bytes.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.budget import check_budget
from mcp_servers.dirfd import LIST_FLAGS, open_listable, scan_names
from mcp_servers.fileio import copy_sparse, open_checked
from mcp_servers.permissions import take_over
from mcp_servers.replacing import NEW_FILE_FLAGS
from mcp_servers.xattrs import attributes_of, give_attributes

Parts = tuple[str, ...]  # names below the folder moved


@dataclass
class Copied:
    """How far a folder copy got: the files copied, and the entry (below the source) it
    was at, so a copy that stops says where."""

    files: int = 0
    at: str = ""


@dataclass
class Uncarried:
    """The entries below a folder that a copy cannot carry: how many, and the first."""

    count: int = 0
    first: Parts = ()
    mode: int = 0


def uncarried(top: int) -> Uncarried:
    """The FIFOs, sockets and devices below the listable folder `top` (no link followed)."""
    found = Uncarried()
    stack: list[tuple[int, Parts]] = [(os.dup(top), ())]
    try:
        while stack:
            check_budget()
            current, parts = stack.pop()
            try:
                for item in scan_names(current):
                    if item.is_dir(follow_symlinks=False):
                        child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                        stack.append((child, (*parts, item.name)))
                    elif not (item.is_file(follow_symlinks=False) or item.is_symlink()):
                        if not found.count:
                            found.first = (*parts, item.name)
                            found.mode = item.stat(follow_symlinks=False).st_mode
                        found.count += 1
            finally:
                os.close(current)
    finally:
        for current, _ in stack:
            os.close(current)
    return found


class CannotCarry(ToolError):
    """An entry a copy cannot carry, met while copying (made after the check before it)."""

    def __init__(self, parts: Parts, mode: int) -> None:
        super().__init__("/".join(parts))
        self.parts = parts
        self.mode = mode


def copy_tree(source: int, folder: int, name: str, progress: Copied, shown: str) -> None:
    """Copy everything below the listable folder `source` (`shown`, raw, as errors name it)
    into the folder `name` in `folder` (made by the caller, mode 0o700): each folder gets its
    source's owner, mode and attributes once it is full, and is made durable with what it
    holds."""
    top = os.open(name, LIST_FLAGS, dir_fd=folder)
    first = os.dup(source)
    stack: list[tuple[int, Iterator[os.DirEntry[str]], int, Parts]] = [
        (first, scan_names(first), top, ())
    ]
    try:
        while stack:
            check_budget()
            current, items, copy, parts = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                items.close()
                try:
                    finish_folder(current, copy, posixpath.join(shown, *parts))
                finally:
                    os.close(current)
                    os.close(copy)
                continue
            below = (*parts, item.name)
            progress.at = "/".join(below)
            found = os.stat(item.name, dir_fd=current, follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode):
                os.mkdir(item.name, 0o700, dir_fd=copy)
                child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                try:
                    made = os.open(item.name, LIST_FLAGS, dir_fd=copy)
                except BaseException:
                    os.close(child)
                    raise
                stack.append((child, scan_names(child), made, below))
            elif stat.S_ISREG(found.st_mode):
                copy_file(current, item.name, copy, posixpath.join(shown, *below))
                progress.files += 1
            elif stat.S_ISLNK(found.st_mode):
                os.symlink(os.readlink(item.name, dir_fd=current), item.name, dir_fd=copy)
                with suppress(PermissionError):  # not root: the link is ours, as a file's
                    os.chown(
                        item.name, found.st_uid, found.st_gid, dir_fd=copy, follow_symlinks=False
                    )
                progress.files += 1
            else:
                raise CannotCarry(below, found.st_mode)
    finally:
        for current, items, copy, _ in stack:
            items.close()
            os.close(current)
            os.close(copy)


def copy_file(folder: int, name: str, into: int, shown: str) -> None:
    """The regular file `name` copied into the folder `into` with its owner, mode and
    extended attributes, and made durable."""
    reader, found = open_checked(folder, name, shown)
    try:
        writer = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=into)
        try:
            copy_sparse(reader, writer)
            take_over(writer, found)
            give_attributes(writer, attributes_of(folder, name), shown)
            os.fsync(writer)
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def finish_folder(source: int, copy: int, shown: str) -> None:
    """A copied folder, full now: its source's owner, mode and attributes, made durable."""
    take_over(copy, os.fstat(source))
    give_attributes(copy, attributes_of(source, "."), shown)
    os.fsync(copy)


def sync_folder(folder: int) -> None:
    """Make the entries of the held folder `folder` durable (an O_PATH descriptor cannot be
    fsync'ed: a listable one is opened for it)."""
    listed = open_listable(folder)
    try:
        os.fsync(listed)
    finally:
        os.close(listed)
