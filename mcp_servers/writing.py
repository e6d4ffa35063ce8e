"""The write tools that change a file or make one: write_file, patch_file, make_dir and touch,
and the diffs a dry run returns (copy, move and delete are in tree_writes.py).

Every change is made by descriptor in the folder it was checked to be in (dirfd.py), on
exactly the entry checked there (capture.py): a new file is written as a temp file in the
destination folder and swapped in for the file it replaces, so a reader never sees half a
file, and an entry put under the name meanwhile is put back untouched and the call refused.
Writes never widen permissions (permissions.py), only regular files are written over, and
whole-file edits refuse files over 8 MiB.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Literal

from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel

from mcp_servers.answers import MARKER_ROOM, READ_CAP, capped_json_lines, to_json, utf8_len
from mcp_servers.budget import check_budget
from mcp_servers.capture import changed_error, confirm, now_at
from mcp_servers.diffing import DiffTooLarge, unified_diff
from mcp_servers.dirfd import LIST_FLAGS, Nearest
from mcp_servers.fileio import (
    EDIT_LIMIT,
    READ_FLAGS,
    decode_text,
    kind_of,
    not_regular,
    open_checked,
    read_whole,
    sha256_hex,
    sha256_of_fd,
)
from mcp_servers.names import quoted_given
from mcp_servers.parent_checks import ParentChanged, verify
from mcp_servers.permissions import check_writable
from mcp_servers.plans import (
    MISSING,
    ROOT_STATE,
    Wanted,
    content_state,
    entry_state,
    file_state,
    folder_state,
)
from mcp_servers.race_hook import checked, pause
from mcp_servers.replacing import NEW_FILE_FLAGS, finisher, replace_entry, writer_of
from mcp_servers.request_limits import MAX_EDITS
from mcp_servers.sandbox import Resolved
from mcp_servers.tool_base import show_given
from mcp_servers.tree_writes import TreeTools

MAX_WRITE_BYTES = EDIT_LIMIT  # content a write may carry
# What the person's preview showed (a plan's paths, plans.py); the write is refused if it differs.
Expect = list[dict[str, Any]] | None


class Edit(BaseModel):
    """One replacement for patch_file: `old_text` must occur exactly once."""

    old_text: str
    new_text: str


class WriteTools(TreeTools):
    """The tools that write; each public method is registered under its own name."""

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
        # A precondition from a plan (plans.py): refused if the file changed.
        want = None if dry_run else self.wanted("write_file", expect).get("path")
        new_part = content.encode("utf-8")
        if len(new_part) > MAX_WRITE_BYTES:
            raise ToolError(f"invalid_argument: content is larger than {MAX_WRITE_BYTES:,} bytes")
        target = self.target("write_file", "path", path, want)
        shown = self.raw_relative(target.real)
        with self.places.nearest(target.real) as (nearest, name):
            folder = None if nearest.missing else nearest.fd
            found = None if folder is None else now_at(folder, name)
            if folder is None or found is None:
                self.check_state(want, target, MISSING)
                return self.create(target, nearest, name, new_part, dry_run, want)
            fd, found = self.open_to_replace(folder, name, found, target, want)
            try:
                check_writable(found, shown)
                held = self.held("write_file", "path", folder, name, target, found, want)
                if mode == "append":
                    old = read_whole(fd, shown, "write_file with mode='append'")
                    self.check_state(want, target, content_state(old))
                    result = self.result(target, old, old + new_part)
                    if dry_run:
                        return self.dry_run(result, old, old + new_part)
                    replace_entry(held, writer_of(old, new_part), finisher(found, folder, name))
                    return to_json(result)
                if dry_run:
                    return self.write_dry_run(target, fd, found, new_part)
                old_state = file_state(fd, found)
                self.check_state(want, target, old_state)
            finally:
                os.close(fd)
            replace_entry(held, writer_of(new_part), finisher(found, folder, name))
        return to_json(self.result(target, None, new_part, old_state["sha256"]))

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
        want = None if dry_run else self.wanted("patch_file", expect).get("path")
        target = self.target("patch_file", "path", path, want)
        shown = self.raw_relative(target.real)
        with self.places.parent_if_there(target.real) as (folder, name):
            found = None if folder is None else now_at(folder, name)
            if folder is None or found is None:
                self.check_state(want, target, MISSING)
                raise ToolError(f"not found: {show_given(path)}")
            fd, found = self.open_to_replace(folder, name, found, target, want)
            try:
                check_writable(found, shown)
                old = read_whole(fd, shown, "patch_file")
            finally:
                os.close(fd)
            self.check_state(want, target, content_state(old))
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
            held = self.held("patch_file", "path", folder, name, target, found, want)
            replace_entry(held, writer_of(new), finisher(found, folder, name))
        return to_json(result)

    def make_dir(self, path: str, expect: Expect = None) -> str:
        """Create a folder, and any missing parents. An existing folder is left as it is."""
        want = self.wanted("make_dir", expect).get("path")
        target = self.target("make_dir", "path", path, want)
        relative = self.relative(target.real)
        if target.real in self.sandbox.roots:
            self.check_state(want, target, ROOT_STATE)
            return to_json({"path": relative, "created": False})
        with self.places.nearest(target.real) as (nearest, name):
            folder = None if nearest.missing else nearest.fd
            if folder is None:
                state, found = MISSING, None
            elif want is not None:
                state, found = entry_state(folder, name, self.raw_relative(target.real))
            else:
                found = now_at(folder, name)
                state = MISSING
            self.check_state(want, target, state)
            if found is not None:
                if not stat.S_ISDIR(found.st_mode):
                    raise ToolError(
                        f"{quoted_given(path)} exists and is a {kind_of(found.st_mode)}"
                    )
                return to_json({"path": relative, "created": False})
            # Made in the folder checked (held since), never by its path again: a folder on
            # the way moved or replaced meanwhile refuses the call (parent_checks.py).
            pause("make_dir", "path")
            verify(nearest.fd)
            checked("make_dir", "path")
            whole = Nearest(nearest.fd, (*nearest.missing, name))
            with self.places.made_below(target.real, whole):
                verify(nearest.fd, during=True)  # else the folders made are removed again
        return to_json({"path": relative, "created": True})

    def touch(self, path: str, expect: Expect = None) -> str:
        """Create an empty file, or update the modification time of an existing one."""
        want = self.wanted("touch", expect).get("path")
        target = self.target("touch", "path", path, want)
        relative = self.relative(target.real)
        if target.real in self.sandbox.roots:
            self.check_state(want, target, ROOT_STATE)
            with self.listed_folder(target) as root:
                os.utime(root)
            return to_json({"path": relative, "created": False, "size": 0})
        with self.places.nearest(target.real) as (nearest, name):
            folder = None if nearest.missing else nearest.fd
            found = None if folder is None else now_at(folder, name)
            if folder is not None and found is not None:
                size = self.touch_entry(folder, name, found, target, want)
                return to_json({"path": relative, "created": False, "size": size})
            self.check_state(want, target, MISSING)
            pause("touch", "path")
            verify(nearest.fd)
            checked("touch", "path")
            made = self.made_for(target.real)
            with self.places.made_below(target.real.parent, nearest, made) as folder:
                held = self.held("touch", "path", folder, name, target, None, want)
                try:
                    os.close(os.open(name, NEW_FILE_FLAGS, self.new_file_mode, dir_fd=folder))
                except FileExistsError:
                    raise held.refused(now_at(folder, name)) from None
                try:
                    verify(folder, during=True)
                except ParentChanged:
                    os.unlink(name, dir_fd=folder)  # the folders made go too, as it fails
                    raise
        return to_json({"path": relative, "created": True, "size": 0})

    # -- helpers for the tools above ------------------------------------------------------

    def open_to_replace(
        self, folder: int, name: str, found: os.stat_result, target: Resolved, want: Wanted
    ) -> tuple[int, os.stat_result]:
        """The regular file to be replaced, open to read; a link found at a path that was
        resolved through its links is a change made since, and refused."""
        shown = self.raw_relative(target.real)
        if stat.S_ISLNK(found.st_mode):
            raise changed_error(shown, want is not None, "a symlink is there now")
        if not stat.S_ISREG(found.st_mode):
            raise not_regular(shown, found.st_mode)
        return open_checked(folder, name, shown)

    def touch_entry(
        self, folder: int, name: str, found: os.stat_result, target: Resolved, want: Wanted
    ) -> int:
        """Set an existing entry's times to now, through a descriptor of the entry checked
        where one can be opened (by name, after checking it is still that entry, where not:
        a special file, or one this user may not read); return its size."""
        shown = self.raw_relative(target.real)
        if stat.S_ISLNK(found.st_mode):
            raise changed_error(shown, want is not None, "a symlink is there now")
        fd = touch_descriptor(folder, name, found)
        try:
            if fd is not None:
                found = os.fstat(fd)
            if want is not None:
                self.check_state(want, target, self.state_through(fd, found, folder, name, shown))
            if stat.S_ISREG(found.st_mode):
                check_writable(found, shown)
            confirm(self.held("touch", "path", folder, name, target, found, want))
            if fd is not None:
                os.utime(fd)
            else:
                os.utime(name, dir_fd=folder, follow_symlinks=False)
        finally:
            if fd is not None:
                os.close(fd)
        return found.st_size

    def state_through(
        self, fd: int | None, found: os.stat_result, folder: int, name: str, shown: str
    ) -> dict[str, Any]:
        if fd is not None and stat.S_ISREG(found.st_mode):
            return file_state(fd, found)
        if fd is not None and stat.S_ISDIR(found.st_mode):
            return folder_state(fd)
        return entry_state(folder, name, shown)[0]

    def create(
        self,
        target: Resolved,
        nearest: Nearest,
        name: str,
        content: bytes,
        dry_run: bool,
        want: Wanted,
    ) -> str:
        """A new file `name` (and its missing folders) with `content`, where nothing is yet,
        below `nearest`, the folder checked: its missing folders are made only once it is
        known to be still the one checked, where it was (parent_checks.py)."""
        result = self.result(target, None, content)
        if dry_run:
            return self.dry_run(result, None, content)
        pause("write_file", "path")
        verify(nearest.fd)
        made = self.made_for(target.real)
        with self.places.made_below(target.real.parent, nearest, made) as folder:
            held = self.held("write_file", "path", folder, name, target, None, want)
            mode = self.new_file_mode
            replace_entry(held, writer_of(content), lambda fd: os.fchmod(fd, mode), paused=True)
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


def touch_descriptor(folder: int, name: str, found: os.stat_result) -> int | None:
    """A descriptor of the regular file or folder `name`, to set its times by, or None."""
    if stat.S_ISREG(found.st_mode):
        flags = READ_FLAGS
    elif stat.S_ISDIR(found.st_mode):
        flags = LIST_FLAGS
    else:
        return None
    try:
        fd = os.open(name, flags, dir_fd=folder)
    except PermissionError:
        return None
    if stat.S_IFMT(os.fstat(fd).st_mode) != stat.S_IFMT(found.st_mode):
        os.close(fd)
        return None
    return fd


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
