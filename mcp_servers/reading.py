"""The read tools: roots, listings, trees, file reads under the answer cap, info, hashes and
diffs between files. Binary files are reported by size and sha256, never shown.

Reads stream (lines.py), listings keep only what they show, and every answer is capped in
bytes (answers.py), so memory is bounded by the caps, not by the file or the folder.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import count
from typing import Any, Literal

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import (
    MARKER_ROOM,
    READ_CAP,
    CappedLines,
    cut_to_bytes,
    more_marker,
    plural,
    to_json,
    utf8_len,
)
from mcp_servers.diffing import DiffTooLarge, unified_diff
from mcp_servers.errors import one_line
from mcp_servers.fileio import (
    HASH_ON_THE_WAY_UP_TO,
    decode_text,
    kind_of,
    looks_binary,
    read_head,
    read_whole,
    sha256_hex,
    sha256_of_fd,
)
from mcp_servers.lines import Excerpt, excerpt
from mcp_servers.names import parse, show
from mcp_servers.request_limits import check_excludes
from mcp_servers.sandbox import SandboxError
from mcp_servers.tool_base import MAX_LISTED, ToolBase, check_range, show_given
from mcp_servers.walking import Entry

MAX_TREE_ENTRIES = 2000
MAX_FILES_PER_READ = 50


class ReadTools(ToolBase):
    """The tools that read; each public method is registered under its own name."""

    # -- read tools -----------------------------------------------------------------------

    def list_allowed_roots(self) -> str:
        """List the folders this server may touch. Relative paths start at the first one."""
        lines = [show(str(root)) for root in self.sandbox.roots]
        return "Allowed roots (relative paths start at the first):\n" + "\n".join(lines)

    def list_directory(self, path: str) -> str:
        """List a folder: one entry a line, marked [DIR], [FILE] or [LINK]."""
        folder = self.existing_folder(path)
        with self.listed_folder(folder) as fd:
            seen = count()
            visible = counted(self.visible(fd, str(folder.real)), seen)
            first = heapq.nsmallest(MAX_LISTED + 1, visible, key=lambda entry: entry.name)
            total = next(seen)
        lines = CappedLines(max_lines=MAX_LISTED)
        for entry in first:
            lines.add(self.entry_line(entry))
        if not lines.lines:
            return f"{show_given(path)} is empty"
        hidden = total - len(lines.lines)
        return lines.text(more_marker(hidden) if hidden else "")

    def list_directory_with_sizes(
        self, path: str, sort_by: Literal["name", "size"] = "name"
    ) -> str:
        """List a folder with file sizes in bytes, sorted by name or by size (largest first)."""
        folder = self.existing_folder(path)
        files = folders = total = 0
        tiebreak = count()  # equal keys never compare entries

        def sized(entries: Iterator[Entry]) -> Iterator[tuple[Any, int, Entry, int]]:
            nonlocal files, folders, total
            for entry in entries:
                size = self.size_of(entry)
                folders += entry.is_dir
                files += not entry.is_dir
                total += size
                key = -size if sort_by == "size" else entry.name
                yield key, next(tiebreak), entry, size

        with self.listed_folder(folder) as fd:
            first = heapq.nsmallest(MAX_LISTED + 1, sized(self.visible(fd, str(folder.real))))
        lines = CappedLines(max_lines=MAX_LISTED)
        for _, _, entry, size in first:
            shown_size = "" if entry.is_dir else f"  {plural(size, 'byte')}"
            lines.add(self.entry_line(entry) + shown_size)
        summary = (
            f"Total: {plural(files, 'file')}, {plural(folders, 'folder')}, "
            f"{plural(total, 'byte')}"
        )
        if not lines.lines:
            return f"{show_given(path)} is empty\n{summary}"
        hidden = files + folders - len(lines.lines)
        return lines.text(*([more_marker(hidden)] if hidden else []), summary)

    def directory_tree(
        self, path: str, max_depth: int = 3, exclude: list[str] | None = None
    ) -> str:
        """Show the folder tree below `path`, down to `max_depth` levels.

        `exclude` takes glob patterns matched on names and on paths relative to `path`.
        """
        check_range("max_depth", max_depth, 1, 20)
        folder = self.existing_folder(path)
        lines = CappedLines(max_lines=MAX_TREE_ENTRIES + 1)
        lines.add(self.relative(folder.real) + "/")
        check_excludes(exclude)
        excluded = [parse(item) for item in exclude] if exclude else None
        for entry, depth in self.walker.walk(folder.real, excluded, max_depth):
            lines.add("  " * (depth + 1) + self.tree_name(entry))
        return lines.text(more_marker(lines.hidden) if lines.hidden else "")

    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file, or lines start_line..end_line of it (1-based, inclusive).

        Answers are capped at 256 KiB; a marker at the end says how to read on. Binary files
        are reported with their size and sha256 instead of their content.
        """
        # A line longer than the cap is cut with a marker; only regular files are read.
        check_range("start_line", start_line, 1, 2**31)
        if end_line is not None and end_line < start_line:
            raise ToolError(f"invalid_argument: end_line ({end_line}) is before start_line")
        with self.opened_file(path) as (fd, found, resolved):
            shown = self.relative(resolved.real)
            return self.read_lines(fd, found, shown, start_line, end_line, READ_CAP)

    def read_multiple_files(self, paths: list[str]) -> str:
        """Read several text files at once (at most 50); 256 KiB in all.

        A file that cannot be read gets its error line in place of its content.
        """
        if not paths:
            raise ToolError("invalid_argument: paths is empty")
        if len(paths) > MAX_FILES_PER_READ:
            raise ToolError(f"invalid_argument: at most {MAX_FILES_PER_READ} paths at once")
        parts, errors, budget = [], [], READ_CAP - MARKER_ROOM
        for given in paths:
            header = f"=== {show_given(given)} ==="
            budget -= utf8_len(header) + 3  # the header, its newline and the blank line
            if budget <= MARKER_ROOM:
                parts.append(f"{header}\n(not read: answer limit reached; read it alone)")
                continue
            try:
                with self.opened_file(given) as (fd, found, resolved):
                    shown = self.relative(resolved.real)
                    text = self.read_lines(fd, found, shown, 1, None, budget)
            except (SandboxError, ToolError, OSError) as error:
                text = one_line(error)
                errors.append(text)
            budget -= utf8_len(text)
            parts.append(f"{header}\n{text}")
        if len(errors) == len(paths):
            raise ToolError("; ".join(errors))
        return cut_to_bytes("\n\n".join(parts), READ_CAP)

    def get_file_info(self, path: str) -> str:
        """Size, type, permissions and times of a file or folder, as JSON."""
        # `type` is the real one (file, folder, FIFO, socket, character or block device); a
        # symlink inside the roots is followed, and `is_symlink` says so.
        resolved = self.existing(path)
        info = self.stat_of(resolved)
        given_is_link = os.path.islink(self.sandbox.absolute(path))
        data: dict[str, Any] = {
            "path": self.relative(resolved.real),
            "type": kind_of(info.st_mode),
            "size": info.st_size,
            "mode": oct(stat.S_IMODE(info.st_mode)),
            "modified": iso_time(info.st_mtime),
            "accessed": iso_time(info.st_atime),
            "changed": iso_time(info.st_ctime),
            "is_symlink": given_is_link,
        }
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            data["hard_links"] = info.st_nlink
        if given_is_link:
            data["symlink_target"] = self.relative(resolved.real)
        return to_json(data)

    def file_hash(self, path: str) -> str:
        """The sha256 of a file, as JSON with its path and size."""
        with self.opened_file(path) as (fd, found, resolved):
            digest = sha256_of_fd(fd)
            shown = self.relative(resolved.real)
        return to_json({"path": shown, "sha256": digest, "size": found.st_size})

    def diff_files(self, path_a: str, path_b: str) -> str:
        """A unified diff between two text files."""
        texts, names, digests = [], [], []
        for given in (path_a, path_b):
            with self.opened_file(given) as (fd, _, resolved):
                names.append(self.relative(resolved.real))
                data = read_whole(fd, self.raw_relative(resolved.real), "diff_files")
            texts.append(decode_text(data))
            digests.append(sha256_hex(data))
            del data
        if texts[0] is None or texts[1] is None:
            if digests[0] == digests[1]:
                return "Binary files are identical"
            return f"Binary files {names[0]} and {names[1]} differ"
        if texts[0] == texts[1]:
            return "Files are identical"
        lines = CappedLines()
        try:
            for line in unified_diff(texts[0], texts[1], names[0], names[1]):
                if not lines.add(line):
                    break
        except DiffTooLarge as too_large:
            return f"Files {names[0]} and {names[1]} differ: {too_large.describe()}"
        return lines.text("… [cut: the diff goes on; diff smaller parts]" if lines.full else "")

    # -- helpers for the tools above ------------------------------------------------------

    def visible(self, fd: int, path: str) -> Iterator[Entry]:
        return (entry for entry in self.walker.stream(fd, path) if entry.kind != "outside-link")

    def entry_line(self, entry: Entry) -> str:
        if entry.kind == "link" and entry.target is not None:
            return f"[LINK] {show(entry.name)} -> {self.relative(entry.target)}"
        label = {"dir": "[DIR]", "file": "[FILE]"}.get(entry.kind, "[OTHER]")
        return f"{label} {show(entry.name)}"

    def tree_name(self, entry: Entry) -> str:
        if entry.kind == "link" and entry.target is not None:
            return f"{show(entry.name)} -> {self.relative(entry.target)}"
        return show(entry.name) + ("/" if entry.is_dir else "")

    def size_of(self, entry: Entry) -> int:
        if entry.is_dir:
            return 0
        try:
            if entry.target is not None:
                return os.stat(entry.target).st_size
            return os.stat(entry.name, dir_fd=entry.folder_fd, follow_symlinks=False).st_size
        except OSError:
            return 0

    def read_lines(
        self, fd: int, found: os.stat_result, shown: str, start: int, end: int | None, cap: int
    ) -> str:
        """Lines start..end of a text file in at most `cap` bytes, with a marker when cut."""
        if looks_binary(read_head(fd)):
            return self.binary_report(fd, found, shown)
        part = excerpt(fd, start, end, cap - MARKER_ROOM)
        if part.lines_in_file is not None:
            lines = part.lines_in_file
            return f"(the file has {lines:,} lines; start_line={start} is past the end)"
        text = decode_excerpt(part)
        if text is None:
            return self.binary_report(fd, found, shown)
        if part.long_line:
            rest = part.rest + len(part.data) - utf8_len(text)
            return text + (
                f"\n… [line {start:,} cut: {rest:,} more bytes of it not shown; "
                f"read on with start_line={start + 1}]"
            )
        if part.cut_at:
            text += f"\n… [cut: {part.rest:,} more bytes; read on with start_line={part.cut_at}]"
        return text

    def binary_report(self, fd: int, found: os.stat_result, shown: str) -> str:
        size = found.st_size
        too_big = size > HASH_ON_THE_WAY_UP_TO
        digest = "not computed: use file_hash" if too_big else sha256_of_fd(fd)
        return f"binary file: {shown} ({size:,} bytes, sha256 {digest}); not shown"


def decode_excerpt(part: Excerpt) -> str | None:
    """The excerpt as text, or None when it is not text (a NUL byte, or not UTF-8).

    The head of a cut line may end inside a character; that partial character is dropped.
    """
    if b"\x00" in part.data:
        return None
    try:
        return part.data.decode("utf-8")
    except UnicodeDecodeError as error:
        cut_inside_a_character = (
            part.long_line
            and error.reason == "unexpected end of data"
            and error.end == len(part.data)
        )
        if not cut_inside_a_character:
            return None
        return part.data[: error.start].decode("utf-8")


def counted(items: Iterator[Entry], seen: Iterator[int]) -> Iterator[Entry]:
    """`items`, advancing `seen` once per item, so its next value is the number seen."""
    for item in items:
        next(seen)
        yield item


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")
