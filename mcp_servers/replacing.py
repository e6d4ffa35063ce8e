"""A file written whole under its name: a temp file in the same folder, given the owner, mode
and extended attributes of what it replaces, then put in place by capture.py, on exactly the
entry the tool checked; and what every write tool shares (the umask, new files' mode)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from mcp_servers.capture import Held, New, put_in_place
from mcp_servers.dirfd import create_temp, remove_quietly
from mcp_servers.fileio import write_all
from mcp_servers.permissions import take_over
from mcp_servers.plans import PlanTools
from mcp_servers.protected import Protected
from mcp_servers.sandbox import Sandbox
from mcp_servers.xattrs import attributes_of, give_attributes

T = TypeVar("T")
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def current_umask() -> int:
    # os.umask can only be read by setting it; done once at start, before any thread runs.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class WriteBase(PlanTools):
    """What the write tools share: the process's umask, read once."""

    def __init__(self, sandbox: Sandbox, protected: Protected | None = None) -> None:
        super().__init__(sandbox, protected)
        self.umask = current_umask()
        self.new_file_mode = 0o666 & ~self.umask


def replace_entry(held: Held, fill: Callable[[int], T], finish: Callable[[int], None]) -> T:
    """Write a temp file in the held entry's folder with `fill`, give it its owner and mode
    with `finish`, then put it under the name in place of exactly the entry checked (or where
    nothing was): a link is replaced by a file, never followed, and nothing changes if the
    call stops, or the entry under the name is another one, before the rename."""
    fd, temp_name = create_temp(held.folder)
    try:
        result = fill(fd)
        os.fsync(fd)
        finish(fd)
        put_in_place(held, New(held.folder, temp_name, held.where, os.fstat(fd)))
    except BaseException:
        remove_quietly(held.folder, temp_name)
        raise
    finally:
        os.close(fd)
    return result


def writer_of(*parts: bytes) -> Callable[[int], None]:
    def fill(fd: int) -> None:
        offset = 0
        for part in parts:
            write_all(fd, part, offset)
            offset += len(part)

    return fill


def finisher(old: os.stat_result, folder: int, name: str) -> Callable[[int], None]:
    """Gives a replacement file the owner, group, mode and extended attributes (ACLs among
    them, set last: an ACL's mask is the group bits) of the file `name` in `folder`, which
    it replaces (or, for a move, is moved from)."""

    def finish(fd: int) -> None:
        take_over(fd, old)
        give_attributes(fd, attributes_of(folder, name), name)

    return finish
