"""A sandboxed MCP filesystem server over stdio.

    python -m mcp_servers.filesystem [--read-only] [--verbose] ROOT [ROOT ...]

Every path goes through `mcp_servers.sandbox.Sandbox` (see there for the containment rules).
Tools answer in plain text (reads, listings, searches) or JSON (info, hashes and every write).
Errors come back as MCP error results with one line; a refused path starts `security_error:`.

Symlinks: reads and writes follow a link only when its target is inside the roots. `delete` and
`move` act on a link itself, never on its target, and refuse a link that points outside.
Recursive walks (trees, searches, grep, folder copies) never descend into a link, and leave
out links that point outside (or dangle) without naming them.

Paths in answers are relative to the first root (relative tool paths start there); a path in
another root is given in full, so it can be passed back as it is. Listings, trees and searches
end with `(+N more)` when cut; grep stops at max_matches and says `(+more: ...)`.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ValidationError

from mcp_servers.sandbox import (
    Resolved,
    RootError,
    Sandbox,
    SandboxError,
    is_within,
    resolve_roots,
)

READ_TOOL_NAMES: frozenset[str] = frozenset(
    {
        "list_allowed_roots",
        "list_directory",
        "list_directory_with_sizes",
        "directory_tree",
        "read_file",
        "read_multiple_files",
        "get_file_info",
        "file_hash",
        "search_files",
        "grep",
        "diff_files",
    }
)
WRITE_TOOL_NAMES: frozenset[str] = frozenset(
    {"write_file", "patch_file", "make_dir", "touch", "copy", "move", "delete"}
)

READ_CAP = 256 * 1024  # bytes of file content in one answer
BINARY_PROBE = 8 * 1024  # a NUL byte in this many leading bytes marks a file as binary
MAX_LISTED = 1000  # entries in a listing or search answer
MAX_TREE_ENTRIES = 2000
MAX_LINE_SHOWN = 400  # characters of one grep line
GREP_MAX_FILE = 64 * 1024 * 1024  # larger files are skipped by grep, and said so
DIFF_MAX_FILE = 8 * 1024 * 1024
MAX_FILES_PER_READ = 50
MAX_WRITE_BYTES = 32 * 1024 * 1024
TEMP_PREFIX = ".fsagent-"
REGEX_SPECIALS = frozenset(".^$*+?{}[]\\|()")

logger = logging.getLogger("fsagent.filesystem")


class Edit(BaseModel):
    """One replacement for patch_file: `old_text` must occur exactly once."""

    old_text: str
    new_text: str


# -- small helpers ------------------------------------------------------------------------------


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_nofollow(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """Open without following a final symlink, so a link swapped in after the check fails."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def read_bytes(path: Path) -> bytes:
    with os.fdopen(open_nofollow(path), "rb") as handle:
        return handle.read()


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with os.fdopen(open_nofollow(path), "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_PROBE]


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary (a NUL byte early on, or not UTF-8)."""
    if looks_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def current_umask() -> int:
    # os.umask can only be read by setting it; done once at start, before any thread runs.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to a temp file next to `path`, then rename it over `path`.

    The rename replaces whatever entry is at `path` (a symlink included) without following it,
    and a reader never sees a half-written file.
    """
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def diff_lines(old: str, new: str, name: str) -> list[str]:
    """A unified diff as a list of lines (without line ends), readable inside JSON."""
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"a/{name}", f"b/{name}", lineterm=""
    )
    return list(diff)


def more_marker(hidden: int) -> str:
    return f"(+{hidden:,} more)"


def matches_any(name: str, relative: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(relative, g) for g in globs)


def check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolError(f"invalid_argument: {name} must be between {low} and {high}, got {value}")


