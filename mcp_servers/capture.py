"""Acting on exactly the entry a write tool checked.

A tool checks an entry (what it is, its content against the preview's `expect`, its
permissions) and then changes it; in between, another process may put something else under
the name: a symlink to the rules file, another file renamed over it, another folder. So the
check keeps what it saw (`Held`: the folder descriptor, the name, and the entry's device,
inode and type), and the act first captures what is under the name at that moment, in one
rename: the new content is swapped in (`exchange`), or the entry is moved to a private name
in the same folder (`rename_no_replace`). The change stands only when what was captured is
what was checked. Otherwise the captured entry goes back under its name, untouched (a rename
changes nothing in what it moves), and the call is refused in one line. Nothing is lost: an
entry that cannot go back, because its name was taken meanwhile, is kept under a name of its
own (`.fsagent-kept-<16 hex>`, which no sweep removes), and the refusal says where.

An inode number can be used again once its file is gone, but only by an entry made after
that: one that matches the check by number (and type) is then a new entry someone else made,
never one of the person's files brought in.

Renames never follow a link (a link is moved as itself), and every name here is looked up in
a folder descriptor reached without following any link (dirfd.py). platform_calls says which
calls make the capture atomic, and what remains without them.
"""

from __future__ import annotations

import os
import posixpath
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.budget import check_budget, unbounded
from mcp_servers.dirfd import entry_stat, temp_name
from mcp_servers.fileio import kind_of
from mcp_servers.journal import Place, clear, identity, record
from mcp_servers.names import quoted
from mcp_servers.parent_checks import ParentChanged, verify
from mcp_servers.platform_calls import RENAME_CALL_NAME, exchange, rename_no_replace
from mcp_servers.race_hook import checked, pause, step

KEPT_PREFIX = ".fsagent-kept-"
Identity = tuple[int, int, int]


def identity_of(found: os.stat_result) -> Identity:
    """Which entry this is: device, inode and type."""
    return found.st_dev, found.st_ino, stat.S_IFMT(found.st_mode)


def now_at(folder: int, name: str) -> os.stat_result | None:
    """The entry under `name` now (a link as itself), or None."""
    try:
        return entry_stat(folder, name)
    except FileNotFoundError:
        return None


def same(first: os.stat_result | None, second: os.stat_result | None) -> bool:
    if first is None or second is None:
        return first is second
    return identity_of(first) == identity_of(second)


@dataclass(frozen=True)
class Held:
    """An entry as a write tool checked it, to act on: `name` in the folder descriptor
    `folder` (the caller keeps it open), `found` what was there (None: nothing)."""

    tool: str
    argument: str
    folder: int
    name: str
    where: str  # the folder, raw, as errors name it ("." for the first root)
    found: os.stat_result | None
    previewed: bool  # the call carried a preview's `expect`
    place: Place | None = None  # where the journal finds `folder` (None: not journalled)

    @property
    def shown(self) -> str:
        return beside(self.where, self.name)

    def refused(self, now: os.stat_result | None, note: str = "") -> ToolError:
        """The one line of a call refused because `now` is under the name instead."""
        return changed_error(self.shown, self.previewed, change(self.found, now), note)


def changed_error(shown: str, previewed: bool, what: str, note: str = "") -> ToolError:
    """A call refused because the entry `shown` (raw) is not the one checked or previewed."""
    if previewed:
        lead = f"precondition failed: {quoted(shown)} changed since it was previewed"
    else:
        lead = f"refused: {quoted(shown)} changed while this call ran"
    return ToolError(f"{lead} ({what}); nothing was changed{note}")


def beside(where: str, name: str) -> str:
    return name if where == "." else posixpath.join(where, name)


def change(before: os.stat_result | None, now: os.stat_result | None) -> str:
    if now is None:
        return "it is gone"
    kind = kind_of(now.st_mode)
    if before is None:
        return f"{article(kind)} {kind} appeared there"
    if kind == kind_of(before.st_mode):
        return f"another {kind} is there now"
    return f"{article(kind)} {kind} is there now"


