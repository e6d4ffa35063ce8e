"""What a folder act that stopped half-way left behind, said in one line.

A recursive delete that meets an entry it cannot remove (an immutable file, a read-only
folder when the server lacks CAP_DAC_OVERRIDE) has removed part of the tree already. What is
left goes back under the folder's own name (tree_writes.py), never stays hidden under a temp
name, and the answer says the truth to the person and the model alike: how many files went,
how many remain and the first of them, and why it stopped:

    delete 'd' stopped: 4 of 6 files deleted; 2 remain under 'd' ('d/sub/keep.txt',
    'd/sub/b.txt'): Operation not permitted: 'd/sub/keep.txt'

(one line). The entry it stopped at is named first; the others in the order the folders
give them, at most FIRST_PATHS in all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mcp_servers.budget import unbounded
from mcp_servers.dirfd import LIST_FLAGS, count_tree, scan_names

FIRST_PATHS = 3  # remaining paths an answer names

Parts = tuple[str, ...]  # names below the folder acted on


@dataclass
class Remains:
    """What is still in a folder: its files and folders below it, and the first paths."""

    files: int = 0
    folders: int = 0
    first: list[Parts] = field(default_factory=list)


def remains(folder: int, name: str, stopped_at: Parts | None) -> Remains:
    """What is left in folder `name` (in `folder`), the entry it stopped at first."""
    listed = os.open(name, LIST_FLAGS, dir_fd=folder)
    try:
        with unbounded():  # the act is over: its answer says what is there, however long
            counts = count_tree(listed)
            first = [stopped_at] if stopped_at else []
            for parts in files_below(listed):
                if len(first) >= FIRST_PATHS:
                    break
                if parts != stopped_at:
                    first.append(parts)
    finally:
        os.close(listed)
    return Remains(counts["files"], counts["folders"], first)


def files_below(top: int) -> Iterator[Parts]:
    """The files (anything but a folder) below a listable folder, depth first, each as its
    names below it; no link is followed."""
    stack: list[tuple[int, Iterator[os.DirEntry[str]], Parts]] = [
        (os.dup(top), scan_names(top), ())
    ]
    try:
        while stack:
            current, items, parts = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                os.close(current)
                continue
            if not item.is_dir(follow_symlinks=False):
                yield (*parts, item.name)
                continue
            try:
                child = os.open(item.name, LIST_FLAGS, dir_fd=current)
            except OSError:
                continue  # a folder that cannot be listed: counted, not named
            stack.append((child, scan_names(child), (*parts, item.name)))
    finally:
        for current, _, _ in stack:
            os.close(current)


def delete_stopped_line(
    shown: str,
    deleted: int,
    left: Remains,
    why: str,
    below: Callable[[Parts], str],
) -> str:
    """The one line of a recursive delete of `shown` (quoted) that stopped, `why` (the
    error and the path it stopped at), with `left` back under its name."""
    total = deleted + left.files
    count = left.files or left.folders  # no file left: the folders it could not remove
    what = f"{count:,} remain" if left.files else f"{count:,} folder{'s' * (count != 1)} remain"
    what += f" under {shown}"
    if left.first:
        more = count - len(left.first)
        named = ", ".join(below(parts) for parts in left.first)
        what += f" ({named} and {more:,} more)" if more > 0 else f" ({named})"
    return f"delete {shown} stopped: {deleted:,} of {total:,} files deleted; {what}: {why}"
