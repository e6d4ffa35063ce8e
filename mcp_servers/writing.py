"""The write tools: atomic writes, patches, folders, copy, move and delete, and the diffs a
dry run returns.

Every change is made by descriptor in the folder it was checked to be in (dirfd.py): a new
file is written as a temp file in the destination folder and renamed over the old one, so a
reader never sees half a file. Writes never widen permissions (permissions.py), only regular
files are written over, whole-file edits refuse files over 8 MiB, and delete and move act on a
link, never its target.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel

from mcp_servers.answers import (
    MARKER_ROOM,
    READ_CAP,
    CappedLines,
    capped_json_lines,
    more_marker,
    to_json,
    utf8_len,
)
from mcp_servers.budget import check_budget, unbounded
from mcp_servers.diffing import DiffTooLarge, unified_diff
from mcp_servers.dirfd import (
    LIST_FLAGS,
    count_tree,
    create_temp,
    entry_stat,
    remove_quietly,
    remove_tree,
    temp_name,
)
from mcp_servers.fileio import (
    EDIT_LIMIT,
    copy_sparse,
    decode_text,
    kind_of,
    not_regular,
    open_checked,
    open_regular,
    read_whole,
    sha256_hex,
    sha256_of_fd,
    write_all,
)
from mcp_servers.links import links_leaving
from mcp_servers.names import quoted_given, show
from mcp_servers.permissions import check_writable, take_over
from mcp_servers.plans import PlanTools
from mcp_servers.request_limits import MAX_EDITS
from mcp_servers.sandbox import Resolved, Sandbox, is_within
from mcp_servers.tool_base import show_given
from mcp_servers.walking import Unreadable
from mcp_servers.xattrs import attributes_of, give_attributes

MAX_WRITE_BYTES = EDIT_LIMIT  # content a write may carry
SKIPPED_LISTED_BYTES = 64 * 1024  # of names a folder copy lists as skipped, per list
PERMISSION_BITS = 0o777  # a copy keeps these of the source's mode, never setuid or setgid
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

T = TypeVar("T")
# What the person's preview showed (a plan's paths, plans.py); the write is refused if it differs.
Expect = list[dict[str, Any]] | None


class Edit(BaseModel):
    """One replacement for patch_file: `old_text` must occur exactly once."""

    old_text: str
    new_text: str


def current_umask() -> int:
    # os.umask can only be read by setting it; done once at start, before any thread runs.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replace_entry(
    folder: int, name: str, fill: Callable[[int], T], finish: Callable[[int], None]
) -> T:
    """Write a temp file in `folder` with `fill`, give it its owner and mode with `finish`,
    then rename it over `name`: the entry is replaced whole (a link by a file, never its
    target), and nothing changes if the call stops before the rename."""
    fd, temp_name = create_temp(folder)
    try:
        result = fill(fd)
        os.fsync(fd)
        finish(fd)
        check_budget()  # the last point where the call may stop: nothing has changed yet
        os.rename(temp_name, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        remove_quietly(folder, temp_name)
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


class WriteTools(PlanTools):
    """The tools that write; each public method is registered under its own name."""

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__(sandbox)
        self.umask = current_umask()
        self.new_file_mode = 0o666 & ~self.umask

    # -- write tools ----------------------------------------------------------------------

    def write_file(
        self,
        path: str,
        content: str,
        mode: Literal["write", "append"] = "write",
        dry_run: bool = False,
        expect: Expect = None,
    ) -> str:
        """Create or replace a text file (mode='write'), or add to its end (mode='append').

        The write is atomic and keeps the file's permissions. dry_run=True changes nothing and
        returns the diff it would apply.
        """
        # The owner is kept too (or set-id bits cleared), a file without a write bit for the
        # server's user is refused, and appends edit files up to 8 MiB (permissions.py).
        if not dry_run:  # a precondition from a plan (plans.py): refused if the file changed
            self.check_expect("write_file", {"path": path}, expect)
        new_part = content.encode("utf-8")
        if len(new_part) > MAX_WRITE_BYTES:
            raise ToolError(f"invalid_argument: content is larger than {MAX_WRITE_BYTES:,} bytes")
        target = self.sandbox.resolve(path)
        if not target.exists:
            return self.create(target, new_part, dry_run)
        shown = self.raw_relative(target.real)
        with self.places.parent(target.real) as (folder, name):
            fd, found = open_regular(folder, name, shown)
            try:
                check_writable(found, shown)
                if mode == "append":
                    job = "write_file with mode='append'"
                    old = read_whole(fd, shown, job)
                    result = self.result(target, old, old + new_part)
                    if dry_run:
                        return self.dry_run(result, old, old + new_part)
                    replace_entry(
                        folder, name, writer_of(old, new_part), finisher(found, folder, name)
                    )
                    return to_json(result)
                if dry_run:
                    return self.write_dry_run(target, fd, found, new_part)
                old_digest = sha256_of_fd(fd)
            finally:
                os.close(fd)
            replace_entry(folder, name, writer_of(new_part), finisher(found, folder, name))
        return to_json(self.result(target, None, new_part, old_digest))

    def patch_file(
        self,
        path: str,
        edits: list[Edit],
        expected_sha256: str | None = None,
        dry_run: bool = False,
        expect: Expect = None,
    ) -> str:
        """Replace text in a file: each edit's old_text must occur exactly once.

        Edits apply in order, all or nothing. Line endings and the final newline are kept
        (an edit written with \\n matches a CRLF file). Pass expected_sha256 (from file_hash
        or an earlier write) to refuse the patch if the file changed meanwhile.
        """
        if not edits:
            raise ToolError("invalid_argument: edits is empty")
        if len(edits) > MAX_EDITS:
            raise ToolError(
                f"invalid_argument: edits holds {len(edits):,} edits (at most {MAX_EDITS:,}); "
                "split the patch into several calls"
            )
        if not dry_run:
            self.check_expect("patch_file", {"path": path}, expect)
        target = self.existing(path)
        shown = self.raw_relative(target.real)
        with self.places.parent(target.real) as (folder, name):
            fd, found = open_regular(folder, name, shown)
            try:
                check_writable(found, shown)
                old = read_whole(fd, shown, "patch_file")
            finally:
                os.close(fd)
            if expected_sha256 is not None and expected_sha256.lower() != sha256_hex(old):
                raise ToolError(
                    f"patch refused: {show_given(path)} changed (sha256 is {sha256_hex(old)}, "
                    f"expected {expected_sha256}); read it again and redo the edits"
                )
            text = decode_text(old)
            if text is None:
                raise ToolError(f"{show_given(path)} is binary; patch_file edits text files only")
            new = apply_edits(text, edits, show_given(path)).encode("utf-8")
            result = self.result(target, old, new)
            if dry_run:
                return self.dry_run(result, old, new)
            replace_entry(folder, name, writer_of(new), finisher(found, folder, name))
        return to_json(result)

    def make_dir(self, path: str, expect: Expect = None) -> str:
        """Create a folder, and any missing parents. An existing folder is left as it is."""
        self.check_expect("make_dir", {"path": path}, expect)
        target = self.sandbox.resolve(path)
        if target.exists and not target.real.is_dir():
            raise ToolError(f"{quoted_given(path)} exists and is a file")
        if not target.exists:
            with self.places.folder(target.real, create=True):
                pass
        return to_json({"path": self.relative(target.real), "created": not target.exists})

    def touch(self, path: str, expect: Expect = None) -> str:
        """Create an empty file, or update the modification time of an existing one."""
        self.check_expect("touch", {"path": path}, expect)
        target = self.sandbox.resolve(path)
        shown = self.raw_relative(target.real)
        if target.real in self.sandbox.roots:
            with self.listed_folder(target) as root:
                os.utime(root)
            return to_json({"path": self.relative(target.real), "created": False, "size": 0})
        with self.places.parent(target.real, create=not target.exists) as (folder, name):
            if target.exists:
                found = entry_stat(folder, name)
                if stat.S_ISREG(found.st_mode):
                    check_writable(found, shown)
                os.utime(name, dir_fd=folder, follow_symlinks=False)
            else:
                os.close(os.open(name, NEW_FILE_FLAGS, self.new_file_mode, dir_fd=folder))
            size = entry_stat(folder, name).st_size
        relative = self.relative(target.real)
        return to_json({"path": relative, "created": not target.exists, "size": size})

    def copy(
        self, source: str, destination: str, overwrite: bool = False, expect: Expect = None
    ) -> str:
        """Copy a file or a folder. An existing destination is replaced only if overwrite=True.

        A folder copy skips symlinks (and lists them); it never copies a link's target.
        """
        # Holes of sparse files are kept; the copy gets the source's permission bits, never
        # setuid or setgid; special files in a folder are skipped and listed too.
        self.check_expect("copy", {"source": source, "destination": destination}, expect)
        src = self.existing(source)
        dst = self.destination(destination, overwrite, src)
        if src.real.is_dir():
            if is_within(dst.real, src.real):
                raise ToolError(f"cannot copy {quoted_given(source)} into itself")
            summary = self.copy_folder(src, dst)
        else:
            summary = self.copy_file(source, dst)
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "replaced": dst.exists,
                **summary,
            }
        )

    def move(
        self, source: str, destination: str, overwrite: bool = False, expect: Expect = None
    ) -> str:
        """Move or rename a file, folder or symlink (a link moves as a link).

        An existing destination file is replaced only if overwrite=True.
        """
        # A move that would leave a relative link pointing outside the roots is refused.
        self.check_expect("move", {"source": source, "destination": destination}, expect)
        src = self.sandbox.resolve_entry(source)
        if not src.exists:
            raise ToolError(f"not found: {show_given(source)}")
        self.refuse_root(src, source, "move it")
        dst = self.destination(destination, overwrite, src)
        is_link = src.real.is_symlink()
        if src.real.is_dir() and not is_link and is_within(dst.real, src.real):
            raise ToolError(f"cannot move {quoted_given(source)} into itself")
        self.refuse_links_leaving(src, dst, is_link)
        with (
            self.places.parent(src.real) as (src_folder, src_name),
            self.places.parent(dst.real, create=True) as (dst_folder, dst_name),
        ):
            found = entry_stat(src_folder, src_name)
            if dst.exists:
                self.check_replaceable(dst_folder, dst_name, self.raw_relative(dst.real))
                replaced = entry_stat(dst_folder, dst_name)
                if (replaced.st_dev, replaced.st_ino) == (found.st_dev, found.st_ino):
                    # Two hard links of one file: rename(2) does nothing and says it did, so
                    # the source link is removed here, which is what the move means.
                    os.unlink(src_name, dir_fd=src_folder)
                    return self.moved(src, dst, found)
            try:
                os.rename(src_name, dst_name, src_dir_fd=src_folder, dst_dir_fd=dst_folder)
            except OSError as error:
                if error.errno != errno.EXDEV:
                    raise
                self.move_across(src_folder, src_name, dst_folder, dst_name, found, source)
        return self.moved(src, dst, found)

    def moved(self, src: Resolved, dst: Resolved, found: os.stat_result) -> str:
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "type": kind_of(found.st_mode),
                "replaced": dst.exists,
            }
        )

    def delete(self, path: str, recursive: bool = False, expect: Expect = None) -> str:
        """Delete a file, a symlink (the link, not its target) or a folder.

        A folder that is not empty needs recursive=True. Roots cannot be deleted.
        """
        self.check_expect("delete", {"path": path}, expect)
        target = self.sandbox.resolve_entry(path)
        if not target.exists:
            raise ToolError(f"not found: {show_given(path)}")
        self.refuse_root(target, path, "delete it")
        relative = self.relative(target.real)
        with self.places.parent(target.real) as (folder, name):
            found = entry_stat(folder, name)
            kind = kind_of(found.st_mode)
            if kind != "folder":
                size = found.st_size if stat.S_ISREG(found.st_mode) else 0
                os.unlink(name, dir_fd=folder)
                return to_json({"path": relative, "type": kind, "files": 1, "bytes": size})
            listed = os.open(name, LIST_FLAGS, dir_fd=folder)
            try:
                counts = count_tree(listed)
            finally:
                os.close(listed)
            if counts["files"] + counts["folders"] and not recursive:
                entries = counts["files"] + counts["folders"]
                raise ToolError(
                    f"folder {quoted_given(path)} is not empty ({entries:,} entries inside); "
                    "pass recursive=True to delete it with everything in it"
                )
            # All or nothing: the folder is first renamed aside under a temp name (hidden from
            # every listing, removed at the next start if the server is killed meanwhile), and
            # only then emptied, to its end even past the budget: once renamed it is deleted.
            aside = temp_name()
            check_budget()
            os.rename(name, aside, src_dir_fd=folder, dst_dir_fd=folder)
            with unbounded():
                remove_tree(folder, aside)
        return to_json({"path": relative, "type": "folder", **counts})

    # -- helpers for the tools above ------------------------------------------------------

    def create(self, target: Resolved, content: bytes, dry_run: bool) -> str:
        """A new file (and its missing folders) with `content`."""
        result = self.result(target, None, content)
        if dry_run:
            return self.dry_run(result, None, content)
        with self.places.parent(target.real, create=True) as (folder, name):
            mode = self.new_file_mode
            replace_entry(folder, name, writer_of(content), lambda fd: os.fchmod(fd, mode))
        return to_json(result)

    def write_dry_run(self, target: Resolved, fd: int, found: os.stat_result, new: bytes) -> str:
        """What replacing the open file `fd` with `new` would change."""
        if found.st_size > EDIT_LIMIT:
            result = self.result(target, None, new, sha256_of_fd(fd))
            return self.dry_run(result, None, new, old_size=found.st_size)
        old = read_whole(fd, self.raw_relative(target.real), "a dry run of write_file")
        return self.dry_run(self.result(target, old, new), old, new)

    def result(
        self, target: Resolved, old: bytes | None, new: bytes, old_digest: str | None = None
    ) -> dict[str, Any]:
        if old is not None:
            old_digest = sha256_hex(old)
        return {
            "path": self.relative(target.real),
            "size": len(new),
            "old_sha256": old_digest,
            "new_sha256": sha256_hex(new),
        }

    def dry_run(
        self, result: dict[str, Any], old: bytes | None, new: bytes, old_size: int = 0
    ) -> str:
        """The result with the diff the change would make, within the answer cap."""
        result = {**result, "dry_run": True}
        if old_size:
            diff = [
                f"(the file is {old_size:,} bytes, too large to diff; it would be replaced "
                f"by {len(new):,} bytes)"
            ]
        else:
            diff = preview(old, new, result["path"])
        room = READ_CAP - utf8_len(to_json({**result, "diff": []})) - MARKER_ROOM
        shown, hidden = capped_json_lines(diff, room)
        if hidden:
            shown.append(f"… [cut: {hidden:,} more lines of diff]")
        return to_json({**result, "diff": shown})

    def copy_file(self, source: str, dst: Resolved) -> dict[str, Any]:
        with self.opened_file(source) as (reader, found, _):
            with self.places.parent(dst.real, create=True) as (folder, name):
                # A new file gets the source's bits less the umask; a replaced one keeps its
                # own mode, owner and extended attributes, as write_file does.
                finish = self.new_copy_finisher(found)
                if dst.exists:
                    self.check_replaceable(folder, name, self.raw_relative(dst.real))
                    replaced = entry_stat(folder, name)
                    if stat.S_ISREG(replaced.st_mode):
                        finish = finisher(replaced, folder, name)
                size, digest = replace_entry(
                    folder, name, lambda fd: copy_sparse(reader, fd), finish
                )
        return {"files": 1, "bytes": size, "sha256": digest}

    def new_copy_finisher(self, source: os.stat_result) -> Callable[[int], None]:
        mode = stat.S_IMODE(source.st_mode) & PERMISSION_BITS & ~self.umask
        return lambda fd: os.fchmod(fd, mode)

    def copy_folder(self, src: Resolved, dst: Resolved) -> dict[str, Any]:
        """Copy a folder's files and folders; links and special files are skipped and
        listed, never followed or opened.

        The copy is built under a temp name (which no listing shows) and renamed to its name
        only when complete: a copy cut short, or missing a folder it could not read, is
        removed and the call fails, and a server killed meanwhile leaves no partial tree
        under the real name (the temp one is removed at the next start).
        """
        with self.places.parent(dst.real, create=True) as (folder, name):
            building = temp_name()
            os.mkdir(building, 0o700, dir_fd=folder)
            try:
                unreadable = Unreadable()
                top = os.open(building, LIST_FLAGS, dir_fd=folder)
                summary = self.copy_into(src, top, unreadable)
                if unreadable.count:
                    raise self.incomplete_copy(src, unreadable)
                check_budget()  # the last point where the call may stop: nothing is visible
                with suppress(FileNotFoundError):
                    entry_stat(folder, name)
                    raise ToolError(f"destination exists: {self.relative(dst.real)}")
                os.rename(building, name, src_dir_fd=folder, dst_dir_fd=folder)
                return summary
            except BaseException:
                with suppress(OSError), unbounded():
                    remove_tree(folder, building)
                raise

    def incomplete_copy(self, src: Resolved, unreadable: Unreadable) -> ToolError:
        first = self.relative(Path(unreadable.first)) if unreadable.first else "?"
        return ToolError(
            f"copy refused: {unreadable.count:,} folder(s) below {self.relative(src.real)} "
            f"could not be read (first: '{first}': {unreadable.error}); nothing was copied"
        )

    def copy_into(self, src: Resolved, top: int, unreadable: Unreadable) -> dict[str, Any]:
        files = folders = size = 0
        skipped_links = CappedLines(SKIPPED_LISTED_BYTES)
        skipped_other = CappedLines(SKIPPED_LISTED_BYTES)
        shown = self.shown_below(src.real)
        umask = self.umask
        opened = [(top, stat.S_IMODE(self.stat_of(src).st_mode) & ~umask)]
        try:
            for entry, depth in self.walker.walk(src.real, unreadable=unreadable):
                while len(opened) > depth + 1:
                    close_folder(*opened.pop())
                below = opened[-1][0]
                if entry.kind == "dir":
                    mode = entry_stat(entry.folder_fd, entry.name).st_mode & ~umask
                    os.mkdir(entry.name, 0o700, dir_fd=below)
                    opened.append((os.open(entry.name, LIST_FLAGS, dir_fd=below), mode))
                    folders += 1
                elif entry.kind == "file":
                    size += copy_entry(entry.folder_fd, entry.name, below, entry.path, umask)
                    files += 1
                elif entry.kind == "link":
                    skipped_links.add(shown(entry.relative))
                else:
                    skipped_other.add(shown(entry.relative))
        finally:
            while opened:
                close_folder(*opened.pop())
        return {
            "files": files,
            "folders": folders,
            "bytes": size,
            "skipped_links": listed(skipped_links),
            "skipped_other": listed(skipped_other),
        }

    def move_across(
        self,
        src_folder: int,
        src_name: str,
        dst_folder: int,
        dst_name: str,
        found: os.stat_result,
        source: str,
    ) -> None:
        """A move to another filesystem: copy, then remove the original (files and links)."""
        if stat.S_ISLNK(found.st_mode):
            text = os.readlink(src_name, dir_fd=src_folder)
            with suppress(FileNotFoundError):
                os.unlink(dst_name, dir_fd=dst_folder)
            os.symlink(text, dst_name, dir_fd=dst_folder)
        elif stat.S_ISREG(found.st_mode):
            reader, found = open_checked(src_folder, src_name, source)
            try:
                replace_entry(
                    dst_folder,
                    dst_name,
                    lambda fd: copy_sparse(reader, fd),
                    finisher(found, src_folder, src_name),
                )
            finally:
                os.close(reader)
        else:
            raise ToolError(
                f"cannot move {quoted_given(source)} to another filesystem: it is a "
                f"{kind_of(found.st_mode)}; copy it there, then delete the original"
            )
        os.unlink(src_name, dir_fd=src_folder)

    def refuse_root(self, resolved: Resolved, given: str, action: str) -> None:
        if self.sandbox.contains_a_root(resolved.real):
            raise self.sandbox.refuse(given, f"is an allowed root or holds one; cannot {action}")

    def refuse_links_leaving(self, src: Resolved, dst: Resolved, is_link: bool) -> None:
        if not is_link and not src.real.is_dir():
            return  # a file takes no link along
        leaving = links_leaving(self.sandbox, self.walker, src.real, dst.real, is_link)
        if not leaving:
            return
        below, text = leaving[0]
        link = self.relative(src.real / below if below else src.real)
        more = f" (and {len(leaving) - 1:,} more)" if len(leaving) > 1 else ""
        raise ToolError(
            f"move refused: symlink '{link}' -> '{show(text)}'{more} would point outside the "
            "allowed roots from its new place; nothing was moved"
        )

    def check_replaceable(self, folder: int, name: str, shown: str) -> None:
        """An existing destination may be replaced only if a regular file we may write, or a
        link (which is replaced itself)."""
        found = entry_stat(folder, name)
        if stat.S_ISLNK(found.st_mode):
            return
        if not stat.S_ISREG(found.st_mode):
            raise not_regular(shown, found.st_mode)
        check_writable(found, shown)

    def destination(self, given: str, overwrite: bool, source: Resolved) -> Resolved:
        """Resolve a copy/move destination and check it may be (re)placed."""
        dst = self.sandbox.resolve_entry(given)
        self.refuse_root(dst, given, "replace it")
        if dst.real == source.real:
            raise ToolError("source and destination are the same")
        if not dst.exists:
            return dst
        if not overwrite:
            raise ToolError(
                f"destination exists: {show_given(given)}; pass overwrite=True to replace it"
            )
        if dst.real.is_dir() and not dst.real.is_symlink():
            raise ToolError(
                f"destination {quoted_given(given)} is a folder; delete it first to replace it"
            )
        if source.real.is_dir() and not source.real.is_symlink():
            raise ToolError(
                f"cannot replace file {quoted_given(given)} with a folder; delete it first"
            )
        return dst


def finisher(old: os.stat_result, folder: int, name: str) -> Callable[[int], None]:
    """Gives a replacement file the owner, group, mode and extended attributes (ACLs among
    them, set last: an ACL's mask is the group bits) of the file `name` in `folder`, which
    it replaces (or, for a move, is moved from)."""

    def finish(fd: int) -> None:
        take_over(fd, old)
        give_attributes(fd, attributes_of(folder, name), name)

    return finish


def listed(names: CappedLines) -> list[str]:
    """The names kept, and how many more there were."""
    return names.lines + ([more_marker(names.hidden)] if names.hidden else [])


def close_folder(fd: int, mode: int) -> None:
    """Close a copied folder, giving it its source's permission bits now that it is full."""
    try:
        os.fchmod(fd, stat.S_IMODE(mode) & PERMISSION_BITS)
    finally:
        os.close(fd)


def copy_entry(
    source_folder: int, name: str, destination_folder: int, path: str, umask: int
) -> int:
    """Copy the regular file `name` between folders (holes kept); return its size."""
    reader, found = open_checked(source_folder, name, path)
    try:
        mode = stat.S_IMODE(found.st_mode) & PERMISSION_BITS & ~umask
        writer = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=destination_folder)
        try:
            size, _ = copy_sparse(reader, writer)
            os.fchmod(writer, mode)
        finally:
            os.close(writer)
    finally:
        os.close(reader)
    return size