def article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def confirm(held: Held, paused: bool = False) -> None:
    """Refuse unless the entry under the held name is still the one checked, in the folder
    checked (for what is read through a descriptor and not moved: a copy's source, a touched
    file)."""
    if not paused:
        pause(held.tool, held.argument)
    verify(held.folder)
    now = now_at(held.folder, held.name)
    if not same(now, held.found):
        raise held.refused(now)


def set_aside(held: Held, paused: bool = False, replaced_by: os.stat_result | None = None) -> str:
    """Move the checked entry to a private name in its folder, and return that name; if
    what was under the name is not the entry checked, it is put back and the call refused.
    The journal has it first (`replaced_by`: the entry about to take the name, which tells
    recovery the act went through)."""
    if not paused:
        pause(held.tool, held.argument)
    verify(held.folder)
    checked(held.tool, held.argument)
    check_budget()  # the last point to stop with nothing changed
    aside = temp_name()
    assert held.found is not None
    more = {} if replaced_by is None else {"replaced_by": identity(replaced_by)}
    record(
        held.place, "aside", aside, held.name, entry=identity(held.found), **call_of(held), **more
    )
    try:
        rename_no_replace(held.folder, held.name, held.folder, aside)
    except FileNotFoundError:
        clear(aside)
        raise held.refused(None) from None
    except BaseException:  # a rename that failed moved nothing: the record is done
        clear(aside)
        raise
    checked_after(held.folder, held.folder, lambda: put_back(held, held.folder, aside, held.where))
    step("renamed", "aside")
    captured = now_at(held.folder, aside)
    if not same(captured, held.found):
        raise held.refused(captured, put_back(held, held.folder, aside, held.where))
    return aside


def put_back(held: Held, folder: int, name: str, where: str) -> str:
    """Return the entry at `name` in `folder` to the held name. '' when it is back; else a
    note for the refusal: where it is kept, since the name was taken meanwhile."""
    pause(held.tool, f"{held.argument} put-back")
    with unbounded():
        try:
            rename_no_replace(folder, name, held.folder, held.name)
            clear(name)
            return ""
        except FileNotFoundError:  # someone else moved it on meanwhile
            clear(name)
            return f", except that the entry set aside from {quoted(held.shown)} was taken away"
        except FileExistsError:
            kept = keep(folder, name)
        except OSError as error:
            # The folder holding it was moved where the kernel sandbox forbids acting (out of
            # the roots): it stays there, and so does its journal record, which the next
            # start names too. Its own name is the only way to find it.
            return (
                f", except that the entry set aside from {quoted(held.shown)} could not be put "
                f"back ({error.strerror}): it is {quoted(name)} in that folder, wherever it went"
            )
        return (
            f", except that {quoted(held.shown)} was taken meanwhile, so the entry found "
            f"there is kept as {quoted(beside(where, kept))}"
        )


def keep(folder: int, name: str) -> str:
    """Move the entry at `name` to a name of its own, which no listing hides and no sweep
    removes; return that name."""
    while True:
        kept = f"{KEPT_PREFIX}{secrets.token_hex(8)}"
        try:
            rename_no_replace(folder, name, folder, kept)
        except FileExistsError:
            continue
        clear(name)
        return kept


@dataclass(frozen=True)
class New:
    """The entry to put under a held name: `name` in `folder` (a temp file of ours, or a
    move's source set aside), `found` as it is."""

    folder: int
    name: str
    where: str
    found: os.stat_result
    place: Place | None = None


def call_of(held: Held) -> dict[str, str]:
    """The call a journal record is part of, for a person reading the journal."""
    return {"tool": held.tool, "argument": held.argument}