# -- directory walking --------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One directory entry as the sandbox lets a client see it.

    Paths are plain strings here: walks create one Entry per file, and pathlib's overhead
    would dominate a grep over ten thousand small files.
    """

    name: str
    path: str  # the entry itself (a link stays a link)
    relative: str  # below the folder that was listed or walked
    kind: Literal["dir", "file", "link", "other", "outside-link"]
    target: Path | None = None  # real target of a link that stays inside

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


class Walker:
    """Lists and walks folders without ever following a link that leaves the roots."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def classify(self, item: os.DirEntry[str], prefix: str) -> Entry:
        name, path, relative = item.name, item.path, prefix + item.name
        if item.is_symlink():
            try:
                target = Path(os.path.realpath(path, strict=True))
            except OSError:  # dangling or a loop: treated like a link that leaves
                return Entry(name, path, relative, "outside-link")
            if not self.sandbox.is_inside(target):
                return Entry(name, path, relative, "outside-link")
            return Entry(name, path, relative, "link", target)
        if item.is_dir(follow_symlinks=False):
            return Entry(name, path, relative, "dir")
        if item.is_file(follow_symlinks=False):
            return Entry(name, path, relative, "file")
        return Entry(name, path, relative, "other")

    def scan(self, folder: Path | str, prefix: str = "") -> list[Entry]:
        """The entries of one folder sorted by name; an unreadable folder is empty."""
        try:
            with os.scandir(folder) as items:
                entries = [self.classify(item, prefix) for item in items]
        except OSError as error:
            logger.info("cannot list %s: %s", folder, error)
            return []
        entries.sort(key=lambda entry: entry.name)
        return entries

    def walk(
        self, top: Path, exclude: list[str] | None = None, max_depth: int | None = None
    ) -> Iterator[tuple[Entry, int]]:
        """Entries below `top`, depth first, with their depth (0 for top's children).

        Excluded entries are neither yielded nor descended into; links are yielded but never
        descended into, and links that leave the roots are left out.
        """
        stack = [iter(self.scan(top))]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            if entry.kind == "outside-link":
                continue
            if exclude and matches_any(entry.name, entry.relative, exclude):
                continue
            depth = len(stack) - 1
            yield entry, depth
            if entry.is_dir and (max_depth is None or depth + 1 < max_depth):
                stack.append(iter(self.scan(entry.path, entry.relative + "/")))


# -- the tools ----------------------------------------------------------------------------------