def preview(old: bytes | None, new: bytes, relative: str) -> list[str]:
    old_text = "" if old is None else decode_text(old)
    new_text = decode_text(new)
    if old_text is None or new_text is None:
        return [f"(binary: {len(old or b''):,} bytes would become {len(new):,} bytes)"]
    try:
        lines = list(unified_diff(old_text, new_text, f"a/{relative}", f"b/{relative}"))
    except DiffTooLarge as too_large:
        return [f"({too_large.describe()})"]
    return lines or ["(no change)"]


def line_ending_of(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"


def any_line_ending(old_text: str) -> re.Pattern[str]:
    """`old_text` as a pattern whose each line break matches "\n" or "\r\n", so an edit
    matches across the breaks of a file whose lines end both ways."""
    lines = old_text.replace("\r\n", "\n").split("\n")
    return re.compile("\r?\n".join(map(re.escape, lines)))


def with_endings_of(new_text: str, matched: str, newline: str) -> str:
    """`new_text` with each line break the one at the same place in `matched` (the file's
    usual ending past the breaks `matched` has), so each line keeps its own ending."""
    endings = re.findall(r"\r?\n", matched)
    lines = new_text.replace("\r\n", "\n").split("\n")
    out = [lines[0]]
    for number, line in enumerate(lines[1:]):
        out.append(endings[number] if number < len(endings) else newline)
        out.append(line)
    return "".join(out)


def apply_edits(text: str, edits: list[Edit], path: str) -> str:
    """Apply the edits in order to `text`; raise on the first that does not match once."""
    newline = line_ending_of(text)
    patched = text
    for number, edit in enumerate(edits, start=1):
        check_budget()
        if not edit.old_text:
            raise ToolError(f"edit {number}: old_text is empty")
        pattern = any_line_ending(edit.old_text)
        found = [match for _, match in zip(range(2), pattern.finditer(patched), strict=False)]
        if not found:
            raise ToolError(f"edit {number}: old_text not found in {path}; nothing was changed")
        if len(found) > 1:
            count = len(pattern.findall(patched))
            raise ToolError(
                f"edit {number}: old_text occurs {count} times in {path}; add surrounding "
                "lines so it occurs once (nothing was changed)"
            )
        match = found[0]
        new = with_endings_of(edit.new_text, match.group(), newline)
        patched = patched[: match.start()] + new + patched[match.end() :]
    if text.endswith("\n") and patched and not patched.endswith("\n"):
        patched += newline  # an edit that swallowed the final newline keeps it
    return patched
