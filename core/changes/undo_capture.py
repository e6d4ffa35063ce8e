"""What a write call is about to replace, read through our MCP server before it runs: the
record an undo puts back (core.undo).

For each write tool the record keeps what the undo needs and nothing else:

- write_file, patch_file: the file's old content, or that it did not exist (and which of
  its folders the write would create);
- touch, make_dir: whether the path existed (and the folders the call would create);
- copy: the destination's old content, or that it did not exist; for a folder, the source
  tree's fingerprint, which is what the copy will be;
- move: where it came from, the fingerprint of what moves, and the destination's old content;
- delete: the file's content, or the folder's whole tree (folders and file contents).

Paths are kept absolute (relative paths start at the first root, as the server resolves
them), so an undo run from another folder restores the same files or is refused by the
sandbox. Old content is kept within limits (README, "Undo"): over them, or for what cannot be
kept as text (binary files, symlinks), the record says why it cannot be undone, the write
still runs after approval, and the review says so before the person decides.

Reading never stops a write: any failure makes a record that cannot be undone, with the
reason.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from functools import cache
from typing import Any

from core.changes.server_reads import (
    NotReadable,
    ReadError,
    TooBig,
    Tools,
    file_sha,
    info,
    is_not_found,
    listing,
    read_text,
)

MAX_BYTES_PER_CALL = 1024 * 1024  # old content one write call may keep
MAX_BYTES_PER_THREAD = 16 * 1024 * 1024  # old content all of a thread's records may keep
MAX_ENTRIES_PER_CALL = 1000  # files and folders one record may hold (a folder deleted)
RECORD_VERSION = 1

Record = dict[str, Any]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@cache
def default_modes() -> tuple[int, int]:
    """The modes the server gives a file and a folder it creates: it runs as our child, with
    our umask. A file an undo recreates gets these, so a different old mode is said up front."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask, 0o777 & ~mask


def absolute(given: str, root: str | None) -> str:
    """The path the server will act on, as it resolves a relative one (first root, `~`)."""
    expanded = os.path.expanduser(given)
    return os.path.join(root, expanded) if root else expanded


def shown(path: str, root: str | None) -> str:
    """A path as the person wrote it: relative to the first root when inside it."""
    if root and (path == root or path.startswith(root.rstrip("/") + "/")):
        return os.path.relpath(path, root)
    return path


class Budget:
    """Bytes of old content one record may still keep."""

    def __init__(self, thread_used: int) -> None:
        room = MAX_BYTES_PER_THREAD - thread_used
        self.limit = max(0, min(MAX_BYTES_PER_CALL, room))
        self.thread_full = room < MAX_BYTES_PER_CALL
        self.used = 0
        self.entries = 0

    @property
    def left(self) -> int:
        return self.limit - self.used

    def over(self, size: int) -> str:
        if self.thread_full:
            return (
                f"the thread's undo records are nearly full ({MAX_BYTES_PER_THREAD:,} bytes "
                f"in all; {self.left:,} left, {size:,} needed)"
            )
        return f"it would keep {size:,} bytes, over the limit of {MAX_BYTES_PER_CALL:,} a call"

    def count(self, entries: int = 1) -> None:
        self.entries += entries
        if self.entries > MAX_ENTRIES_PER_CALL:
            raise NotReadable(f"more than {MAX_ENTRIES_PER_CALL:,} files and folders")


class CannotUndo(Exception):
    """Why a write's record cannot put it back; the message is the reason shown."""


# The tools whose record, for a path the server's plan shows absent, is only that.
ABSENT_IS_ALL = ("write_file", "patch_file", "touch", "make_dir")


async def capture(
    tool: str,
    args: dict[str, Any],
    tools: Tools,
    root: str | None,
    thread_used: int,
    fresh_plan: list[dict[str, Any]] | None = None,
) -> tuple[Record, int]:
    """The record for a write call about to run, and the bytes of old content it keeps.
    Never raises: a record that cannot be undone says why.

    `fresh_plan` is the server's plan of this call when nothing has written since it was
    made: a path it shows absent, in a folder that exists, is recorded from it without asking
    the server again (two calls fewer on every new file). Should a file appear there after
    all, the write's result names the hash it replaced, and the undo refuses (core.undo)."""
    budget = Budget(thread_used)
    record: Record = {"version": RECORD_VERSION, "root": root, "undoable": True}
    if tool in ABSENT_IS_ALL and absent_in_a_folder(fresh_plan):
        path = absolute(str(args["path"]), root)
        return {**record, "path": path, "before": {"state": "absent", "created": []}}, 0
    notes: list[str] = []
    try:
        record |= await CAPTURES[tool](args, tools, root, budget, notes)
    except CannotUndo as why:
        return {**record, "undoable": False, "why": str(why)}, 0
    except NotReadable as why:
        return {**record, "undoable": False, "why": f"what it replaces cannot be kept: {why}"}, 0
    except Exception as error:  # keeping a record must never stop the write itself
        unread = f"what it replaces could not be read: {error}"
        return {**record, "undoable": False, "why": unread}, 0
    record["notes"] = [note for note in notes if note]
    return record, budget.used


