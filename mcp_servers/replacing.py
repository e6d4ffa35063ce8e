"""A file written whole under its name: a temp file (with no name where the system can make
one, else named in the folder's staging folder, staging.py), given the owner, mode and
extended attributes of what it replaces, then put in place by capture.py, on exactly the
entry the tool checked; and what every write tool shares (the umask, new files' mode)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import TypeVar

from mcp_servers.capture import Held, New, checked_after, put_in_place
from mcp_servers.dirfd import Made, remove_quietly, temp_name
from mcp_servers.fileio import write_all
from mcp_servers.journal import Journal, JournalledMade, Place, clear, record
from mcp_servers.parent_checks import verify
from mcp_servers.permissions import take_over
from mcp_servers.plans import PlanTools
from mcp_servers.platform_calls import link_unnamed, open_unnamed
from mcp_servers.protected import Protected
from mcp_servers.race_hook import checked, pause, step
from mcp_servers.sandbox import Sandbox
from mcp_servers.staging import Staging, staging_for
from mcp_servers.xattrs import attributes_of, give_attributes

T = TypeVar("T")
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def current_umask() -> int:
    # os.umask can only be read by setting it; done once at start, before any thread runs.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class WriteBase(PlanTools):
    """What the write tools share: the process's umask, read once."""

    def __init__(self, sandbox: Sandbox, protected: Protected | None = None) -> None:
        super().__init__(sandbox, protected)
        self.umask = current_umask()
        self.new_file_mode = 0o666 & ~self.umask
        self.journals: dict[Path, Journal] = {}  # per root; set by the server (journal.py)

    def place_of(self, real_folder: Path, fd: int) -> Place | None:
        """Where the journal of `real_folder`'s root finds the folder held as `fd`."""
        root = self.sandbox.root_of(real_folder)
        journal = None if root is None else self.journals.get(root)
        if root is None or journal is None:
            return None
        return Place(journal, fd, real_folder.relative_to(root).parts, str(root))

    def made_for(self, real: Path) -> Made:
        """What notes the folders made on the way to `real` (journalled where its root is)."""
        root = self.sandbox.root_of(real)
        journal = None if root is None else self.journals.get(root)
        return Made() if journal is None else JournalledMade(journal)


def replace_entry(
    held: Held,
    fill: Callable[[int], T],
    finish: Callable[[int], None],
    placing: Callable[[New], None] | None = None,
    paused: bool = False,
) -> T:
    """Write a temp file in the held entry's folder with `fill`, give it its owner and mode
    with `finish`, then put it under the name in place of exactly the entry checked (or where
    nothing was): a link is replaced by a file, never followed, and nothing changes if the
    call stops, or the entry under the name is another one, before the rename.

    The call's pause (race_hook; `paused`: taken already) and the check that the folder is
    still the one checked, where it was (parent_checks.py), come before the temp file is
    made: a refusal there leaves no temp file anywhere. Where the file system can, the file
    is written without a name (O_TMPFILE) and named only after the folder is checked again
    (`link_in`): a folder moved out of the roots while it is written takes nothing along,
    even where the kernel sandbox would refuse to remove it out there. Where it cannot, the
    file is named from the start in the folder's staging folder (staging.py), which no move
    of the folder carries, and renamed across into the folder at the end."""
    if not paused:
        pause(held.tool, held.argument)
    verify(held.folder)
    with ExitStack() as stack:
        unnamed = open_unnamed_in(held.folder)
        if unnamed is None:  # named from the start: built where no move of the folder goes
            into = stack.enter_context(staging_for(held.folder, held.where, held.place))
            fd, temp = create_temp(into.fd, into.place, held.name)
        else:
            into, fd, temp = Staging(held.folder, held.where, held.place), unnamed, None
        try:
            result = fill(fd)
            os.fsync(fd)
            finish(fd)
            step("written", "temp")
            if temp is None:
                temp = link_in(fd, held)
            new = New(into.fd, temp, into.where, os.fstat(fd), into.place)
            if placing is not None:  # a move across filesystems journals where its copy goes
                placing(new)
            put_in_place(held, new, paused=True)
        except BaseException:
            # Where the kernel refuses the removal (the folder the temp file was named in
            # was moved out of the roots), the call's own error is the one said, and the
            # temp file's record stays open: the next start's recovery names it.
            if temp is not None:
                with suppress(OSError):
                    remove_quietly(into.fd, temp)
                    clear(temp)
            raise
        finally:
            os.close(fd)
    return result


def open_unnamed_in(folder: int) -> int | None:
    """A file with no name yet in the held `folder` (platform_calls.open_unnamed), which a
    kill leaves nowhere; None where it cannot be made here."""
    try:
        return open_unnamed(folder)
    except PermissionError:  # the kernel sandbox: the folder was moved out of the roots
        verify(folder)
        raise


def create_temp(folder: int, place: Place | None, name: str) -> tuple[int, str]:
    """A new private file in the held `folder` for an atomic replace of `name`: (descriptor,
    temp name), journalled before it exists, so recovery knows it is ours."""
    while True:
        temp = temp_name()
        record(place, "temp", temp, name, type=stat.S_IFREG)
        try:
            return os.open(temp, NEW_FILE_FLAGS, 0o600, dir_fd=folder), temp
        except FileExistsError:
            clear(temp)
        except PermissionError:
            clear(temp)
            verify(folder)  # moved out of the roots, where the kernel refused it: say that
            raise
        except BaseException:
            clear(temp)
            raise


def link_in(fd: int, held: Held) -> str:
    """Give the written, unnamed file `fd` a temp name in the held folder, journalled first,
    after the check that the folder is still the one checked, where it was. Moved out of the
    roots in the instant after that check, the kernel sandbox refuses the link (nothing is
    made out there); without one, the check right after the link sees it and removes the
    file where it landed."""
    temp = temp_name()
    record(held.place, "temp", temp, held.name, type=stat.S_IFREG)
    try:
        verify(held.folder)
        checked(held.tool, held.argument)
        link_unnamed(fd, held.folder, temp)
    except PermissionError:
        clear(temp)
        verify(held.folder)  # refused where the folder went: say that, not the errno
        raise
    except BaseException:
        clear(temp)
        raise

    def undo() -> str:
        try:
            os.unlink(temp, dir_fd=held.folder)
        except OSError as error:  # its record stays open: the next start names it
            return f", except that its temp file could not be removed there ({error.strerror})"
        clear(temp)
        return ""

    checked_after(held.folder, held.folder, undo)
    return temp


def writer_of(*parts: bytes) -> Callable[[int], None]:
    def fill(fd: int) -> None:
        offset = 0
        for part in parts:
            write_all(fd, part, offset)
            offset += len(part)

    return fill


def finisher(old: os.stat_result, folder: int, name: str) -> Callable[[int], None]:
    """Gives a replacement file the owner, group, mode and extended attributes (ACLs among
    them, set last: an ACL's mask is the group bits) of the file `name` in `folder`, which
    it replaces (or, for a move, is moved from). The attributes are read now, at the check:
    the act's pause comes later, and what is under the name then is no longer looked at."""
    attributes = attributes_of(folder, name)

    def finish(fd: int) -> None:
        take_over(fd, old)
        give_attributes(fd, attributes, name)

    return finish
