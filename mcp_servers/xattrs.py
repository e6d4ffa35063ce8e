"""Extended attributes, POSIX ACLs among them, carried from a file to its replacement.

A write replaces a file with a new one (a temp file renamed over it), and a new file has no
xattrs: a file whose ACL (`system.posix_acl_access`) denied a user would come back readable by
that user, and every other attribute would be gone. So the old file's attributes are read and
set on the replacement before the rename; one that cannot be set refuses the write, with the
old file left as it was. Access never widens.
"""

from __future__ import annotations

import errno
import os
from contextlib import suppress

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.names import quoted

Attributes = list[tuple[str, bytes]]
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# File capabilities grant privileges to whatever the file holds: like setuid bits, they never
# pass to new content (leaving them out narrows access, never widens it).
NEVER_CARRIED = frozenset({"security.capability"})
NONE_HERE = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA)


def attributes_of(folder: int, name: str) -> Attributes:
    """The xattrs of the file `name` in `folder` (none where the filesystem has none)."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=folder)
        target: int | str = fd
    except PermissionError:  # write-only for us: reach it by an O_PATH descriptor
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        target = f"/proc/self/fd/{fd}"
    try:
        try:
            names = os.listxattr(target)
        except OSError as error:
            if error.errno in NONE_HERE:
                return []
            raise
        found = []
        for attribute in names:
            if attribute in NEVER_CARRIED:
                continue
            with suppress(OSError):
                found.append((attribute, os.getxattr(target, attribute)))
        return found
    finally:
        os.close(fd)


def give_attributes(fd: int, attributes: Attributes, shown: str) -> None:
    """Set `attributes` on the open file `fd`, or refuse the write naming the one that failed."""
    for attribute, value in attributes:
        try:
            os.setxattr(fd, attribute, value)
        except OSError as error:
            raise ToolError(
                f"write refused: {quoted(shown)} has the extended attribute {attribute!r} "
                f"(an ACL, if it starts 'system.posix_acl'), which its replacement could not be "
                f"given ({error.strerror}); nothing was changed"
            ) from None