class FileTools:
    """The tools; each public method is registered under its own name."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.walker = Walker(sandbox)
        self.new_file_mode = 0o666 & ~current_umask()

    # -- shared steps ---------------------------------------------------------------------

    def existing(self, given: str) -> Resolved:
        resolved = self.sandbox.resolve(given)
        if not resolved.exists:
            raise ToolError(f"not found: {given}")
        return resolved

    def existing_file(self, given: str) -> Resolved:
        resolved = self.existing(given)
        if resolved.real.is_dir():
            raise ToolError(f"{given!r} is a folder, not a file")
        if not resolved.real.is_file():
            raise ToolError(f"{given!r} is not a regular file")
        return resolved

    def existing_folder(self, given: str) -> Resolved:
        resolved = self.existing(given)
        if not resolved.real.is_dir():
            raise ToolError(f"{given!r} is a file, not a folder")
        return resolved

    def relative(self, real: Path) -> str:
        root = self.sandbox.root_of(real)
        if root is None:  # cannot happen for a resolved path; never print an outside name
            return "?"
        relative = real.relative_to(root).as_posix() or "."
        return relative if root == self.sandbox.roots[0] else str(real)

    def shown_below(self, folder: Path) -> Callable[[str], str]:
        """A function that names an entry below `folder` the way tools report paths."""
        base = self.relative(folder)
        return lambda relative: relative if base == "." else f"{base}/{relative}"

    def refuse_root(self, resolved: Resolved, given: str, action: str) -> None:
        if self.sandbox.contains_a_root(resolved.real):
            raise self.sandbox.refuse(given, f"is an allowed root or holds one; cannot {action}")

    def binary_report(self, resolved: Resolved) -> str:
        size = resolved.real.stat().st_size
        digest = sha256_of_file(resolved.real)
        return (
            f"binary file: {self.relative(resolved.real)} ({size:,} bytes, sha256 {digest}); "
            "not shown"
        )

    # -- read tools -----------------------------------------------------------------------

    def list_allowed_roots(self) -> str:
        """List the folders this server may touch. Relative paths start at the first one."""
        lines = [str(root) for root in self.sandbox.roots]
        return "Allowed roots (relative paths start at the first):\n" + "\n".join(lines)

    def list_directory(self, path: str) -> str:
        """List a folder: one entry a line, marked [DIR], [FILE] or [LINK]."""
        folder = self.existing_folder(path)
        lines = [self.entry_line(entry) for entry in self.visible(folder.real)]
        return self.capped_listing(lines, empty=f"{path} is empty")

    def list_directory_with_sizes(
        self, path: str, sort_by: Literal["name", "size"] = "name"
    ) -> str:
        """List a folder with file sizes in bytes, sorted by name or by size (largest first)."""
        folder = self.existing_folder(path)
        sized = [(entry, self.size_of(entry)) for entry in self.visible(folder.real)]
        if sort_by == "size":
            sized.sort(key=lambda pair: pair[1], reverse=True)
        lines = []
        for entry, size in sized:
            shown = "" if entry.is_dir else f"  {size:,} bytes"
            lines.append(self.entry_line(entry) + shown)
        files = sum(1 for entry, _ in sized if not entry.is_dir)
        total = sum(size for _, size in sized)
        summary = f"Total: {files:,} files, {len(sized) - files:,} folders, {total:,} bytes"
        return self.capped_listing(lines, empty=f"{path} is empty") + "\n" + summary

    def directory_tree(
        self, path: str, max_depth: int = 3, exclude: list[str] | None = None
    ) -> str:
        """Show the folder tree below `path`, down to `max_depth` levels.

        `exclude` takes glob patterns matched on names and on paths relative to `path`.
        """
        check_range("max_depth", max_depth, 1, 20)
        folder = self.existing_folder(path)
        lines = [self.relative(folder.real) + "/"]
        hidden = 0
        for entry, depth in self.walker.walk(folder.real, exclude, max_depth):
            if len(lines) > MAX_TREE_ENTRIES:
                hidden += 1
                continue
            lines.append("  " * (depth + 1) + self.tree_name(entry))
        if hidden:
            lines.append(more_marker(hidden))
        return "\n".join(lines)

    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file, or lines start_line..end_line of it (1-based, inclusive).

        Answers are capped at 256 KiB; a marker at the end says how to read on. Binary files
        are reported with their size and sha256 instead of their content.
        """
        check_range("start_line", start_line, 1, 2**31)
        if end_line is not None and end_line < start_line:
            raise ToolError(f"invalid_argument: end_line ({end_line}) is before start_line")
        resolved = self.existing_file(path)
        return self.read_lines(resolved, start_line, end_line, READ_CAP)

    def read_multiple_files(self, paths: list[str]) -> str:
        """Read several text files at once (at most 50); 256 KiB in all.

        A file that cannot be read gets its error line in place of its content.
        """
        if not paths:
            raise ToolError("invalid_argument: paths is empty")
        if len(paths) > MAX_FILES_PER_READ:
            raise ToolError(f"invalid_argument: at most {MAX_FILES_PER_READ} paths at once")
        parts, errors, budget = [], [], READ_CAP
        for given in paths:
            if budget <= 0:
                parts.append(f"=== {given} ===\n(not read: answer limit reached; read it alone)")
                continue
            try:
                text = self.read_lines(self.existing_file(given), 1, None, budget)
            except (SandboxError, ToolError, OSError) as error:
                text = one_line(error)
                errors.append(text)
            budget -= len(text.encode("utf-8"))
            parts.append(f"=== {given} ===\n{text}")
        if len(errors) == len(paths):
            raise ToolError("; ".join(errors))
        return "\n\n".join(parts)

    def get_file_info(self, path: str) -> str:
        """Size, type, permissions and times of a file or folder, as JSON."""
        resolved = self.existing(path)
        info = resolved.real.stat()
        given_is_link = os.path.islink(self.sandbox.absolute(path))
        data: dict[str, Any] = {
            "path": self.relative(resolved.real),
            "type": "folder" if stat.S_ISDIR(info.st_mode) else "file",
            "size": info.st_size,
            "mode": oct(stat.S_IMODE(info.st_mode)),
            "modified": iso_time(info.st_mtime),
            "accessed": iso_time(info.st_atime),
            "changed": iso_time(info.st_ctime),
            "is_symlink": given_is_link,
        }
        if given_is_link:
            data["symlink_target"] = self.relative(resolved.real)
        return to_json(data)

    def file_hash(self, path: str) -> str:
        """The sha256 of a file, as JSON with its path and size."""
        resolved = self.existing_file(path)
        digest = sha256_of_file(resolved.real)
        size = resolved.real.stat().st_size
        return to_json({"path": self.relative(resolved.real), "sha256": digest, "size": size})

    def search_files(self, path: str, pattern: str, exclude: list[str] | None = None) -> str:
        """Find files and folders below `path` whose name matches a glob (e.g. '*.py').

        A pattern with '/' is matched against the path relative to `path`. `exclude` globs
        skip entries and whole folders.
        """
        if not pattern:
            raise ToolError("invalid_argument: pattern is empty")
        folder = self.existing_folder(path)
        by_path = "/" in pattern
        shown = self.shown_below(folder.real)
        found, hidden = [], 0
        for entry, _ in self.walker.walk(folder.real, exclude):
            if not fnmatch.fnmatchcase(entry.relative if by_path else entry.name, pattern):
                continue
            if len(found) >= MAX_LISTED:
                hidden += 1
                continue
            found.append(shown(entry.relative) + ("/" if entry.is_dir else ""))
        if not found:
            return f"No match for {pattern!r} under {path}"
        return "\n".join(found + ([more_marker(hidden)] if hidden else []))

    def grep(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        context: int = 0,
        max_matches: int = 200,
    ) -> str:
        """Search file contents for a regular expression (Python syntax), like grep -rn.

        Prints 'path:line:text' for each matching line (and 'path-line-text' for context
        lines). `glob` limits the files searched by name (e.g. '*.py'). Binary files are
        skipped. Stops after `max_matches` matching lines.
        """
        check_range("context", context, 0, 20)
        check_range("max_matches", max_matches, 1, 10_000)
        if len(pattern) > 1000:
            raise ToolError("invalid_argument: pattern is longer than 1000 characters")
        search = GrepRun(pattern, ignore_case, context, max_matches)
        resolved = self.existing(path)
        for file_path, shown_as in self.grep_targets(resolved, glob):
            search.search_file(file_path, shown_as)
            if search.full:
                break
        return search.report(pattern)

    def diff_files(self, path_a: str, path_b: str) -> str:
        """A unified diff between two text files."""
        first, second = self.existing_file(path_a), self.existing_file(path_b)
        texts = []
        for resolved in (first, second):
            if resolved.real.stat().st_size > DIFF_MAX_FILE:
                raise ToolError(f"{self.relative(resolved.real)} is too large to diff (> 8 MiB)")
            texts.append(decode_text(read_bytes(resolved.real)))
        name_a, name_b = self.relative(first.real), self.relative(second.real)
        if texts[0] is None or texts[1] is None:
            if sha256_of_file(first.real) == sha256_of_file(second.real):
                return "Binary files are identical"
            return f"Binary files {name_a} and {name_b} differ"
        if texts[0] == texts[1]:
            return "Files are identical"
        diff = difflib.unified_diff(
            texts[0].splitlines(keepends=True), texts[1].splitlines(keepends=True), name_a, name_b
        )
        return cap_text("".join(line if line.endswith("\n") else line + "\n" for line in diff))

    # -- write tools ----------------------------------------------------------------------

    def write_file(
        self,
        path: str,
        content: str,
        mode: Literal["write", "append"] = "write",
        dry_run: bool = False,
    ) -> str:
        """Create or replace a text file (mode='write'), or add to its end (mode='append').

        The write is atomic and keeps the file's permissions. dry_run=True changes nothing and
        returns the diff it would apply.
        """
        new_part = content.encode("utf-8")
        if len(new_part) > MAX_WRITE_BYTES:
            raise ToolError("invalid_argument: content is larger than 32 MiB")
        target = self.sandbox.resolve(path)
        old = self.current_bytes(target, path)
        new = (old or b"") + new_part if mode == "append" else new_part
        return self.replace_content(target, old, new, dry_run)

    def patch_file(
        self,
        path: str,
        edits: list[Edit],
        expected_sha256: str | None = None,
        dry_run: bool = False,
    ) -> str:
        """Replace text in a file: each edit's old_text must occur exactly once.

        Edits apply in order, all or nothing. Line endings and the final newline are kept
        (an edit written with \\n matches a CRLF file). Pass expected_sha256 (from file_hash
        or an earlier write) to refuse the patch if the file changed meanwhile.
        """
        if not edits:
            raise ToolError("invalid_argument: edits is empty")
        target = self.existing_file(path)
        old = read_bytes(target.real)
        if expected_sha256 is not None and expected_sha256.lower() != sha256_hex(old):
            raise ToolError(
                f"patch refused: {path} changed (sha256 is {sha256_hex(old)}, "
                f"expected {expected_sha256}); read it again and redo the edits"
            )
        text = decode_text(old)
        if text is None:
            raise ToolError(f"{path} is binary; patch_file edits text files only")
        patched = apply_edits(text, edits, path)
        return self.replace_content(target, old, patched.encode("utf-8"), dry_run)

    def make_dir(self, path: str) -> str:
        """Create a folder, and any missing parents. An existing folder is left as it is."""
        target = self.sandbox.resolve(path)
        if target.exists and not target.real.is_dir():
            raise ToolError(f"{path!r} exists and is a file")
        if not target.exists:
            os.makedirs(target.real)
        return to_json({"path": self.relative(target.real), "created": not target.exists})

    def touch(self, path: str) -> str:
        """Create an empty file, or update the modification time of an existing one."""
        target = self.sandbox.resolve(path)
        if target.exists:
            os.utime(target.real, follow_symlinks=False)
        else:
            target.real.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            os.close(open_nofollow(target.real, flags, self.new_file_mode))
        size = target.real.stat().st_size
        relative = self.relative(target.real)
        return to_json({"path": relative, "created": not target.exists, "size": size})

    def copy(self, source: str, destination: str, overwrite: bool = False) -> str:
        """Copy a file or a folder. An existing destination is replaced only if overwrite=True.

        A folder copy skips symlinks (and lists them); it never copies a link's target.
        """
        src = self.existing(source)
        dst = self.destination(destination, overwrite, src)
        if src.real.is_dir():
            if is_within(dst.real, src.real):
                raise ToolError(f"cannot copy {source!r} into itself")
            summary = copy_tree(src.real, dst.real, self.walker)
            shown = self.shown_below(src.real)
            summary["skipped_links"] = [shown(link) for link in summary["skipped_links"]]
        else:
            data = read_bytes(src.real)
            mode = stat.S_IMODE(src.real.stat().st_mode)
            dst.real.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dst.real, data, mode)
            summary = {"files": 1, "bytes": len(data), "sha256": sha256_hex(data)}
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "replaced": dst.exists,
                **summary,
            }
        )

    def move(self, source: str, destination: str, overwrite: bool = False) -> str:
        """Move or rename a file, folder or symlink (a link moves as a link).

        An existing destination file is replaced only if overwrite=True.
        """
        src = self.sandbox.resolve_entry(source)
        if not src.exists:
            raise ToolError(f"not found: {source}")
        self.refuse_root(src, source, "move it")
        dst = self.destination(destination, overwrite, src)
        if src.real.is_dir() and not src.real.is_symlink() and is_within(dst.real, src.real):
            raise ToolError(f"cannot move {source!r} into itself")
        dst.real.parent.mkdir(parents=True, exist_ok=True)
        kind = entry_kind(src.real)
        try:
            os.rename(src.real, dst.real)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            shutil.move(src.real, dst.real)  # another filesystem: copy, then remove
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "type": kind,
                "replaced": dst.exists,
            }
        )

    def delete(self, path: str, recursive: bool = False) -> str:
        """Delete a file, a symlink (the link, not its target) or a folder.

        A folder that is not empty needs recursive=True. Roots cannot be deleted.
        """
        target = self.sandbox.resolve_entry(path)
        if not target.exists:
            raise ToolError(f"not found: {path}")
        self.refuse_root(target, path, "delete it")
        kind = entry_kind(target.real)
        relative = self.relative(target.real)
        if kind != "folder":
            size = target.real.lstat().st_size if kind == "file" else 0
            target.real.unlink()
            return to_json({"path": relative, "type": kind, "files": 1, "bytes": size})
        counts = count_tree(target.real)
        if counts["files"] + counts["folders"] and not recursive:
            entries = counts["files"] + counts["folders"]
            raise ToolError(
                f"folder {path!r} is not empty ({entries:,} entries inside); "
                "pass recursive=True to delete it with everything in it"
            )
        shutil.rmtree(target.real)  # fd-based on Linux: removes links, never follows them
        return to_json({"path": relative, "type": "folder", **counts})

    # -- helpers for the tools above ------------------------------------------------------

    def visible(self, folder: Path) -> list[Entry]:
        return [entry for entry in self.walker.scan(folder) if entry.kind != "outside-link"]

    def entry_line(self, entry: Entry) -> str:
        if entry.kind == "link" and entry.target is not None:
            return f"[LINK] {entry.name} -> {self.relative(entry.target)}"
        label = {"dir": "[DIR]", "file": "[FILE]"}.get(entry.kind, "[OTHER]")
        return f"{label} {entry.name}"

    def tree_name(self, entry: Entry) -> str:
        if entry.kind == "link" and entry.target is not None:
            return f"{entry.name} -> {self.relative(entry.target)}"
        return entry.name + ("/" if entry.is_dir else "")

    def size_of(self, entry: Entry) -> int:
        if entry.is_dir:
            return 0
        try:
            return os.stat(entry.target or entry.path).st_size
        except OSError:
            return 0

    def capped_listing(self, lines: list[str], empty: str) -> str:
        if not lines:
            return empty
        shown = lines[:MAX_LISTED]
        if len(lines) > MAX_LISTED:
            shown.append(more_marker(len(lines) - MAX_LISTED))
        return "\n".join(shown)

    def read_lines(self, resolved: Resolved, start: int, end: int | None, cap: int) -> str:
        """Lines start..end of a text file, at most `cap` bytes, with a marker when cut."""
        with os.fdopen(open_nofollow(resolved.real), "rb") as handle:
            if looks_binary(handle.read(BINARY_PROBE)):
                return self.binary_report(resolved)
            handle.seek(0)
            kept, used, number, cut_at, rest = [], 0, 0, 0, 0
            for line in handle:
                number += 1
                if number < start:
                    continue
                if end is not None and number > end:
                    break
                if cut_at:
                    rest += len(line)
                elif used + len(line) > cap:
                    cut_at, rest = number, len(line)
                else:
                    kept.append(line)
                    used += len(line)
        try:
            text = b"".join(kept).decode("utf-8")
        except UnicodeDecodeError:
            return self.binary_report(resolved)
        if start > number:
            return f"(the file has {number:,} lines; start_line={start} is past the end)"
        if cut_at == start:  # the first line alone is over the cap
            return f"(line {start:,} alone is {rest:,} bytes, over the {cap:,} byte answer limit)"
        if cut_at:
            text += f"\n… [cut: {rest:,} more bytes; read on with start_line={cut_at}]"
        return text

    def grep_targets(self, resolved: Resolved, glob: str | None) -> Iterator[tuple[str, str]]:
        """(path, path as shown) of each file to search."""
        if resolved.real.is_file():
            yield str(resolved.real), self.relative(resolved.real)
            return
        shown = self.shown_below(resolved.real)
        for entry, _ in self.walker.walk(resolved.real):
            if entry.kind != "file":
                continue  # links are not followed, as with grep -r
            if glob is None or matches_any(entry.name, entry.relative, [glob]):
                yield entry.path, shown(entry.relative)

    def current_bytes(self, target: Resolved, given: str) -> bytes | None:
        if not target.exists:
            return None
        if target.real.is_dir():
            raise ToolError(f"{given!r} is a folder, not a file")
        return read_bytes(target.real)

    def replace_content(
        self, target: Resolved, old: bytes | None, new: bytes, dry_run: bool
    ) -> str:
        relative = self.relative(target.real)
        result: dict[str, Any] = {
            "path": relative,
            "size": len(new),
            "old_sha256": sha256_hex(old) if old is not None else None,
            "new_sha256": sha256_hex(new),
        }
        if dry_run:
            result["dry_run"] = True
            result["diff"] = self.preview(old, new, relative)
            return to_json(result)
        mode = stat.S_IMODE(target.real.stat().st_mode) if old is not None else self.new_file_mode
        target.real.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target.real, new, mode)
        return to_json(result)

    def preview(self, old: bytes | None, new: bytes, relative: str) -> list[str]:
        old_text = "" if old is None else decode_text(old)
        new_text = decode_text(new)
        if old_text is None or new_text is None:
            return [f"(binary: {len(old or b''):,} bytes would become {len(new):,} bytes)"]
        lines = diff_lines(old_text, new_text, relative)
        return lines or ["(no change)"]

    def destination(self, given: str, overwrite: bool, source: Resolved) -> Resolved:
        """Resolve a copy/move destination and check it may be (re)placed."""
        dst = self.sandbox.resolve_entry(given)
        self.refuse_root(dst, given, "replace it")
        if dst.real == source.real:
            raise ToolError("source and destination are the same")
        if not dst.exists:
            return dst
        if not overwrite:
            raise ToolError(f"destination exists: {given}; pass overwrite=True to replace it")
        if dst.real.is_dir() and not dst.real.is_symlink():
            raise ToolError(f"destination {given!r} is a folder; delete it first to replace it")
        if source.real.is_dir() and not source.real.is_symlink():
            raise ToolError(f"cannot replace file {given!r} with a folder; delete it first")
        return dst


