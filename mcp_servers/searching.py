"""The search tools: search_files matches names by glob, grep matches file contents by
regular expression. Both walk with `Walker`, so no link is descended into."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.fileio import looks_binary, open_nofollow
from mcp_servers.sandbox import Resolved
from mcp_servers.tool_base import MAX_LISTED, READ_CAP, ToolBase, check_range, more_marker
from mcp_servers.walking import matches_any

MAX_LINE_SHOWN = 400  # characters of one grep line
GREP_MAX_FILE = 64 * 1024 * 1024  # larger files are skipped by grep, and said so
REGEX_SPECIALS = frozenset(".^$*+?{}[]\\|()")


class SearchTools(ToolBase):
    """The tools that search; each public method is registered under its own name."""

    # -- search tools ---------------------------------------------------------------------

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

    # -- helpers for the tools above ------------------------------------------------------

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