def absent_in_a_folder(plan: list[dict[str, Any]] | None) -> bool:
    """Whether a plan shows its `path` argument absent, with nothing to create on the way."""
    for entry in plan or []:
        if entry.get("argument") == "path":
            return entry.get("state") == {"exists": False} and entry.get("creates") == []
    return False


# --- the parts of a record ------------------------------------------------------------------


async def created_folders(path: str, tools: Tools) -> list[str]:
    """The folders above `path` that do not exist yet (a write creates them), outermost
    first."""
    missing = []
    parent = posixpath.dirname(path)
    while parent and parent != posixpath.dirname(parent) and await info(tools, parent) is None:
        missing.append(parent)
        parent = posixpath.dirname(parent)
    return list(reversed(missing))


async def old_file(path: str, tools: Tools, budget: Budget, size: int | None = None) -> Record:
    """A file's old content; checked against its size when the server gave one (otherwise
    against the old hash the write's result gives, when it is undone)."""
    if size is not None and size > budget.left:
        raise CannotUndo(budget.over(size))
    try:
        content = await read_text(tools, path, budget.left)
    except TooBig as big:
        raise CannotUndo(budget.over(big.size)) from None
    data = len(content.encode("utf-8"))
    if size is not None and data != size:
        raise NotReadable("it is not UTF-8 text")
    budget.used += data
    budget.count()
    return {"state": "file", "content": content, "sha256": sha256_text(content)}


async def before_write(path: str, tools: Tools, root: str | None, budget: Budget) -> Record:
    """A file about to be written: its content, or that it is absent (with the folders the
    write would create). This runs before every approved write, so it asks as little as it
    can: the file is read at once, without asking its size first (the write's result gives
    the old hash, which checks the copy when it is undone), and a new file's folder is asked
    about only when it is not the first root, which always exists."""
    try:
        return await old_file(path, tools, budget)
    except NotReadable:
        raise
    except ReadError as error:
        if not is_not_found(error):
            raise
    folder = posixpath.dirname(path)
    if root and folder == root.rstrip("/"):
        return {"state": "absent", "created": []}
    return {"state": "absent", "created": await created_folders(path, tools)}


def mode_of(found: dict[str, Any]) -> int:
    return int(str(found.get("mode", "0o644")), 8)


def mode_note(path: str, found: dict[str, Any], root: str | None, folder: bool = False) -> str:
    """Why what an undo makes again would not get its old mode back (no tool sets modes);
    empty when the old mode is the one the server gives."""
    default = default_modes()[1 if folder else 0]
    if mode_of(found) == default:
        return ""
    return (
        f"{shown(path, root)} would come back with mode {oct(default)}, not "
        f"{oct(mode_of(found))} (no tool sets modes)"
    )


async def fingerprint(path: str, tools: Tools, budget: Budget) -> dict[str, str]:
    """A folder's tree as {relative path: "dir" | "link" | "other" | "file:<sha256>"}."""
    tree: dict[str, str] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        for entry in await listing(tools, posixpath.join(path, relative)):
            budget.count()
            name = posixpath.join(relative, entry.name)
            if entry.kind == "file":
                tree[name] = "file:" + await file_sha(tools, posixpath.join(path, name))
            else:
                tree[name] = entry.kind
                if entry.kind == "dir":
                    pending.append(name)
    return tree


