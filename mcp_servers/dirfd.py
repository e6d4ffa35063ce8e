"""Acting on paths through folder descriptors, so a path swapped mid-call cannot lead outside.

The sandbox checks a path by name; by the time a tool acts on it, another process may have
swapped a folder on it for a symlink to somewhere else. So a tool never acts by name: it opens
the checked real path again from its root's descriptor, one name at a time with `O_NOFOLLOW`
(a folder that is now a link, or a file, fails the call), and then creates, opens, renames,
unlinks and removes with `dir_fd` (the `*at` calls) in the folder it reached. A race can make
a call fail; it cannot make it reach outside.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from collections.abc import Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from mcp_servers.budget import check_budget
from mcp_servers.names import quoted
from mcp_servers.parent_checks import FolderId, Route, hold, identity, let_go, route_of
from mcp_servers.platform_calls import FOLDER_FLAGS
from mcp_servers.sandbox import Sandbox, SandboxError

# O_PATH (where the system has it) reaches a folder without needing read permission on it; a
# listing opens it again. See platform_calls for what differs without it.
PATH_FLAGS = FOLDER_FLAGS
LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_PREFIX = ".fsagent-"
# Our temp entries: files being written, folders being copied, entries set aside. Never
# listed, searched or copied; each is in the journal before it exists (journal.py), and only
# the journal decides what becomes of one a killed server left: never its name alone.
TEMP_NAME = re.compile(r"\.fsagent-[0-9a-f]{16}\.tmp")


def is_ours(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and TEMP_NAME.fullmatch(name) is not None


class ChangedError(SandboxError):
    """A folder on a checked path changed (into a link or a file) while the call ran."""


def changed(shown_path: str, name: str) -> ChangedError:
    return ChangedError(
        f"{quoted(shown_path)} changed while this call ran: {quoted(name)} on its way is no "
        "longer a folder (now a symlink or a file); nothing was done there"
    )


class Made:
    """The folders one call made on its way to where it acts, to remove again (those still
    empty, innermost first) when the act does not happen."""

    def __init__(self) -> None:
        self.folders: list[tuple[int, str]] = []  # (descriptor of the parent, name)

    def before_make(self, parent: int, parts: tuple[str, ...], name: str) -> None:
        """Called before `name` is made in `parent` (`parts` below the root): a journal
        notes it here (journal.JournalledMade)."""

    def add(self, parent: int, name: str) -> None:
        self.folders.append((os.dup(parent), name))

    def undo(self) -> None:
        for parent, name in reversed(self.folders):
            with suppress(OSError):
                os.rmdir(name, dir_fd=parent)

    def close(self) -> None:
        for parent, _ in self.folders:
            os.close(parent)
        self.folders.clear()


def walk_down(
    start: int,
    names: tuple[str, ...],
    path: str,
    create: bool = False,
    made: Made | None = None,
    ids: list[FolderId] | None = None,
    base: tuple[str, ...] = (),
) -> int:
    """An O_PATH descriptor of the folder `names` below `start`, opened one name at a time
    without following any link; with `create`, missing folders are made on the way (and
    noted in `made`; `base`: the names from the root to `start`, for its journal). `ids`
    gets each folder met on the way (parent_checks.py compares them at the act).

    `path` (raw) names the folder in errors. The caller closes the descriptor.
    """
    current = os.dup(start)
    try:
        for index, name in enumerate(names):
            following = open_step(current, name, path, create, made, base + names[:index])
            os.close(current)
            current = following
            if ids is not None:
                ids.append(identity(os.fstat(current)))
    except BaseException:
        os.close(current)
        raise
    return current


def open_step(
    folder: int,
    name: str,
    path: str,
    create: bool,
    made: Made | None = None,
    parts: tuple[str, ...] = (),
) -> int:
    try:
        return os.open(name, PATH_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path) from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise changed(path, name) from None
        raise OSError(error.errno, error.strerror, path) from None
    if made is not None:
        made.before_make(folder, parts, name)
    try:
        os.mkdir(name, 0o777, dir_fd=folder)
        if made is not None:
            made.add(folder, name)
    except FileExistsError:  # made meanwhile by someone else: fine if a folder
        pass
    return open_step(folder, name, path, create=False)


def open_listable(folder: int) -> int:
    """A descriptor of the same folder that can be listed (O_PATH ones cannot)."""
    return os.open(".", LIST_FLAGS, dir_fd=folder)


def entry_stat(folder: int, name: str) -> os.stat_result:
    """The entry itself (a link stays a link)."""
    return os.stat(name, dir_fd=folder, follow_symlinks=False)


def temp_name() -> str:
    return f"{TEMP_PREFIX}{secrets.token_hex(8)}.tmp"


def remove_quietly(folder: int, name: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


def scan_names(folder: int) -> Generator[os.DirEntry[str], None, None]:
    """Entries of a listable folder, streamed (a folder may hold millions)."""
    with os.scandir(folder) as items:
        yield from items


def count_tree(folder: int) -> dict[str, int]:
    """Files (links and special files included), folders and file bytes below a listable
    folder, following no link; memory stays small however large the tree."""
    files = folders = size = 0
    stack = [(os.dup(folder), scan_names(folder))]
    try:
        while stack:
            check_budget()
            current, items = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                os.close(current)
                continue
            if item.is_dir(follow_symlinks=False):
                folders += 1
                child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                stack.append((child, scan_names(child)))
                continue
            files += 1
            if item.is_file(follow_symlinks=False):
                size += item.stat(follow_symlinks=False).st_size
    finally:
        for current, items in stack:
            items.close()
            os.close(current)
    return {"files": files, "folders": folders, "bytes": size}


@dataclass
class Removal:
    """How far a `remove_tree` got: the files (links and special files too) and folders it
    removed, and, when it stopped, the names below the top of the entry it could not
    remove (empty: the top itself), so a failure can say what went and what remains."""

    files: int = 0
    folders: int = 0
    stopped_at: tuple[str, ...] | None = None


def remove_tree(parent: int, name: str, removal: Removal | None = None) -> None:
    """Remove folder `name` in `parent` and everything in it, following no link.

    Every folder is opened with O_NOFOLLOW from its parent's descriptor and its entries are
    unlinked by name in it, so a folder swapped for a link meanwhile fails the call instead of
    emptying the link's target; the listing is streamed, so memory stays small. It stops at
    the first entry it cannot remove (`removal`, when given, says how far it got).
    """
    removal = Removal() if removal is None else removal
    top = os.open(name, LIST_FLAGS, dir_fd=parent)
    stack = [(top, scan_names(top), parent, name)]
    try:
        while stack:
            check_budget()
            current, items, above, own_name = stack[-1]
            item = next(items, None)
            below = tuple(entry[3] for entry in stack[1:])
            try:
                if item is None:
                    stack.pop()
                    items.close()
                    os.close(current)
                    os.rmdir(own_name, dir_fd=above)
                    removal.folders += 1
                    continue
                if item.is_dir(follow_symlinks=False):
                    child = os.open(item.name, LIST_FLAGS, dir_fd=current)
                    stack.append((child, scan_names(child), current, item.name))
                else:
                    os.unlink(item.name, dir_fd=current)
                    removal.files += 1
            except OSError:
                removal.stopped_at = below if item is None else (*below, item.name)
                raise
    finally:
        for current, items, _, _ in stack:
            items.close()
            os.close(current)


@dataclass(frozen=True)
class Nearest:
    """The nearest folder that exists on the way to a path (`fd`, held), and the names
    below it still missing on the way (`missing`, the folders a write would make)."""

    fd: int
    missing: tuple[str, ...]


class Places:
    """Checked real paths, reached by descriptor from the descriptor of their root.

    The roots are opened once, at start, so a root renamed or swapped later is not followed
    either. Every folder handed out is held with its route (parent_checks.py), so an act can
    check first that the folder is still the one reached at the check, where it was.
    """

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.root_fds = {root: os.open(root, PATH_FLAGS) for root in sandbox.roots}

    def names_below_root(self, real: Path) -> tuple[Path, tuple[str, ...]]:
        root = self.sandbox.root_of(real)
        if root is None:  # cannot happen for a checked path; never act outside
            raise self.sandbox.refuse(str(real))
        self.check_root(root)
        return root, real.relative_to(root).parts

    def check_root(self, root: Path) -> None:
        """Refuse to act when the folder at a root's path is no longer the one opened at
        start (renamed away and another made in its place): paths are checked by name against
        the new one, and changes would land in the old one."""
        held = os.fstat(self.root_fds[root])
        try:
            now = os.stat(root)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            raise SandboxError(
                f"root {quoted(str(root))} was replaced since the server started (the folder "
                "there now has another device and inode); nothing was done: restart the "
                "server to serve the folder that is there now"
            )

    @contextmanager
    def held(
        self,
        root: Path,
        names: tuple[str, ...],
        shown: str,
        create: bool = False,
        made: Made | None = None,
        below: int | None = None,
    ) -> Iterator[int]:
        """The folder `names` below `root` (below the held folder `below` when given: then
        `names` are those below it), held with its route while the block runs."""
        start = None if below is None else route_of(below)
        ids: list[FolderId] = [] if start is None else list(start.ids)
        above = () if start is None else start.names
        start_fd = self.root_fds[root] if below is None else below
        fd = walk_down(start_fd, names, shown, create, made, ids, above)
        hold(fd, self.route(root, above + names, ids))
        try:
            yield fd
        finally:
            let_go(fd)
            os.close(fd)

    @contextmanager
    def folder(self, real: Path, create: bool = False) -> Iterator[int]:
        """An O_PATH descriptor of the folder `real` (made, with its parents, if `create`)."""
        root, names = self.names_below_root(real)
        with self.held(root, names, self.shown(real), create) as fd:
            yield fd

    @contextmanager
    def parent(self, real: Path, create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder holding `real`, its name there), to act on the entry."""
        root, names = self.names_below_root(real)
        if not names:
            raise SandboxError(f"{quoted(str(real))} is an allowed root, not an entry in one")
        with self.held(root, names[:-1], self.shown(real.parent), create) as fd:
            yield fd, names[-1]

    @contextmanager
    def parent_if_there(self, real: Path) -> Iterator[tuple[int | None, str]]:
        """`parent`, with None for the descriptor when a folder on the way does not exist."""
        with self.nearest(real) as (nearest, name):
            yield (None if nearest.missing else nearest.fd), name

    @contextmanager
    def nearest(self, real: Path) -> Iterator[tuple[Nearest, str]]:
        """The nearest existing folder on the way to the entry `real`, held (see Nearest),
        and the entry's name."""
        root, names = self.names_below_root(real)
        if not names:
            raise SandboxError(f"{quoted(str(real))} is an allowed root, not an entry in one")
        with self.nearest_folder(root, names[:-1]) as nearest:
            yield nearest, names[-1]

    @contextmanager
    def nearest_folder(self, root: Path, names: tuple[str, ...]) -> Iterator[Nearest]:
        """The deepest folder of `names` below `root` that exists, held."""
        current = os.dup(self.root_fds[root])
        ids: list[FolderId] = []
        reached = 0
        try:
            for name in names:
                try:
                    following = open_step(current, name, self.shown(root.joinpath(*names)), False)
                except FileNotFoundError:
                    break
                os.close(current)
                current = following
                ids.append(identity(os.fstat(current)))
                reached += 1
        except BaseException:
            os.close(current)
            raise
        hold(current, self.route(root, names[:reached], ids))
        try:
            yield Nearest(current, names[reached:])
        finally:
            let_go(current)
            os.close(current)

    @contextmanager
    def made_below(self, real: Path, nearest: Nearest, made: Made | None = None) -> Iterator[int]:
        """The folder `real`, made below the held folder `nearest` (the missing folders,
        noted in `made` and removed again, if still empty, when the block fails)."""
        route = route_of(nearest.fd)
        made = Made() if made is None else made
        try:
            shown = self.shown(real)
            with self.held(route.root, nearest.missing, shown, True, made, nearest.fd) as fd:
                yield fd
        except BaseException:
            made.undo()
            raise
        finally:
            made.close()

    def route(self, root: Path, names: tuple[str, ...], ids: list[FolderId]) -> Route:
        return Route(root, self.root_fds[root], names, tuple(ids), self.shown, self.check_root)

    def shown(self, real: Path) -> str:
        """`real` as errors name it: relative to the first root, raw (errors escape it)."""
        root = self.sandbox.root_of(real)
        if root is None:
            return "?"
        if root == self.sandbox.roots[0]:
            return real.relative_to(root).as_posix() or "."
        return str(real)