class GrepRun:
    """One grep: searches whole file buffers with one compiled regex, collects hit lines."""

    def __init__(self, pattern: str, ignore_case: bool, context: int, max_matches: int) -> None:
        # re's IGNORECASE on bytes is several times slower than lowering the buffer first;
        # both fold ASCII only, so a literal pattern can be lowered and searched as is.
        self.fold_case = ignore_case and is_literal(pattern)
        if self.fold_case:
            pattern = pattern.lower()
        self.regex = compile_pattern(pattern, ignore_case and not self.fold_case)
        self.context = context
        self.max_matches = max_matches
        self.lines: list[str] = []
        self.matches = 0
        self.files_with_matches = 0
        self.skipped_binary = 0
        self.skipped_large = 0
        self.output_bytes = 0
        self.full = False

    def search_file(self, path: str, shown_as: str) -> None:
        try:
            with open(open_nofollow(path), "rb") as handle:
                if os.fstat(handle.fileno()).st_size > GREP_MAX_FILE:
                    self.skipped_large += 1
                    return
                data = handle.read()
        except OSError:
            return
        if looks_binary(data):
            self.skipped_binary += 1
            return
        hits = self.hit_lines(data.lower() if self.fold_case else data)
        if hits:
            self.files_with_matches += 1
            self.print_hits(data, hits, shown_as)

    def hit_lines(self, data: bytes) -> list[tuple[int, int, int]]:
        """(line number, start, end) of each line with a match, up to the remaining budget."""
        hits: list[tuple[int, int, int]] = []
        budget = self.max_matches - self.matches
        line_number, counted_to, position = 1, 0, 0
        search = self.regex.search
        while len(hits) < budget:
            found = search(data, position)
            if found is None:
                break
            start = data.rfind(b"\n", 0, found.start()) + 1
            end = data.find(b"\n", found.start())
            end = len(data) if end == -1 else end
            line_number += data.count(b"\n", counted_to, start)
            counted_to = start
            hits.append((line_number, start, end))
            position = end + 1
            if position > len(data):
                break
        if len(hits) >= budget and self.regex.search(data, position) is not None:
            self.full = True
        return hits

    def print_hits(self, data: bytes, hits: list[tuple[int, int, int]], shown_as: str) -> None:
        self.matches += len(hits)
        if self.context == 0:
            for number, start, end in hits:
                self.emit(f"{shown_as}:{number}:{shown_line(data[start:end])}")
            return
        all_lines = data.split(b"\n")
        if data.endswith(b"\n"):
            all_lines.pop()
        hit_numbers = {number for number, _, _ in hits}
        last_printed = 0
        for number, _, _ in hits:
            first = max(number - self.context, last_printed + 1)
            last = min(number + self.context, len(all_lines))
            if last_printed and first > last_printed + 1:
                self.emit("--")
            for shown in range(first, last + 1):
                mark = ":" if shown in hit_numbers else "-"
                self.emit(f"{shown_as}{mark}{shown}{mark}{shown_line(all_lines[shown - 1])}")
            last_printed = max(last_printed, last)

    def emit(self, line: str) -> None:
        if self.output_bytes > READ_CAP:
            self.full = True
            return
        self.lines.append(line)
        self.output_bytes += len(line) + 1

    def report(self, pattern: str) -> str:
        notes = []
        if self.full:
            notes.append(
                f"(+more: stopped after {self.matches:,} matching lines; narrow path, glob or "
                "pattern, or raise max_matches)"
            )
        if self.skipped_binary:
            notes.append(f"({self.skipped_binary:,} binary files skipped)")
        if self.skipped_large:
            notes.append(f"({self.skipped_large:,} files over 64 MiB skipped)")
        if not self.lines:
            return "\n".join([f"No match for {pattern!r}", *notes])
        return "\n".join(self.lines + notes)


