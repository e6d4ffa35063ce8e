"""The search tools: search_files matches names by glob, grep matches file contents by
regular expression (RE2 syntax; see grepping.py). Both walk with `Walker`, so no link is
descended into, and files are opened by descriptor."""

from __future__ import annotations

import fnmatch
import os

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import CappedLines, more_marker
from mcp_servers.fileio import open_checked
from mcp_servers.grepping import GrepRun, unreadable_note
from mcp_servers.names import parse
from mcp_servers.request_limits import check_excludes, check_pattern
from mcp_servers.sandbox import Resolved, SandboxError
from mcp_servers.tool_base import MAX_LISTED, ToolBase, check_range, show_given
from mcp_servers.walking import Unreadable, matches_any


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
        check_pattern("pattern", pattern)
        check_excludes(exclude)
        folder = self.existing_folder(path)
        glob = parse(pattern)
        by_path = "/" in glob
        shown = self.shown_below(folder.real)
        found = CappedLines(max_lines=MAX_LISTED)
        excluded = [parse(item) for item in exclude] if exclude else None
        unreadable = Unreadable()
        for entry, _ in self.walker.walk(folder.real, excluded, unreadable=unreadable):
            if fnmatch.fnmatchcase(entry.relative if by_path else entry.name, glob):
                found.add(shown(entry.relative) + ("/" if entry.is_dir else ""))
        note = unreadable_note(unreadable.count) if unreadable.count else ""
        if not found.lines:
            return "\n".join(
                filter(None, [f"No match for {pattern!r} under {show_given(path)}", note])
            )
        return found.text(more_marker(found.hidden) if found.hidden else "", note)

    def grep(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        context: int = 0,
        max_matches: int = 200,
    ) -> str:
        """Search file contents for a regular expression (RE2: no backreferences or
        lookaround), like grep -rn.

        Prints 'path:line:text' for each matching line (and 'path-line-text' for context
        lines). `glob` limits the files searched by name (e.g. '*.py'). Binary files are
        skipped. Stops after `max_matches` matching lines.
        """
        check_range("context", context, 0, 20)
        check_range("max_matches", max_matches, 1, 10_000)
        check_pattern("pattern", pattern)
        check_pattern("glob", glob)
        search = GrepRun(pattern, ignore_case, context, max_matches)
        resolved = self.existing(path)
        if resolved.real.is_dir():
            self.grep_folder(search, resolved, parse(glob) if glob else None)
        else:
            with self.opened_file(path) as (fd, found, file):
                search.search_file(fd, found.st_size, self.relative(file.real))
        return search.report(pattern)

    # -- helpers for the tools above ------------------------------------------------------

    def grep_folder(self, search: GrepRun, folder: Resolved, glob: str | None) -> None:
        unreadable = Unreadable()
        try:
            self.grep_walk(search, folder, glob, unreadable)
        finally:
            search.unreadable += unreadable.count

    def grep_walk(
        self, search: GrepRun, folder: Resolved, glob: str | None, unreadable: Unreadable
    ) -> None:
        shown = self.shown_below(folder.real)
        for entry, _ in self.walker.walk(folder.real, unreadable=unreadable):
            if entry.kind != "file":
                continue  # links are not followed, as with grep -r; nor special files read
            if glob is not None and not matches_any(entry.name, entry.relative, [glob]):
                continue
            try:
                fd, found = open_checked(entry.folder_fd, entry.name, entry.path)
            except (OSError, SandboxError, ToolError):
                search.unreadable += 1  # gone, unreadable or swapped since it was listed
                continue
            try:
                search.search_file(fd, found.st_size, shown(entry.relative))
            finally:
                os.close(fd)
            if search.full:
                return
