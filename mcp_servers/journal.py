"""The journal of intent: every entry the server puts under a temp name of its own is written
down, durably, before the rename (or creation) that puts it there, so a server killed at any
point leaves a record of what to put back; recovery at the next start finishes or undoes each
act, by what the journal says, and never deletes anything because of its name alone.

Where: one folder per root, `<base>/<st_dev>-<st_ino>/` of the root, below fsagent's data folder
(`$XDG_DATA_HOME/fsagent/journal`, or `$FSAGENT_JOURNAL_DIR`): outside the roots as a rule, and
protected from every write tool when a root holds it. Each server has its own file there,
`<pid>-<8 hex>.journal`, created under a dot-name, locked (flock LOCK_EX) and only then given
its name, and held locked for the server's life: a second server on the same root writes its
own file and recovers only the files it can lock, those whose owner is gone. The file is
opened before the kernel sandbox restricts the process, so Landlock never stands in the way.

What: one JSON line per record, appended and fdatasync'ed before the step it announces:

- `aside`: the person's entry `entry` (device, inode, type) moved from `name` to `temp`
  (a move's source, a deleted entry, a destination set aside where there is no atomic swap);
  `commit` once the act is decided (a checked delete): recovery then finishes it.
- `temp`: an entry of ours being made at `temp` for `name` (a file being written, a folder
  being copied, a link being moved across): new content nobody approved in full yet.
- `made`: a folder `name` about to be made on the way to an act (the key `temp` is a fresh
  temp name): removed again if it is still empty.
- `exchange`: `temp` (holding `entry`) swapped with the checked entry `old` under `name`.
- `end`: the temp name is gone again (put in place, put back, removed). When no record is
  open the file is truncated to nothing.

Each record names its folder by its path below the root and its device and inode, so
recovery reaches the same folder (or says it cannot).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_servers.dirfd import Made, remove_tree, temp_name
from mcp_servers.platform_calls import rename_no_replace
from mcp_servers.race_hook import step

JOURNAL_DIR_ENV = "FSAGENT_JOURNAL_DIR"
SUFFIX = ".journal"
RECOVERED = ".fsagent-recovered-"
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

logger = logging.getLogger("fsagent.filesystem")

Identity = list[int]  # device, inode, file type bits


def identity(found: os.stat_result) -> Identity:
    return [found.st_dev, found.st_ino, stat.S_IFMT(found.st_mode)]


def journal_base() -> Path:
    """Where the journals live: $FSAGENT_JOURNAL_DIR, else fsagent's data folder."""
    given = os.environ.get(JOURNAL_DIR_ENV)
    if given:
        return Path(given)
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(data) / "fsagent" / "journal"


def folder_of_root(base: Path, root_fd: int) -> Path:
    found = os.fstat(root_fd)
    return base / f"{found.st_dev}-{found.st_ino}"