# -- functions the tools share ------------------------------------------------------------------


def compile_pattern(pattern: str, ignore_case: bool) -> re.Pattern[bytes]:
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        return re.compile(pattern.encode("utf-8"), flags)
    except re.error as error:
        raise ToolError(f"invalid_argument: bad regular expression {pattern!r}: {error}") from None


def is_literal(pattern: str) -> bool:
    return pattern.isascii() and not any(char in REGEX_SPECIALS for char in pattern)


def shown_line(raw: bytes) -> str:
    text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
    if len(text) > MAX_LINE_SHOWN:
        return text[:MAX_LINE_SHOWN] + f"… [+{len(text) - MAX_LINE_SHOWN:,} characters]"
    return text


def cap_text(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= READ_CAP:
        return text
    shown = data[:READ_CAP].decode("utf-8", errors="ignore")
    return shown + f"\n… [cut: {len(data) - READ_CAP:,} more bytes]"


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def entry_kind(path: Path) -> str:
    if path.is_symlink():
        return "symlink"
    return "folder" if path.is_dir() else "file"


def line_ending_of(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"


def with_line_ending(text: str, newline: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", newline)


def apply_edits(text: str, edits: list[Edit], path: str) -> str:
    """Apply the edits in order to `text`; raise on the first that does not match once."""
    newline = line_ending_of(text)
    patched = text
    for number, edit in enumerate(edits, start=1):
        old = with_line_ending(edit.old_text, newline)
        if not old:
            raise ToolError(f"edit {number}: old_text is empty")
        count = patched.count(old)
        if count == 0:
            raise ToolError(f"edit {number}: old_text not found in {path}; nothing was changed")
        if count > 1:
            raise ToolError(
                f"edit {number}: old_text occurs {count} times in {path}; add surrounding "
                "lines so it occurs once (nothing was changed)"
            )
        patched = patched.replace(old, with_line_ending(edit.new_text, newline), 1)
    if text.endswith("\n") and patched and not patched.endswith("\n"):
        patched += newline  # an edit that swallowed the final newline keeps it
    return patched


def count_tree(folder: Path) -> dict[str, int]:
    """Files (links included), folders and file bytes below `folder`, following no link."""
    files = folders = size = 0
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as items:
            for item in items:
                if item.is_dir(follow_symlinks=False):
                    folders += 1
                    pending.append(Path(item.path))
                    continue
                files += 1
                if item.is_file(follow_symlinks=False):
                    size += item.stat(follow_symlinks=False).st_size
    return {"files": files, "folders": folders, "bytes": size}


def copy_tree(source: Path, destination: Path, walker: Walker) -> dict[str, Any]:
    """Copy a folder's files and folders; links are skipped and returned, never followed."""
    os.makedirs(destination)
    shutil.copymode(source, destination)
    files = folders = size = 0
    skipped: list[str] = []
    for entry, _ in walker.walk(source):
        target = destination / entry.relative
        if entry.kind == "dir":
            os.mkdir(target)
            shutil.copymode(entry.path, target, follow_symlinks=False)
            folders += 1
        elif entry.kind == "file":
            size += copy_one_file(Path(entry.path), target)
            files += 1
        elif entry.kind == "link":
            skipped.append(entry.relative)
    return {"files": files, "folders": folders, "bytes": size, "skipped_links": skipped}


def copy_one_file(source: Path, destination: Path) -> int:
    mode = stat.S_IMODE(source.lstat().st_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    with (
        os.fdopen(open_nofollow(source), "rb") as reader,
        os.fdopen(open_nofollow(destination, flags, mode), "wb") as writer,
    ):
        shutil.copyfileobj(reader, writer, 1024 * 1024)
        return writer.tell()


# -- errors: one line each ----------------------------------------------------------------------


def one_line(error: BaseException) -> str:
    """The one line a client sees for an error raised while a tool ran."""
    if isinstance(error, (SandboxError, ToolError)):
        return str(error).replace("\n", " ")
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return f"invalid_argument: {where}: {first['msg']}{more}"
    if isinstance(error, FileNotFoundError):
        return f"not found: {error.filename}"
    if isinstance(error, FileExistsError):
        return f"already exists: {error.filename}"
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename}" if error.filename else str(error)
    if isinstance(error, (ValueError, TypeError, RecursionError)):
        return f"invalid_argument: {error}"
    return f"internal error ({type(error).__name__}): {error}"


class SandboxedServer(FastMCP):
    """FastMCP, with every tool error reduced to the one line the tool meant to say.

    FastMCP wraps errors as 'Error executing tool X: ...' and pydantic errors span many
    lines; a refusal must start with 'security_error:' so clients can recognise it.
    """

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            cause = error.__cause__ if error.__cause__ is not None else error
            if not isinstance(cause, (SandboxError, ToolError, ValidationError, OSError)):
                logger.warning("tool %s failed", name, exc_info=cause)
            message = one_line(cause)
            logger.info("tool %s: %s", name, message)
            raise ToolError(message) from None


# -- registration and start ---------------------------------------------------------------------

READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)


def write_annotations(destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        readOnlyHint=False,
        destructiveHint=destructive,
        idempotentHint=idempotent,
        openWorldHint=False,
    )


WRITE_ANNOTATIONS: dict[str, ToolAnnotations] = {
    "write_file": write_annotations(destructive=True, idempotent=False),
    "patch_file": write_annotations(destructive=True, idempotent=False),
    "make_dir": write_annotations(destructive=False, idempotent=True),
    "touch": write_annotations(destructive=False, idempotent=True),
    "copy": write_annotations(destructive=True, idempotent=False),
    "move": write_annotations(destructive=True, idempotent=False),
    "delete": write_annotations(destructive=True, idempotent=False),
}


def build_server(roots: tuple[Path, ...], *, read_only: bool = False) -> FastMCP:
    """The server with its tools registered; with read_only no write tool exists at all."""
    server = SandboxedServer("fsagent-filesystem", log_level="WARNING")
    tools = FileTools(Sandbox(roots))
    for name in sorted(READ_TOOL_NAMES):
        server.add_tool(
            getattr(tools, name), name=name, annotations=READ_ONLY, structured_output=False
        )
    if not read_only:
        for name in sorted(WRITE_TOOL_NAMES):
            annotations = WRITE_ANNOTATIONS[name]
            server.add_tool(
                getattr(tools, name), name=name, annotations=annotations, structured_output=False
            )
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_servers.filesystem",
        description="Sandboxed MCP filesystem server over stdio.",
    )
    parser.add_argument("--read-only", action="store_true", help="register no write tool")
    parser.add_argument("--verbose", action="store_true", help="log each call to stderr")
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="folders the tools may touch")
    return parser.parse_args(argv)


def configure_logging(verbose: bool) -> None:
    # stdout carries the protocol: logs go to stderr only.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.verbose)
    try:
        roots = resolve_roots(args.roots)
    except RootError as error:
        print(f"mcp_servers.filesystem: {error}", file=sys.stderr)
        return 2
    logger.info("serving %s%s", ", ".join(map(str, roots)), " (read-only)" * args.read_only)
    try:
        build_server(roots, read_only=args.read_only).run("stdio")
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
