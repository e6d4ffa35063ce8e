"""A folder moved to another filesystem: what cannot go, refused before anything is copied.

A rename cannot cross filesystems (nor, under Landlock ABI 1, folders), so `move` copies a
folder there (tree_writes.move_folder_across, with tree_copy.py's `Carrying` policy: owners,
modes, attributes, links and hard links kept, all made durable) and removes the original once
the copy is in place. A move must not drop anything, so before the copy the tree is scanned
for what it cannot carry, and the move refused in one line that names the first such entry:

- a FIFO, socket or device: it has no copy that is the same thing (a folder copy skips and
  lists them);
- an entry under one of the server's own names (reserved.py): another call's work in progress
  (a file being written, an entry set aside) or one a stopped server left for the journal's
  recovery to put back at the next start, or an entry kept aside (`.fsagent-kept-`). Carried
  to the other filesystem it would leave the sight of the journal that knows what it is, and
  there no tool could name it (a folder copy skips and lists them);
- a folder that cannot be listed: what is below it can neither be checked nor copied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.budget import check_budget
from mcp_servers.dirfd import LIST_FLAGS, TEMP_NAME, open_listable, scan_names
from mcp_servers.fileio import kind_of
from mcp_servers.names import quoted
from mcp_servers.reserved import RESERVED_PREFIX
from mcp_servers.tree_copy import Parts


@dataclass
class Uncarried:
    """What below a folder a copy cannot carry: the special files (how many, the first and
    its mode), the first entry under a reserved name, the first folder that could not be
    listed (and why). The scan stops at either of the last two."""

    count: int = 0
    first: Parts = ()
    mode: int = 0
    reserved: Parts = ()
    unlistable: Parts = ()
    error: str = ""


def uncarried(top: int) -> Uncarried:
    """What a copy cannot carry below the listable folder `top` (no link followed)."""
    found = Uncarried()
    stack: list[tuple[int, Parts]] = [(os.dup(top), ())]
    try:
        while stack:
            check_budget()
            current, parts = stack.pop()
            try:
                for item in scan_names(current):
                    below = (*parts, item.name)
                    if item.name.startswith(RESERVED_PREFIX):
                        found.reserved = below
                        return found
                    if item.is_dir(follow_symlinks=False):
                        try:
                            child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                        except OSError as error:
                            found.unlistable, found.error = below, error.strerror or str(error)
                            return found
                        stack.append((child, below))
                    elif not (item.is_file(follow_symlinks=False) or item.is_symlink()):
                        if not found.count:
                            found.first = below
                            found.mode = item.stat(follow_symlinks=False).st_mode
                        found.count += 1
            finally:
                os.close(current)
    finally:
        for current, _ in stack:
            os.close(current)
    return found


def refusal(shown: str, found: Uncarried) -> ToolError | None:
    """The one line that refuses to move the folder `shown` (raw) for what `found` holds,
    or None when it holds nothing a copy cannot carry."""
    lead = f"cannot move {quoted(shown)} to another filesystem"
    if found.reserved:
        return reserved_refusal(shown, found.reserved)
    if found.unlistable:
        return ToolError(
            f"{lead}: {quoted(below(shown, found.unlistable))} could not be listed "
            f"({found.error}), so what it holds can neither be checked nor copied; nothing "
            "was moved: make it readable for this server's user, then try again"
        )
    if found.count:
        return special_refusal(shown, found.first, found.mode, found.count)
    return None


def special_refusal(shown: str, parts: Parts, mode: int, count: int = 1) -> ToolError:
    """A FIFO, socket or device below the folder `shown` (`count` of them in all)."""
    more = f" (and {count - 1:,} more such entries)" if count > 1 else ""
    return ToolError(
        f"cannot move {quoted(shown)} to another filesystem: {quoted(below(shown, parts))} "
        f"is a {kind_of(mode)}{more}, which a copy cannot carry there; nothing was moved"
    )


def reserved_refusal(shown: str, parts: Parts) -> ToolError:
    """An entry under one of the server's own names below the folder `shown`: which, what
    it is, and what to do."""
    if TEMP_NAME.fullmatch(parts[-1]):
        what = (
            "another call's work in progress, or one a stopped server left for the next "
            "start to put back"
        )
        todo = "let that call finish (or start fsagent again on this folder), then try again"
    else:
        what = "an entry kept aside under a name no tool may use"
        todo = "rename it outside fsagent, then try again"
    return ToolError(
        f"cannot move {quoted(shown)} to another filesystem: {quoted(below(shown, parts))} "
        f"has a name this server keeps for its own entries (every name starting "
        f"'{RESERVED_PREFIX}': {what}), which the move must not carry away from its journal; "
        f"nothing was moved: {todo}"
    )


def below(shown: str, parts: Parts) -> str:
    """An entry below the folder `shown` (both raw), as messages name it."""
    return "/".join((shown, *parts)) if shown != "." else "/".join(parts)


def sync_folder(folder: int) -> None:
    """Make the entries of the held folder `folder` durable (an O_PATH descriptor cannot be
    fsync'ed: a listable one is opened for it)."""
    listed = open_listable(folder)
    try:
        os.fsync(listed)
    finally:
        os.close(listed)
