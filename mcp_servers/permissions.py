"""Writes never widen permissions: who may replace a file, and the owner and mode it keeps.

A write replaces a file by renaming a new one over it, which the folder's write bit allows
even when the file itself is read-only; and the new file belongs to the server's user. So:

- a file without a write bit for the server's user (owner, group or other bits, whichever
  class applies; root is held to the bits too) is refused, not replaced;
- the new file gets the old one's owner, group and mode; when the owner cannot be kept (the
  server is not root), it is the server's user's file, and setuid and setgid are cleared.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.names import quoted

SET_ID_BITS = stat.S_ISUID | stat.S_ISGID


def may_write(found: os.stat_result) -> bool:
    """Whether the permission bits give the server's user write access to the file."""
    if found.st_uid == os.geteuid():
        return bool(found.st_mode & stat.S_IWUSR)
    if found.st_gid == os.getegid() or found.st_gid in os.getgroups():
        return bool(found.st_mode & stat.S_IWGRP)
    return bool(found.st_mode & stat.S_IWOTH)


def check_writable(found: os.stat_result, shown: str) -> None:
    if not may_write(found):
        raise ToolError(
            f"refused: {quoted(shown)} has no write permission for this server's user "
            f"(uid {os.geteuid()}, mode {oct(stat.S_IMODE(found.st_mode))}); it was not changed"
        )


def take_over(fd: int, old: os.stat_result) -> None:
    """Give the new file `fd` the owner, group and mode of the file it replaces."""
    mode = stat.S_IMODE(old.st_mode)
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)  # clears set-id bits; fchmod sets them back
        except PermissionError:
            with suppress(PermissionError):
                os.fchown(fd, -1, old.st_gid)
        new = os.fstat(fd)
    if new.st_uid != old.st_uid:
        mode &= ~SET_ID_BITS  # a set-id file must not change hands with its bits on
    elif new.st_gid != old.st_gid:
        mode &= ~stat.S_ISGID
    os.fchmod(fd, mode)