async def old_tree(
    path: str, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    """A folder about to be deleted: every folder and file below it, with contents."""
    folders: list[str] = []
    files: dict[str, str] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        for entry in await listing(tools, posixpath.join(path, relative)):
            name = posixpath.join(relative, entry.name)
            full = posixpath.join(path, name)
            if entry.kind in ("link", "other"):
                what = "a symlink" if entry.kind == "link" else "a special file"
                raise CannotUndo(f"{shown(full, root)} is {what}, which no tool can make again")
            found = await info(tools, full)
            if found is None:
                raise ReadError(f"{shown(full, root)} went away while it was read")
            if entry.kind == "dir":
                budget.count()
                folders.append(name)
                pending.append(name)
            else:
                files[name] = (await old_file(full, tools, budget, entry.size))["content"]
            notes.append(mode_note(full, found, root, folder=entry.kind == "dir"))
    return {"state": "tree", "folders": sorted(folders), "files": files}


async def before_destination(path: str, tools: Tools, budget: Budget) -> Record:
    """What a copy or move may replace: nothing, or a file (with its mode)."""
    found = await info(tools, path)
    if found is None:
        return {"state": "absent", "created": await created_folders(path, tools)}
    if found["type"] == "folder":
        return {"state": "folder"}  # the call refuses to replace a folder: nothing to keep
    kept = await old_file(path, tools, budget, int(found["size"]))
    return {**kept, "mode": oct(mode_of(found))}


# --- one capture per write tool --------------------------------------------------------------

Args = dict[str, Any]


async def capture_write(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    path = absolute(str(args["path"]), root)
    return {"path": path, "before": await before_write(path, tools, root, budget)}


async def capture_touch(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    path = absolute(str(args["path"]), root)
    if await info(tools, path) is not None:
        notes.append(f"touch only changes the time of {shown(path, root)}; times are not restored")
        return {"path": path, "before": {"state": "present"}}
    created = await created_folders(path, tools)
    return {"path": path, "before": {"state": "absent", "created": created}}


async def capture_make_dir(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    path = absolute(str(args["path"]), root)
    if await info(tools, path) is not None:
        return {"path": path, "before": {"state": "present"}}
    created = await created_folders(path, tools)
    return {"path": path, "before": {"state": "absent", "created": created}}


async def capture_copy(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    source = absolute(str(args["source"]), root)
    destination = absolute(str(args["destination"]), root)
    record: Record = {"source": source, "destination": destination}
    found = await info(tools, source)
    if found is None:
        return {**record, "before": {"state": "failing"}}  # the copy will fail: nothing to keep
    if found["type"] == "folder":
        try:
            tree = await fingerprint(source, tools, budget)
        except NotReadable as why:
            raise CannotUndo(f"the folder it copies has {why}, too many to check") from None
        # A folder copy skips links: the copy is the tree without them.
        record["copied_tree"] = {name: kind for name, kind in tree.items() if kind != "link"}
    before = await before_destination(destination, tools, budget)
    if before["state"] == "file" and before["mode"] != oct(mode_of(found)):
        notes.append(
            f"{shown(destination, root)} would keep mode {oct(mode_of(found))} from the copy, "
            f"not {before['mode']} (no tool sets modes)"
        )
    return {**record, "before": before}


async def capture_move(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    source = absolute(str(args["source"]), root)
    destination = absolute(str(args["destination"]), root)
    record: Record = {"source": source, "destination": destination}
    found = await info(tools, source)
    if found is None:
        return {**record, "before": {"state": "failing"}}  # the move will fail
    # What must be at the destination for it to move back unchanged.
    if found.get("is_symlink"):
        record["moved"] = {"present": True}  # a link moves back as it is
    elif found["type"] == "folder":
        try:
            # Its own count of entries: moving back keeps contents, none are kept here.
            record["moved"] = {"tree": await fingerprint(source, tools, Budget(0))}
        except NotReadable:
            record["moved"] = {"folder": True}
            notes.append(f"{shown(source, root)} is too big to check before it moves back")
    else:
        record["moved"] = {"sha256": await file_sha(tools, source)}
    before = await before_destination(destination, tools, budget)
    if before["state"] == "file" and before["mode"] != oct(default_modes()[0]):
        notes.append(
            f"{shown(destination, root)} would come back with mode {oct(default_modes()[0])}, "
            f"not {before['mode']} (no tool sets modes)"
        )
    return {**record, "before": before}


async def capture_delete(
    args: Args, tools: Tools, root: str | None, budget: Budget, notes: list[str]
) -> Record:
    path = absolute(str(args["path"]), root)
    found = await info(tools, path)
    if found is None:
        return {"path": path, "before": {"state": "failing"}}  # the delete will fail
    if found.get("is_symlink"):
        raise CannotUndo(f"{shown(path, root)} is a symlink, which no tool can make again")
    if found["type"] == "folder":
        tree = await old_tree(path, tools, root, budget, notes)
        notes.append(mode_note(path, found, root, folder=True))
        return {"path": path, "before": tree}
    notes.append(mode_note(path, found, root))
    return {"path": path, "before": await old_file(path, tools, budget, int(found["size"]))}


CAPTURES = {
    "write_file": capture_write,
    "patch_file": capture_write,
    "touch": capture_touch,
    "make_dir": capture_make_dir,
    "copy": capture_copy,
    "move": capture_move,
    "delete": capture_delete,
}


def undo_lines(record: Record) -> list[str]:
    """What the review says about undoing a call, before the person decides: nothing when
    it can be undone exactly."""
    if not record.get("undoable"):
        return [f"⚠ cannot be undone: {record.get('why', 'unknown')}"]
    return [f"⚠ undo would not restore everything: {note}" for note in record.get("notes", [])]
