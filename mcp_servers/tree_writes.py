"""The write tools that take a whole entry where it is: copy, move and delete.

Each resolves its path arguments once (plans.py `target`), checks the entries by descriptor
(what they are, whether they may be replaced, their state against the preview's `expect`),
and then acts through capture.py on exactly those entries: a move's source and a deleted
entry are set aside under a private name and compared with what was checked before anything
else happens, a destination is replaced in exchange for the entry checked there (or only
where still nothing is), and a copy's source is read through the descriptor it was checked
by, its sha256 worked out on the way and compared. A link is acted on as itself; a folder
copy never makes one.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import to_json
from mcp_servers.budget import unbounded
from mcp_servers.capture import (
    Held,
    New,
    beside,
    confirm,
    now_at,
    put_back,
    put_in_place,
    set_aside,
)
from mcp_servers.dirfd import (
    LIST_FLAGS,
    Nearest,
    Removal,
    count_tree,
    entry_stat,
    remove_quietly,
    remove_tree,
    temp_name,
)
from mcp_servers.errors import describe
from mcp_servers.fileio import copy_sparse, kind_of, not_regular, open_checked, open_regular
from mcp_servers.journal import clear, commit, moved, record
from mcp_servers.links import links_leaving
from mcp_servers.moving_across import (
    refusal,
    reserved_refusal,
    special_refusal,
    sync_folder,
    uncarried,
)
from mcp_servers.names import quoted, quoted_given, show
from mcp_servers.parent_checks import verify
from mcp_servers.permissions import check_writable
from mcp_servers.plans import MISSING, Wanted, entry_state, folder_state
from mcp_servers.platform_calls import rename_no_replace
from mcp_servers.race_hook import pause, step
from mcp_servers.replacing import WriteBase, finisher, replace_entry
from mcp_servers.reserved import RESERVED_PREFIX
from mcp_servers.sandbox import Resolved, is_within
from mcp_servers.staging import Staging, staging_for
from mcp_servers.stopped import delete_stopped_line, remains, stopped_line
from mcp_servers.tool_base import show_given
from mcp_servers.tree_copy import (
    PERMISSION_BITS,
    CannotCarry,
    Carrying,
    Copied,
    Copying,
    copy_tree,
)
from mcp_servers.walking import Unreadable

PARTIAL = ".fsagent-partial-"  # NAME.fsagent-partial-<time>: a copy that could not be removed


class TreeTools(WriteBase):
    """copy, move and delete; each public method is registered under its own name."""

    def copy(
        self, source: str, destination: str, overwrite: bool = False, expect: Any = None
    ) -> str:
        """Copy a file or a folder. An existing destination is replaced only if overwrite=True.

        A folder copy skips symlinks (and lists them); it never copies a link's target.
        """
        # Holes of sparse files are kept; the copy gets the source's permission bits, never
        # setuid or setgid; special files in a folder are skipped and listed too, and so are
        # the server's own entries (tree_copy.py).
        wanted = self.wanted("copy", expect)
        src = self.target("copy", "source", source, wanted.get("source"))
        if not src.exists:
            raise ToolError(f"not found: {show_given(source)}")
        dst = self.destination("copy", destination, overwrite, src, wanted.get("destination"))
        if src.real.is_dir():
            if is_within(dst.real, src.real):
                raise ToolError(f"cannot copy {quoted_given(source)} into itself")
            summary = self.copy_folder(src, dst, overwrite, wanted)
        else:
            summary = self.copy_file(src, dst, overwrite, wanted)
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "replaced": summary.pop("replaced"),
                **summary,
            }
        )

    def move(
        self, source: str, destination: str, overwrite: bool = False, expect: Any = None
    ) -> str:
        """Move or rename a file, folder or symlink (a link moves as a link).

        An existing destination file is replaced only if overwrite=True.
        """
        # A move that would leave a relative link pointing outside the roots is refused.
        wanted = self.wanted("move", expect)
        want = wanted.get("source")
        src = self.target("move", "source", source, want)
        if not src.exists:
            raise ToolError(f"not found: {show_given(source)}")
        self.refuse_root(src, source, "move it")
        dst = self.destination("move", destination, overwrite, src, wanted.get("destination"))
        is_link = src.real.is_symlink()
        if src.real.is_dir() and not is_link and is_within(dst.real, src.real):
            raise ToolError(f"cannot move {quoted_given(source)} into itself")
        self.refuse_links_leaving(src, dst, is_link)
        with self.places.parent(src.real) as (src_folder, src_name):
            found = self.entry_there(src_folder, src_name, src, source, want)
            if want is not None and not stat.S_ISDIR(found.st_mode):
                found = self.checked_state(src_folder, src_name, src, want)
            held = self.held("move", "source", src_folder, src_name, src, found, want)
            with self.places.nearest(dst.real) as (dst_nearest, dst_name):
                dst_folder = None if dst_nearest.missing else dst_nearest.fd
                replaced = self.replaced_entry(
                    dst, dst_folder, dst_name, overwrite, wanted.get("destination"), found
                )
                aside = set_aside(held)
                try:
                    if want is not None and stat.S_ISDIR(found.st_mode):
                        self.check_folder_state(src_folder, aside, src, want)
                    moving = New(src_folder, aside, held.where, found, held.place)
                    self.move_to(moving, src, dst, dst_nearest, dst_name, replaced, wanted, held)
                except Settled:  # what is left of the source is back under its name already
                    raise
                except BaseException as error:
                    raise_with_note(error, put_back(held, src_folder, aside, held.where))
        return to_json(
            {
                "source": self.relative(src.real),
                "destination": self.relative(dst.real),
                "type": kind_of(found.st_mode),
                "replaced": replaced is not None,
            }
        )

    def delete(self, path: str, recursive: bool = False, expect: Any = None) -> str:
        """Delete a file, a symlink (the link, not its target) or a folder.

        A folder that is not empty needs recursive=True. Roots cannot be deleted.
        """
        wanted = self.wanted("delete", expect)
        want = wanted.get("path")
        target = self.target("delete", "path", path, want)
        if not target.exists:
            self.check_state(want, target, MISSING)
            raise ToolError(f"not found: {show_given(path)}")
        self.refuse_root(target, path, "delete it")
        relative = self.relative(target.real)
        with self.places.parent(target.real) as (folder, name):
            found = self.entry_there(folder, name, target, path, want)
            if stat.S_ISDIR(found.st_mode):
                counts = self.delete_folder(folder, name, found, target, recursive, want)
                return to_json({"path": relative, "type": "folder", **counts})
            if want is not None:
                found = self.checked_state(folder, name, target, want)
            held = self.held("delete", "path", folder, name, target, found, want)
            aside = set_aside(held)
            os.unlink(aside, dir_fd=folder)
            clear(aside)
        size = found.st_size if stat.S_ISREG(found.st_mode) else 0
        return to_json(
            {"path": relative, "type": kind_of(found.st_mode), "files": 1, "bytes": size}
        )

    # -- helpers for the tools above ------------------------------------------------------

    def held(
        self,
        tool: str,
        argument: str,
        folder: int,
        name: str,
        target: Resolved,
        found: os.stat_result | None,
        want: Wanted,
    ) -> Held:
        where = self.raw_relative(target.real.parent)
        place = self.place_of(target.real.parent, folder)
        return Held(tool, argument, folder, name, where, found, want is not None, place)

    def entry_there(
        self, folder: int, name: str, target: Resolved, given: str, want: Wanted
    ) -> os.stat_result:
        """The entry a delete or move acts on, as it is now; refused when it is gone."""
        found = now_at(folder, name)
        if found is None:
            self.check_state(want, target, MISSING)
            raise ToolError(f"not found: {show_given(given)}")
        return found

    def checked_state(
        self, folder: int, name: str, target: Resolved, want: Wanted
    ) -> os.stat_result:
        """Compare the entry's state with the preview's; return the entry it was read from."""
        shown = self.raw_relative(target.real)
        state, found = entry_state(folder, name, shown)
        self.check_state(want, target, state)
        if found is None:
            raise ToolError(f"not found: {show(shown)}")
        return found

    def check_folder_state(
        self, folder: int, name: str, target: Resolved, want: Wanted
    ) -> dict[str, Any]:
        listed = os.open(name, LIST_FLAGS, dir_fd=folder)
        try:
            state = folder_state(listed)
        finally:
            os.close(listed)
        self.check_state(want, target, state)
        return state

    def delete_folder(
        self,
        folder: int,
        name: str,
        found: os.stat_result,
        target: Resolved,
        recursive: bool,
        want: Wanted,
    ) -> dict[str, int]:
        """The folder is set aside under a temp name first (journalled: a server killed
        meanwhile has it finished or put back at the next start), then emptied, to its end
        even past the budget: once set aside and checked, it is deleted. The entry set aside
        is the one checked; with a preview's `expect`, its fingerprint is compared there,
        where nothing reaches it by its name any more (a stop meanwhile puts it back). An
        entry inside that cannot be removed stops it: what is left goes back under its name,
        and the answer says what was deleted and what remains.
        """
        counts = {"files": 0, "folders": 0, "bytes": 0}
        if want is None or not recursive:  # with `expect`, counted where it is set aside
            counts = self.counts_of(folder, name)
        if not recursive and counts["files"] + counts["folders"]:
            raise self.not_empty(target, counts)
        held = self.held("delete", "path", folder, name, target, found, want)
        aside = set_aside(held)
        try:
            if want is not None:
                state = self.check_folder_state(folder, aside, target, want)
                counts = {key: state[key] for key in ("files", "folders", "bytes")}
            elif not recursive:  # still empty: an entry made since the count stays
                counts = self.counts_of(folder, aside)
            if not recursive and counts["files"] + counts["folders"]:
                raise self.not_empty(target, counts)
        except BaseException as error:
            raise_with_note(error, put_back(held, folder, aside, held.where))
        commit(aside)  # from here on a stopped server's delete is finished at the next start
        removal = Removal()
        try:
            with unbounded():
                remove_tree(folder, aside, removal)
        except OSError as error:
            raise self.delete_stopped(held, aside, target, removal, error) from None
        clear(aside)
        return counts

    def delete_stopped(
        self, held: Held, aside: str, target: Resolved, removal: Removal, error: OSError
    ) -> ToolError:
        """A recursive delete that met an entry it cannot remove: what is left goes back
        under the folder's name (never stays hidden under the temp one), and the answer
        says what went and what remains (stopped.py)."""
        note = put_back(held, held.folder, aside, held.where)
        shown = quoted(self.raw_relative(target.real))

        def below(parts: tuple[str, ...]) -> str:
            return quoted(self.raw_relative(target.real.joinpath(*parts)))

        why = f"{error.strerror or error}: {below(removal.stopped_at or ())}"
        if note:  # its name was taken meanwhile: the note says where what is left is kept
            return ToolError(
                f"delete {shown} stopped: {removal.files:,} files deleted{note}: {why}"
            )
        left = remains(held.folder, held.name, removal.stopped_at)
        return ToolError(delete_stopped_line(shown, removal.files, left, why, below))

    def counts_of(self, folder: int, name: str) -> dict[str, int]:
        listed = os.open(name, LIST_FLAGS, dir_fd=folder)
        try:
            return count_tree(listed)
        finally:
            os.close(listed)

    def not_empty(self, target: Resolved, counts: dict[str, int]) -> ToolError:
        entries = counts["files"] + counts["folders"]
        return ToolError(
            f"folder '{self.relative(target.real)}' is not empty ({entries:,} entries inside); "
            "pass recursive=True to delete it with everything in it"
        )

    def replaced_entry(
        self,
        dst: Resolved,
        folder: int | None,
        name: str,
        overwrite: bool,
        want: Wanted,
        source: os.stat_result,
    ) -> os.stat_result | None:
        """What a copy or move would replace, as it is now (None: nothing), checked: only a
        file we may write or a link is replaced, only with overwrite=True, never by a
        folder, and only as the preview showed it."""
        shown = self.raw_relative(dst.real)
        if folder is None:
            self.check_state(want, dst, MISSING)
            return None
        if want is not None:
            state, found = entry_state(folder, name, shown)
            self.check_state(want, dst, state)
        else:
            found = now_at(folder, name)
        if found is None:
            return None
        if not overwrite:
            raise ToolError(f"destination exists: {show(shown)}; pass overwrite=True to replace it")
        if stat.S_ISDIR(found.st_mode):
            raise ToolError(
                f"destination '{show(shown)}' is a folder; delete it first to replace it"
            )
        if stat.S_ISDIR(source.st_mode):
            raise ToolError(f"cannot replace file '{show(shown)}' with a folder; delete it first")
        if not stat.S_ISLNK(found.st_mode):
            if not stat.S_ISREG(found.st_mode):
                raise not_regular(shown, found.st_mode)
            check_writable(found, shown)
        return found

    @contextmanager
    def destination_folder(
        self, tool: str, dst: Resolved, nearest: Nearest, name: str
    ) -> Iterator[tuple[int, str]]:
        """The destination's folder: the one checked, or, where it was missing, made now
        below the nearest folder checked (and removed again if the act does not happen).
        The destination's pause comes first, then the check that the folder checked is
        still that folder, where it was (parent_checks.py): nothing is made before."""
        pause(tool, "destination")
        verify(nearest.fd)
        if not nearest.missing:
            yield nearest.fd, name
            return
        made = self.made_for(dst.real)
        with self.places.made_below(dst.real.parent, nearest, made) as folder:
            yield folder, name

    def move_to(
        self,
        moving: New,
        src: Resolved,
        dst: Resolved,
        dst_nearest: Nearest,
        dst_name: str,
        replaced: os.stat_result | None,
        wanted: dict[str, dict[str, Any]],
        source: Held,
    ) -> None:
        """Put the source set aside under the destination's name (in exchange for the entry
        checked there), or copy it there from another filesystem and remove it."""
        with self.destination_folder("move", dst, dst_nearest, dst_name) as (folder, name):
            target = self.held(
                "move", "destination", folder, name, dst, replaced, wanted.get("destination")
            )
            if os.fstat(folder).st_dev == os.fstat(moving.folder).st_dev:
                try:
                    put_in_place(target, moving, paused=True)
                    return
                except OSError as error:  # a bind mount: the same device, not one mount
                    if error.errno != errno.EXDEV:
                        raise
            self.move_across(moving, target, source, src, wanted.get("source"))

    def move_across(
        self, moving: New, target: Held, held: Held, src: Resolved, want: Wanted
    ) -> None:
        """A move to another filesystem: copy the entry set aside there, then remove it."""
        source = held.shown
        if stat.S_ISDIR(moving.found.st_mode):
            self.move_folder_across(moving, target, held, src, want)
            return
        if stat.S_ISLNK(moving.found.st_mode):
            text = os.readlink(moving.name, dir_fd=moving.folder)
            made = temp_name()
            record(target.place, "temp", made, target.name, type=stat.S_IFLNK)
            try:
                os.symlink(text, made, dir_fd=target.folder)
                found = entry_stat(target.folder, made)
                self.deciding(moving, target, found)
                placed = New(target.folder, made, target.where, found, target.place)
                put_in_place(target, placed, paused=True)
            except BaseException:
                remove_quietly(target.folder, made)
                clear(made)
                raise
        elif stat.S_ISREG(moving.found.st_mode):
            reader, found = open_checked(moving.folder, moving.name, target.shown)
            try:
                replace_entry(
                    target,
                    lambda fd: copy_sparse(reader, fd),
                    finisher(found, moving.folder, moving.name),
                    lambda new: self.deciding(moving, target, new.found),
                    paused=True,
                )
            except OSError as error:  # its temp file is removed; `move` puts the source back
                raise ToolError(
                    f"move {quoted(source)} to {quoted(target.shown)} stopped on its copy "
                    f"to the other filesystem: {error.strerror or describe(error)}; the "
                    f"partial copy was removed and {quoted(source)} is where it was: "
                    "nothing was moved"
                ) from None
            finally:
                os.close(reader)
        else:
            raise ToolError(
                f"cannot move {quoted(source)} to another filesystem: it is a "
                f"{kind_of(moving.found.st_mode)}, which a copy cannot carry there; nothing "
                "was moved"
            )
        commit(moving.name)  # the copy is in place: a stopped server's move is finished
        os.unlink(moving.name, dir_fd=moving.folder)
        clear(moving.name)

    def move_folder_across(
        self, moving: New, target: Held, held: Held, src: Resolved, want: Wanted
    ) -> None:
        """A folder to another filesystem, each step journalled: the source is set aside
        already (`move`); what the copy cannot carry refuses the move before anything is
        copied; the copy is built under a temp name there, in the destination's staging
        folder (staging.py; a `temp` record: a stopped server's is removed at the next
        start), compared again with the preview's fingerprint, noted on
        the source's record (`moved_to`: once it is under its name, the move went through) and
        put in place; then the source is removed (committed: a stopped server's removal is
        finished at the next start). A copy that fails is removed and `move` puts the source
        back; a removal that stops half-way puts what is left back under the source's name,
        and the answer says what went and what remains, the copy staying in place."""
        listed = os.open(moving.name, LIST_FLAGS, dir_fd=moving.folder)
        try:
            self.refuse_uncarried(listed, held)
            with staging_for(target.folder, target.where, target.place) as into:
                self.build_across(listed, moving, target, held, src, want, into)
        finally:
            os.close(listed)
        sync_folder(target.folder)
        commit(moving.name)  # the copy is in place: a stopped server's move is finished
        removal = Removal()
        try:
            with unbounded():
                remove_tree(moving.folder, moving.name, removal)
        except OSError as error:
            raise self.removal_stopped(held, moving.name, target, removal, error) from None
        clear(moving.name)

    def build_across(
        self,
        listed: int,
        moving: New,
        target: Held,
        held: Held,
        src: Resolved,
        want: Wanted,
        into: Staging,
    ) -> None:
        """The copy of the folder `listed` (set aside as `moving`), built in `into` (the
        destination's staging folder, where no move of its folder can carry it) and put
        under the destination's name; removed again if it does not get there."""
        building = temp_name()
        record(into.place, "temp", building, target.name, type=stat.S_IFDIR)
        progress = Copied()
        try:
            os.mkdir(building, 0o700, dir_fd=into.fd)
            copy_tree(listed, into.fd, building, Carrying(held.shown), progress)
            progress.at = ""
            step("built", "temp")
            if want is not None:  # and nothing below changed while it was copied
                self.check_state(want, src, folder_state(listed))
            sync_folder(into.fd)
            built = entry_stat(into.fd, building)
            self.deciding(moving, target, built)
            placed = New(into.fd, building, into.where, built, into.place)
            put_in_place(target, placed, paused=True)
        except BaseException as error:
            note = self.remove_partial(into.fd, building, target.name, into.where)
            if not isinstance(error, Exception):
                raise
            raise self.move_copy_stopped(error, held, target, progress, note) from None

    def deciding(self, moving: New, target: Held, copy: os.stat_result) -> None:
        """Right before a move's copy takes its name on the other filesystem (which decides
        the move: the source is removed after it): refuse unless the source's folder is still
        the one checked, where it was (a copy takes time; a folder moved out of the roots
        meanwhile must not have the source removed out there: `move` puts it back), then note
        where the copy goes on the source's journal record."""
        verify(moving.folder)
        moved(moving.name, target.place, target.name, copy)

    def refuse_uncarried(self, listed: int, held: Held) -> None:
        """Refuse, before anything is copied, a folder holding what a copy cannot carry
        (moving_across.py): a FIFO, socket or device, an entry under the server's own names,
        a folder that cannot be listed."""
        refused = refusal(held.shown, uncarried(listed))
        if refused is not None:
            raise refused

    def move_copy_stopped(
        self, error: Exception, held: Held, target: Held, progress: Copied, note: str
    ) -> Exception:
        """A folder move across filesystems whose copy failed: `move` puts the source back,
        and the line says where the copy stopped, why, and what became of the partial copy."""
        if isinstance(error, CannotCarry):  # made after the check before the copy
            if error.parts[-1].startswith(RESERVED_PREFIX):
                return reserved_refusal(held.shown, error.parts)
            return special_refusal(held.shown, error.parts, error.mode)
        if not isinstance(error, OSError):
            return ToolError(f"{describe(error)}{note}") if note else error
        shown, to = quoted(held.shown), quoted(target.shown)
        at = f" at {quoted(beside(held.shown, progress.at))}" if progress.at else ""
        outcome = note.removeprefix("; ") if note else "the partial copy was removed"
        return ToolError(
            f"move {shown} to {to} stopped on its copy to the other filesystem{at}: "
            f"{error.strerror or error}; {progress.files:,} files had been copied, and "
            f"{outcome}; {shown} is where it was: nothing was moved"
        )

    def removal_stopped(
        self, held: Held, aside: str, target: Held, removal: Removal, error: OSError
    ) -> Settled:
        """The copy is in place, and the original's removal met an entry it cannot remove:
        what is left goes back under the source's name, never stays hidden, and the line says
        what went and what remains (as a stopped recursive delete says it)."""
        note = put_back(held, held.folder, aside, held.where)
        shown = quoted(held.shown)

        def below(parts: tuple[str, ...]) -> str:
            return quoted(beside(held.shown, "/".join(parts)))

        lead = (
            f"move {shown} to {quoted(target.shown)}: the copy is in place, but removing the "
            "original stopped"
        )
        why = f"{error.strerror or error}: {below(removal.stopped_at or ())}"
        if note:  # its name was taken meanwhile: the note says where what is left is kept
            return Settled(f"{lead}: {removal.files:,} files removed{note}: {why}")
        left = remains(held.folder, held.name, removal.stopped_at)
        return Settled(stopped_line(lead, shown, removal.files, left, why, below))

    def copy_file(
        self, src: Resolved, dst: Resolved, overwrite: bool, wanted: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        want = wanted.get("source")
        with ExitStack() as stack:
            src_folder, src_name = stack.enter_context(self.places.parent(src.real))
            reader, found = open_regular(src_folder, src_name, self.raw_relative(src.real))
            stack.callback(os.close, reader)
            source = self.held("copy", "source", src_folder, src_name, src, found, want)
            nearest, name = stack.enter_context(self.places.nearest(dst.real))
            there = None if nearest.missing else nearest.fd
            replaced = self.replaced_entry(
                dst, there, name, overwrite, wanted.get("destination"), found
            )
            # A new file gets the source's bits less the umask; a replaced one keeps its
            # own mode, owner and extended attributes, as write_file does.
            finish = self.new_copy_finisher(found)
            if there is not None and replaced is not None and stat.S_ISREG(replaced.st_mode):
                finish = finisher(replaced, there, name)
            confirm(source)  # each argument's pause before anything is made (then again)
            folder, name = stack.enter_context(self.destination_folder("copy", dst, nearest, name))
            target = self.held(
                "copy", "destination", folder, name, dst, replaced, wanted.get("destination")
            )

            def fill(fd: int) -> tuple[int, str | None]:
                # The bytes copied are the bytes compared: hashed as they are copied, from
                # the descriptor the source was checked by.
                size, digest = copy_sparse(reader, fd, hashed=want is not None)
                state = {"exists": True, "type": "file", "size": size, "sha256": digest}
                self.check_state(want, src, state)
                confirm(source, paused=True)
                return size, digest

            size, digest = replace_entry(target, fill, finish, paused=True)
        return {"files": 1, "bytes": size, "sha256": digest, "replaced": replaced is not None}

    def new_copy_finisher(self, source: os.stat_result) -> Callable[[int], None]:
        mode = stat.S_IMODE(source.st_mode) & PERMISSION_BITS & ~self.umask
        return lambda fd: os.fchmod(fd, mode)

    def copy_folder(
        self, src: Resolved, dst: Resolved, overwrite: bool, wanted: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        """Copy a folder's files and folders; links and special files are skipped and
        listed, never followed or opened.

        The copy is built under a temp name (which no listing shows) in the destination's
        staging folder (staging.py: where no move of the destination's folder can carry it)
        and put under its name only when complete: a copy cut short, or missing a folder it
        could not read, is removed and the call fails, and a server killed meanwhile leaves
        no partial tree under the real name (the temp one is removed at the next start).
        With a preview's `expect`, the source's fingerprint is compared before and after
        the copy.
        """
        want = wanted.get("source")
        with ExitStack() as stack:
            src_folder, src_name = stack.enter_context(self.places.parent(src.real))
            listed = os.open(src_name, LIST_FLAGS, dir_fd=src_folder)
            stack.callback(os.close, listed)
            found = os.fstat(listed)
            if want is not None:
                self.check_state(want, src, folder_state(listed))
            source = self.held("copy", "source", src_folder, src_name, src, found, want)
            nearest, name = stack.enter_context(self.places.nearest(dst.real))
            there = None if nearest.missing else nearest.fd
            replaced = self.replaced_entry(
                dst, there, name, overwrite, wanted.get("destination"), found
            )
            confirm(source)  # each argument's pause before anything is made (then again)
            folder, name = stack.enter_context(self.destination_folder("copy", dst, nearest, name))
            target = self.held(
                "copy", "destination", folder, name, dst, replaced, wanted.get("destination")
            )
            # Built where no move of the destination's folder can carry it (staging.py).
            into = stack.enter_context(staging_for(folder, target.where, target.place))
            building = temp_name()
            record(into.place, "temp", building, name, type=stat.S_IFDIR)
            progress = Copied()
            try:
                os.mkdir(building, 0o700, dir_fd=into.fd)
                shown = self.raw_relative(src.real)
                policy = Copying(shown, self.umask, self.shown_below(src.real))
                copy_tree(listed, into.fd, building, policy, progress)
                progress.at = ""  # a later stop: the folder
                step("built", "temp")
                if policy.unreadable_folders.count:
                    raise self.incomplete_copy(src, policy.unreadable_folders)
                summary = policy.summary(progress.files)
                if want is not None:  # and nothing below changed while it was copied
                    self.check_state(want, src, folder_state(listed))
                confirm(source, paused=True)
                built = entry_stat(into.fd, building)
                placed = New(into.fd, building, into.where, built, into.place)
                put_in_place(target, placed, paused=True)
                return {**summary, "replaced": False}
            except BaseException as error:
                note = self.remove_partial(into.fd, building, name, into.where)
                if not isinstance(error, Exception):
                    raise
                raise self.copy_stopped(error, src, dst, progress, note) from None

    def remove_partial(self, folder: int, building: str, name: str, where: str) -> str:
        """Remove a folder copy that did not complete; '' once it is gone. One that cannot
        be removed whole is never left hidden under its temp name: it is kept under a
        visible name that says what it is, and the note says where."""
        try:
            with unbounded():
                remove_tree(folder, building)
        except FileNotFoundError:
            pass
        except OSError as error:
            for kept in partial_names(name):
                try:
                    rename_no_replace(folder, building, folder, kept)
                except FileExistsError:
                    continue
                except OSError:
                    break  # left under its temp name: the journal has it for the next start
                clear(building)
                shown = quoted(beside(where, kept))
                return (
                    f"; the partial copy could not be removed ({error.strerror}) and is kept "
                    f"as {shown}"
                )
            return f"; the partial copy could not be removed ({error.strerror})"
        clear(building)
        return ""

    def copy_stopped(
        self, error: Exception, src: Resolved, dst: Resolved, progress: Copied, note: str
    ) -> Exception:
        """A folder copy that failed on its way: which entry stopped it and why, how far it
        got, and that nothing was copied (or, `note`, what is left of it and where)."""
        if not isinstance(error, OSError):
            return ToolError(f"{describe(error)}{note}") if note else error
        shown, to = quoted(self.raw_relative(src.real)), quoted(self.raw_relative(dst.real))
        at = quoted(self.raw_relative(src.real / progress.at)) if progress.at else shown
        outcome = note.removeprefix("; ") if note else "the partial copy was removed"
        return ToolError(
            f"copy {shown} to {to} stopped at {at}: {error.strerror or error}; "
            f"{progress.files:,} files had been copied, and {outcome}: nothing was copied "
            f"to {to}"
        )

    def incomplete_copy(self, src: Resolved, unreadable: Unreadable) -> ToolError:
        first = quoted(unreadable.first) if unreadable.first else "?"
        return ToolError(
            f"copy refused: {unreadable.count:,} folder(s) below {self.relative(src.real)} "
            f"could not be read (first: {first}: {unreadable.error}); nothing was copied"
        )

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

    def destination(
        self, tool: str, given: str, overwrite: bool, source: Resolved, want: Wanted
    ) -> Resolved:
        """Resolve a copy/move destination and check, by name, that it may be (re)placed;
        `replaced_entry` checks the entry itself once it is reached by descriptor."""
        dst = self.target(tool, "destination", given, want)
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


class Settled(ToolError):
    """A move's refusal once what is left of its source is back under its name (the copy
    is in place): nothing more to put back."""


def partial_names(name: str) -> Iterator[str]:
    """Visible names for a partial copy of `name` that could not be removed."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    yield f"{name}{PARTIAL}{stamp}"
    for number in range(2, 1000):
        yield f"{name}{PARTIAL}{stamp}-{number}"


def raise_with_note(error: BaseException, note: str) -> None:
    """Raise `error` again, with `note` (capture.put_back's) added to its one line."""
    if note and isinstance(error, Exception):
        raise ToolError(f"{describe(error)}{note}") from None
    raise error
