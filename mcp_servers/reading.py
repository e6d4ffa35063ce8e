"""The read tools: roots, listings, trees, file reads under the answer cap, info, hashes and
diffs between files. Binary files are reported by size and sha256, never shown."""

from __future__ import annotations

import difflib
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.errors import one_line
from mcp_servers.fileio import (
    BINARY_PROBE,
    decode_text,
    looks_binary,
    open_nofollow,
    read_bytes,
    sha256_of_file,
)
from mcp_servers.sandbox import Resolved, SandboxError
from mcp_servers.tool_base import (
    MAX_LISTED,
    READ_CAP,
    ToolBase,
    check_range,
    more_marker,
    to_json,
)
from mcp_servers.walking import Entry

MAX_TREE_ENTRIES = 2000
DIFF_MAX_FILE = 8 * 1024 * 1024
MAX_FILES_PER_READ = 50


class ReadTools(ToolBase):
    """The tools that read; each public method is registered under its own name."""

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

    def binary_report(self, resolved: Resolved) -> str:
        size = resolved.real.stat().st_size
        digest = sha256_of_file(resolved.real)
        return (
            f"binary file: {self.relative(resolved.real)} ({size:,} bytes, sha256 {digest}); "
            "not shown"
        )


def cap_text(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= READ_CAP:
        return text
    shown = data[:READ_CAP].decode("utf-8", errors="ignore")
    return shown + f"\n… [cut: {len(data) - READ_CAP:,} more bytes]"


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")