def put_in_place(held: Held, new: New, paused: bool = False) -> None:
    """Put `new` under the held name: where nothing was, only if nothing is there yet; where
    the checked entry was, in exchange for it (then removed: a file or a link). Anything
    else under the name is left there, and the call refused; `new` stays where it was. So
    is a folder of either moved or replaced since the check (parent_checks.py), checked
    before the rename and again right after it (then the rename is undone)."""
    if not paused:
        pause(held.tool, held.argument)
    verify(held.folder)
    verify(new.folder)
    checked(held.tool, held.argument)
    check_budget()
    if held.found is None:
        try:
            rename_no_replace(new.folder, new.name, held.folder, held.name)
        except FileExistsError:
            raise held.refused(now_at(held.folder, held.name)) from None
        except PermissionError:
            refused_out_there(held, new)
            raise
        checked_after(held.folder, new.folder, lambda: taken_back(held, new))
        clear(new.name)
        return
    if RENAME_CALL_NAME is not None:  # recovery must know which entry the swap may bring
        old = identity(held.found)
        record(new.place, "exchange", new.name, held.name, entry=identity(new.found), old=old)
    try:
        swapped = exchange(new.folder, new.name, held.folder, held.name)
    except FileNotFoundError:
        raise held.refused(now_at(held.folder, held.name)) from None
    except PermissionError:
        refused_out_there(held, new)
        raise
    if swapped:
        step("renamed", "exchange")
        captured = now_at(new.folder, new.name)
        if same(captured, held.found):
            checked_after(held.folder, new.folder, lambda: swap_back(held, new))
            os.unlink(new.name, dir_fd=new.folder)
            clear(new.name)
            return
        raise held.refused(captured, swap_back(held, new))
    # No atomic swap here: the checked entry is set aside first, then the new one put in.
    aside = set_aside(held, paused=True, replaced_by=new.found)
    try:
        rename_no_replace(new.folder, new.name, held.folder, held.name)
    except FileExistsError:
        taken = now_at(held.folder, held.name)
        raise held.refused(taken, put_back(held, held.folder, aside, held.where)) from None
    except BaseException:
        put_back(held, held.folder, aside, held.where)
        raise

    def undo() -> str:
        taken_back(held, new)
        return put_back(held, held.folder, aside, held.where)

    checked_after(held.folder, new.folder, undo)
    clear(new.name)
    os.unlink(aside, dir_fd=held.folder)
    clear(aside)


def refused_out_there(held: Held, new: New) -> None:
    """A rename the kernel sandbox refused: where a folder of it was moved out of the roots
    in the instant after the check (the new entry built in a staging folder, staging.py,
    and the held folder gone), say that, by the path the person knows, not the errno."""
    verify(held.folder)
    verify(new.folder)


def swap_back(held: Held, new: New) -> str:
    """After an exchange captured the wrong entry: exchange again, so it is back under its
    name and `new` where it was. A note (see put_back) when that cannot be done."""
    with unbounded():
        try:
            exchange(new.folder, new.name, held.folder, held.name)
        except FileNotFoundError:  # the name was emptied meanwhile: put it back alone
            return put_back(held, new.folder, new.name, new.where)
        if same(now_at(new.folder, new.name), new.found):
            return ""
        # Someone put a third entry under the name in between: it stays, kept aside.
        kept = keep(new.folder, new.name)
        return (
            f", except that another entry was put under {quoted(held.shown)} meanwhile; it "
            f"is kept as {quoted(beside(new.where, kept))}"
        )


def checked_after(folder: int, other: int, undo: Callable[[], str]) -> None:
    """Right after a rename: if a folder it ran in (`folder`, `other`) was moved or replaced
    since the check before it, the rename may have landed outside the place checked; it is
    undone (`undo`, whose note joins the refusal) and the call refused."""
    try:
        verify(folder, during=True)
        verify(other, during=True)
    except ParentChanged as error:
        with unbounded():
            note = undo()
        raise ParentChanged(f"{error}{note}") from None


def taken_back(held: Held, new: New) -> str:
    """Undo the rename of `new` under the held name: back to its own name."""
    rename_no_replace(held.folder, held.name, new.folder, new.name)
    return ""