def sync_folder(folder: Path) -> None:
    fd = os.open(folder, FOLDER_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_data(fd: int) -> None:
    # fdatasync is enough for appended lines (their size is data); macOS has only fsync.
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class Journal:
    """This server's journal of one root: its own file, locked for the server's life."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        own = f"{os.getpid()}-{secrets.token_hex(4)}"
        making = folder / f".{own}.new"
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        self.fd = os.open(making, flags, 0o600)
        # Locked before it has the name recovery looks for: no recovery can take it for a
        # dead server's file in between.
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.path = folder / f"{own}{SUFFIX}"
        os.rename(making, self.path)
        sync_folder(folder)
        self.lock = threading.Lock()
        self.open: dict[str, list[int]] = {}  # temp name -> ids of its open records
        self.last = 0

    def record(self, kind: str, place: Place, temp: str, name: str, **more: Any) -> None:
        """Write down, durably, what is about to be put at `temp` (the step follows)."""
        folder = os.fstat(place.fd)
        line = {
            "kind": kind,
            "folder": list(place.parts),
            "folder_id": [folder.st_dev, folder.st_ino],
            "temp": temp,
            "name": name,
            **more,
        }
        with self.lock:
            self.last += 1
            self.open.setdefault(temp, []).append(self.last)
            self.write({"id": self.last, **line}, durable=True)
        with _owners_lock:
            _owners[temp] = self
        step("recorded", kind)

    def commit(self, temp: str) -> None:
        """The act on `temp` is decided: recovery finishes it rather than undoing it."""
        with self.lock:
            for number in self.open.get(temp, []):
                self.write({"id": number, "commit": True}, durable=True)
        step("committed", "aside")

    def moved(self, temp: str, to: Place, name: str, entry: os.stat_result) -> None:
        """A move's copy `entry` is about to take `name` in `to` (another filesystem): once
        it is there, recovery removes the source set aside at `temp` instead of putting it
        back (the move went through)."""
        folder = os.fstat(to.fd)
        where = {
            "root": to.root,
            "folder": list(to.parts),
            "folder_id": [folder.st_dev, folder.st_ino],
            "name": name,
            "entry": identity(entry),
        }
        with self.lock:
            for number in self.open.get(temp, []):
                self.write({"id": number, "moved_to": where}, durable=True)
        step("recorded", "moved")

    def clear(self, temp: str) -> None:
        """`temp` is gone (put in place, back, or removed): its records are done."""
        step("cleared", "temp")
        with self.lock:
            for number in self.open.pop(temp, []):
                self.write({"id": number, "end": True}, durable=False)
            if not self.open:
                os.ftruncate(self.fd, 0)

    def write(self, line: dict[str, Any], durable: bool) -> None:
        os.write(self.fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        if durable:
            sync_data(self.fd)


@dataclass(frozen=True)
class Place:
    """A folder to record: its descriptor (held by the caller), its path below the root, and
    the root's journal (None: a read-only server, nothing is journalled)."""

    journal: Journal | None
    fd: int
    parts: tuple[str, ...] = ()
    root: str = ""  # the root's path, for a record that names another root's folder


# Which journal recorded each temp name still open (names are random: one owner each).
_owners: dict[str, Journal] = {}
_owners_lock = threading.Lock()


def record(place: Place | None, kind: str, temp: str, name: str, **more: Any) -> None:
    """Journal `temp` in `place`'s root before the step that puts something there."""
    if place is not None and place.journal is not None:
        place.journal.record(kind, place, temp, name, **more)


def commit(temp: str) -> None:
    journal = _owners.get(temp)
    if journal is not None:
        journal.commit(temp)


def moved(temp: str, to: Place | None, name: str, entry: os.stat_result) -> None:
    journal = _owners.get(temp)
    if journal is not None and to is not None:
        journal.moved(temp, to, name, entry)


def clear(temp: str) -> None:
    """`temp` is gone: its records, if any, are done."""
    with _owners_lock:
        journal = _owners.pop(temp, None)
    if journal is not None:
        journal.clear(temp)


class JournalledMade(Made):
    """The folders a call makes on its way, each journalled before it is made: a server
    stopped before the act removes them again at the next start (those still empty)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.keys: list[str] = []

    def before_make(self, parent: int, parts: tuple[str, ...], name: str) -> None:
        key = temp_name()  # a made folder has its own name: the record's key is a fresh one
        self.journal.record("made", Place(self.journal, parent, parts), key, name)
        self.keys.append(key)

    def close(self) -> None:
        super().close()
        for key in self.keys:
            clear(key)
        self.keys.clear()


# -- recovery at start ------------------------------------------------------------------------


@dataclass
class Recovery:
    """What one start's recovery did: the lines a person should see."""

    kept: list[str] = field(default_factory=list)  # one line per entry kept under another name
    put_back: list[str] = field(default_factory=list)  # entries back under their own name
    acts: int = 0  # records found open in dead servers' journals
    roots: dict[str, int] = field(default_factory=dict)  # each root's descriptor, by path


def recover_root(folder: Path, root: Path, root_fd: int, found: Recovery) -> None:
    """Finish or undo the open acts of every journal of this root whose owner is gone."""
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if path.name.endswith(SUFFIX):
            recover_file(path, root, root_fd, found)
        elif path.name.endswith(".new") and not alive(path.name):
            # A server stopped between making its file and naming it: empty, never used.
            # One that is alive may not have locked it yet, so it is left to it.
            with suppress(FileNotFoundError):
                path.unlink()


def alive(name: str) -> bool:
    """Whether the process named in `.<pid>-<hex>.new` exists (or cannot be told)."""
    try:
        pid = int(name[1:].split("-", 1)[0])
    except ValueError:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def recover_file(path: Path, root: Path, root_fd: int, found: Recovery) -> None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return  # recovered meanwhile by another server
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # its server is alive: never touched
        if not still_named(fd, path):
            return  # another server recovered and removed it while this one waited
        failed = 0
        for line in reversed(open_records(read_all(fd))):
            found.acts += 1
            try:
                put_right(line, root, root_fd, found)
            except OSError as error:  # said, and the journal kept: the next start tries again
                failed += 1
                shown = "/".join([*line["folder"], line["name"]])
                found.kept.append(
                    f"recovery: could not put right {root / shown} ({error.strerror}); what a "
                    f"stopped server set aside for it is still {line['temp']!r} in its folder"
                )
        if not failed:
            os.unlink(path)
            sync_folder(path.parent)
    finally:
        os.close(fd)


def still_named(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def open_records(data: bytes) -> list[dict[str, Any]]:
    """The records not ended, in the order written, each with `commit` if it was committed.
    A line cut short by the kill is no record (it was never made durable)."""
    records: dict[int, dict[str, Any]] = {}
    for raw in data.split(b"\n"):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("id"), int):
            continue
        number = line["id"]
        if line.get("end"):
            records.pop(number, None)
        elif line.get("commit"):
            if number in records:
                records[number]["commit"] = True
        elif "moved_to" in line:
            if number in records:
                records[number]["moved_to"] = line["moved_to"]
        elif "kind" in line:
            records[number] = line
    return [records[number] for number in sorted(records)]


def put_right(line: dict[str, Any], root: Path, root_fd: int, found: Recovery) -> None:
    """Finish or undo the act of one open record; an entry is put back under its name, or,
    where that name is taken, kept under a visible name that says what it is."""
    shown = "/".join(line["folder"]) or "."
    folder = reach(root_fd, line)
    if folder is None:
        found.kept.append(
            f"recovery: the folder {root / shown} of a journalled act is gone or was replaced; "
            f"look for {line['temp']!r} (was {line['name']!r}) where it went"
        )
        return
    try:
        if line["kind"] == "made":  # made on the way to an act: removed if still empty
            with suppress(OSError):
                os.rmdir(line["name"], dir_fd=folder)
            return
        at_temp = entry(folder, line["temp"])
        if at_temp is None:
            return  # done or undone before the kill
        now = identity(at_temp)
        if line["kind"] == "exchange":
            if now == line["old"]:  # swapped: the entry approved to go, go it does
                remove(folder, line["temp"], at_temp)
            elif now != line["entry"]:  # a third entry caught by the swap: kept in sight
                keep(folder, line["temp"], line["name"], root / shown, found)
        elif line["kind"] == "temp":
            expected = line.get("entry")
            if (
                expected is None and stat.S_IFMT(at_temp.st_mode) == line["type"]
            ) or now == expected:
                remove(folder, line["temp"], at_temp)  # ours, never put in place: unapproved
        elif line["kind"] == "aside":
            if now == line["entry"] and finished(line, folder, found):
                finish(folder, line, at_temp, root / shown, found)  # the act went through
            else:  # undone: back under its name (or what a check caught there, in sight)
                put_back(folder, line["temp"], line["name"], root / shown, found)
    finally:
        os.close(folder)


def finish(
    folder: int, line: dict[str, Any], at_temp: os.stat_result, where: Path, found: Recovery
) -> None:
    """Finish the act of an entry set aside: remove it (a checked delete, the source of a
    move whose copy is in place). A folder with an entry inside that cannot be removed (an
    immutable file) is not left hidden: what is left of it goes back under its name, and a
    line says so."""
    try:
        remove(folder, line["temp"], at_temp)
    except OSError as error:
        act = line.get("tool") or "act"
        found.kept.append(
            f"recovery: a stopped server's {act} of {where / line['name']} could not be "
            f"finished ({error.strerror}); what is left of it is put back"
        )
        put_back(folder, line["temp"], line["name"], where, found)


def finished(line: dict[str, Any], folder: int, found: Recovery) -> bool:
    """Whether the act of an entry set aside went through: committed (a checked delete, a
    move's copy in place), its copy under its new name in another filesystem, or the entry
    meant to replace it is under its name now."""
    if line.get("commit"):
        return True
    moved_to = line.get("moved_to")
    if moved_to is not None:
        root_fd = found.roots.get(moved_to["root"])
        there = None if root_fd is None else reach(root_fd, moved_to)
        if there is not None:
            try:
                copy = entry(there, moved_to["name"])
                return copy is not None and identity(copy) == moved_to["entry"]
            finally:
                os.close(there)
    under_name = entry(folder, line["name"])
    replaced_by = line.get("replaced_by")
    return (
        replaced_by is not None and under_name is not None and identity(under_name) == replaced_by
    )


def reach(root_fd: int, line: dict[str, Any]) -> int | None:
    """The recorded folder, reached from the root without following links, if it is still
    the same folder (device and inode)."""
    current = os.dup(root_fd)
    try:
        for name in line["folder"]:
            following = os.open(name, FOLDER_FLAGS, dir_fd=current)
            os.close(current)
            current = following
    except OSError:
        os.close(current)
        return None
    held = os.fstat(current)
    if [held.st_dev, held.st_ino] != line["folder_id"]:
        os.close(current)
        return None
    return current


def entry(folder: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove(folder: int, name: str, found: os.stat_result) -> None:
    if stat.S_ISDIR(found.st_mode):
        remove_tree(folder, name)
    else:
        os.unlink(name, dir_fd=folder)


def put_back(folder: int, temp: str, name: str, where: Path, found: Recovery) -> None:
    """`temp` back under `name`; where that is taken, under `NAME.fsagent-recovered-<time>`."""
    try:
        rename_no_replace(folder, temp, folder, name)
    except FileExistsError:
        keep(folder, temp, name, where, found)
        return
    found.put_back.append(str(where / name))


def keep(folder: int, temp: str, name: str, where: Path, found: Recovery) -> None:
    """`temp` under a visible name that says what it is, and a line saying so."""
    for kept in recovered_names(name):
        try:
            rename_no_replace(folder, temp, folder, kept)
        except FileExistsError:
            continue
        found.kept.append(
            f"recovery: {where / name} is taken, so the entry a stopped server had set aside "
            f"for it is kept as {where / kept}"
        )
        return
    raise OSError(errno.EEXIST, "no free name to keep a recovered entry", name)


def recovered_names(name: str) -> Iterator[str]:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    yield f"{name}{RECOVERED}{stamp}"
    for number in range(2, 1000):
        yield f"{name}{RECOVERED}{stamp}-{number}"


class JournalError(Exception):
    """The journal folder cannot be made or written: the server does not start to write."""


def open_journals(
    roots: tuple[Path, ...], root_fds: dict[Path, int]
) -> tuple[dict[Path, Journal], Recovery]:
    """Recover the journals of dead servers on each root, then open this server's own."""
    base = journal_base()
    found = Recovery(roots={str(root): root_fds[root] for root in roots})
    journals: dict[Path, Journal] = {}
    for root in roots:
        folder = folder_of_root(base, root_fds[root])
        try:
            recover_root(folder, root, root_fds[root], found)
            journals[root] = Journal(folder)
        except OSError as error:
            raise JournalError(
                f"cannot keep the journal of intent in {folder}: {error.strerror}; set "
                f"{JOURNAL_DIR_ENV} to a folder this user may write, or pass --read-only"
            ) from None
    for line in found.kept:
        logger.warning("%s", line)
    if found.put_back:
        logger.warning(
            "recovery: put back under their names what a stopped server had set aside: %s",
            ", ".join(found.put_back),
        )
    return journals, found
