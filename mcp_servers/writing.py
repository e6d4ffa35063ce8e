"""The write tools: atomic writes, patches, folders, copy, move and delete, and the diffs a
dry run returns. Writes keep permissions; delete and move act on a link, never its target."""

from __future__ import annotations

import difflib
import errno
import os
import shutil
import stat
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BaseModel

from mcp_servers.fileio import decode_text, open_nofollow, read_bytes, sha256_hex
from mcp_servers.sandbox import Resolved, Sandbox, is_within
from mcp_servers.tool_base import ToolBase, to_json
from mcp_servers.walking import Walker

MAX_WRITE_BYTES = 32 * 1024 * 1024
TEMP_PREFIX = ".fsagent-"


class Edit(BaseModel):
    """One replacement for patch_file: `old_text` must occur exactly once."""

    old_text: str
    new_text: str


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


class WriteTools(ToolBase):
    """The tools that write; each public method is registered under its own name."""

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__(sandbox)
        self.new_file_mode = 0o666 & ~current_umask()

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

    def refuse_root(self, resolved: Resolved, given: str, action: str) -> None:
        if self.sandbox.contains_a_root(resolved.real):
            raise self.sandbox.refuse(given, f"is an allowed root or holds one; cannot {action}")

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
