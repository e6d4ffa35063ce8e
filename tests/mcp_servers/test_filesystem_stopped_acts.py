"""A folder act that stops half-way hides nothing (issue 40): a recursive delete that meets an
entry it cannot remove, a folder copy that cannot read a file. Real servers on real trees.

What could not be deleted is back under its own path (never left in a `.fsagent-*` folder),
the journal is empty, and the answer is one line that says what was deleted and what remains,
with counts and the first paths, so the person and the model see the truth.

A folder moved to another filesystem (a tmpfs the tests mount as a second root) arrives whole,
hard links inside it kept, or is refused in one line with nothing moved: a FIFO, an entry
under the server's own names, a subfolder that cannot be listed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_session import PORTABLE_ENV, FilesystemServer, RawServer
from race_pause import Pauses

from mcp_servers.kernel_sandbox import ABI_ENV, abi_cap, kernel_abi
from mcp_servers.race_hook import CHECKED_PAUSE_ENV, STEP_PAUSE_ENV

# The server as a person's process runs: root, but without the capabilities that let root
# write into a folder whose bits say no (tests/core/test_fail_closed.py does the same).
NO_DAC = "-dac_override,-dac_read_search"
AS_A_PERSON = ["setpriv", "--bounding-set", NO_DAC, "--inh-caps", NO_DAC]
SIX_FILES = ("a.txt", "b.txt", "c.txt", "sub/keep.txt", "sub/b.txt", "sub/z.txt")
STOPPED = re.compile(
    r"delete 'd' stopped: (\d+) of 6 files deleted; (\d+) remain under 'd' "
    r"\((.*?)(?: and \d+ more)?\): (.*)"
)


def tree(root: Path) -> None:
    for name in SIX_FILES:
        path = root / "d" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n")


def files_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder.parent)) for path in folder.rglob("*") if path.is_file()}


def hidden(root: Path) -> list[Path]:
    """Anything under one of the server's own names, anywhere below the root."""
    return [path for path in root.rglob(".fsagent-*")]


def journal_sizes(data: Path, root: Path) -> list[int]:
    found = root.stat()
    folder = data / "fsagent" / "journal" / f"{found.st_dev}-{found.st_ino}"
    return [path.stat().st_size for path in folder.iterdir()]


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """d/sub/keep.txt made immutable (chattr +i): no process may unlink it, root neither."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    keep = root / "d" / "sub" / "keep.txt"
    subprocess.run(["chattr", "+i", str(keep)], check=True)
    try:
        yield root
    finally:
        subprocess.run(["chattr", "-i", str(keep)], check=True)


def assert_stopped_truthfully(text: str, root: Path, why: str, data: Path) -> None:
    """The one line says what went and what remains, and the tree on disk agrees."""
    assert "\n" not in text
    said = STOPPED.fullmatch(text)
    assert said is not None, text
    deleted, remaining = int(said.group(1)), int(said.group(2))
    left = files_under(root / "d")
    assert remaining == len(left) and deleted == 6 - len(left), (text, left)
    named = said.group(3).split(", ")
    assert named[0] == "'d/sub/keep.txt'" and {name.strip("'") for name in named} <= left
    assert said.group(4) == why
    assert hidden(root) == []  # what remains is under its own path, nothing set aside
    assert journal_sizes(data, root) == [0]


@pytest.mark.parametrize("previewed", [False, True], ids=["plain", "with-expect"])
def test_a_delete_stopped_by_an_immutable_file_puts_what_remains_back_and_says_so(
    immutable: Path, previewed: bool, own_xdg_folders: Path
) -> None:
    root = immutable
    with FilesystemServer([root]) as server:
        args = {"path": "d", "recursive": True}
        if previewed:
            args["expect"] = json.loads(server.ok("plan", tool="delete", args=args))["paths"]
        result = server.call("delete", **args)
        assert result.is_error
        why = "Operation not permitted: 'd/sub/keep.txt'"
        assert_stopped_truthfully(result.text, root, why, own_xdg_folders / "data")
        # The listing the model reads next shows what is still there.
        assert "keep.txt" in server.ok("list_directory", path="d/sub")
    assert (root / "d" / "sub" / "keep.txt").read_text() == "sub/keep.txt\n"


def test_a_delete_stopped_by_a_read_only_folder_puts_what_remains_back_and_says_so(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """Without CAP_DAC_OVERRIDE, d/sub (r-x) keeps its files; what could go is gone."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    (root / "d" / "sub").chmod(0o555)
    try:
        with FilesystemServer([root], wrapper=AS_A_PERSON) as server:
            result = server.call("delete", path="d", recursive=True)
    finally:
        (root / "d" / "sub").chmod(0o755)
    assert result.is_error
    said = STOPPED.fullmatch(result.text)
    assert said is not None, result.text
    stopped_at = said.group(3).split(", ")[0]
    assert stopped_at.startswith("'d/sub/") and said.group(4) == f"Permission denied: {stopped_at}"
    left = files_under(root / "d")
    assert {f"d/{name}" for name in SIX_FILES if "sub/" in name} <= left  # where it stopped
    assert int(said.group(2)) == len(left) and int(said.group(1)) == 6 - len(left)
    assert hidden(root) == [] and journal_sizes(own_xdg_folders / "data", root) == [0]


def test_a_server_killed_before_it_puts_a_stopped_delete_back_has_it_put_back_at_the_next_start(
    immutable: Path, tmp_path: Path, own_xdg_folders: Path
) -> None:
    """Killed once the delete is committed (the journal says: finish it): the next start
    cannot finish it either (the immutable file), so it puts what is left back under its
    name, never leaves it hidden, and says so in `initialize` (fsagent's banner shows it)."""
    root = immutable
    pauses = Pauses(tmp_path / "steps")
    with RawServer([root], env={STEP_PAUSE_ENV: str(pauses.folder)}) as raw:
        raw.call("delete", path="d", recursive=True)
        while pauses.next_line() != "paused committed aside":
            pauses.go()
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    assert not (root / "d").exists() and len(hidden(root)) == 1  # set aside, as killed
    with RawServer([root]) as raw:
        said = raw.initialized["capabilities"]["experimental"]["fsagent/recovery"]
    assert said["put_back"] == [str(root / "d")], said
    (line,) = said["kept"]
    assert line == (
        f"recovery: a stopped server's delete of {root / 'd'} could not be finished "
        "(Operation not permitted); what is left of it is put back"
    )
    assert "sub/keep.txt" in {name.split("/", 1)[1] for name in files_under(root / "d")}
    assert hidden(root) == [] and journal_sizes(own_xdg_folders / "data", root) == [0]


def test_a_folder_copy_stopped_by_a_file_it_cannot_read_removes_its_partial_copy_and_says_so(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """Without CAP_DAC_OVERRIDE, d/sub/secret.txt (mode 000) cannot be read: the copy stops
    there, what it had built is removed, and the line says where, why and how far it got."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    secret = root / "d" / "sub" / "secret.txt"
    secret.write_text("no\n")
    secret.chmod(0o000)
    with FilesystemServer([root], wrapper=AS_A_PERSON) as server:
        result = server.call("copy", source="d", destination="e")
    assert result.is_error
    said = re.fullmatch(
        r"copy 'd' to 'e' stopped at 'd/sub/secret.txt': Permission denied; (\d+) files had "
        r"been copied, and the partial copy was removed: nothing was copied to 'e'",
        result.text,
    )
    assert said is not None, result.text
    assert int(said.group(1)) <= len(SIX_FILES)
    assert not (root / "e").exists() and hidden(root) == []
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


def test_a_partial_copy_that_cannot_be_removed_is_kept_in_sight_and_said(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """The copy is held after its last check, built whole and not yet in place; a file of the
    staged copy is made immutable and the destination's name taken, so putting it in place
    fails and its removal fails too: what is left of it is kept under a visible name the answer
    gives, never under the temp name."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    pauses = Pauses(tmp_path / "checked")
    try:
        with FilesystemServer([root], env={CHECKED_PAUSE_ENV: str(pauses.folder)}) as server:
            call = pauses.start(server, "copy", source="d", destination="e")
            pauses.reached("checked", "copy destination")  # built whole, not yet in place
            (staged,) = hidden(root)
            stuck = staged / "sub" / "keep.txt"
            subprocess.run(["chattr", "+i", str(stuck)], check=True)
            try:
                (root / "e").write_text("taken meanwhile\n")
                result = pauses.finish(call)
                (kept,) = [path for path in root.iterdir() if ".fsagent-partial-" in path.name]
            finally:
                for path in root.rglob("keep.txt"):
                    subprocess.run(["chattr", "-i", str(path)], check=True)
    finally:
        pauses.close()
    assert result.is_error
    assert result.text.endswith(
        f"; the partial copy could not be removed (Operation not permitted) and is kept as "
        f"'{kept.name}'"
    ), result.text
    assert kept.name.startswith("e.fsagent-partial-") and (kept / "sub" / "keep.txt").exists()
    assert (root / "e").read_text() == "taken meanwhile\n" and hidden(root) == []
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A second filesystem of 1 MiB (a tmpfs this test mounts, as root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)]
    subprocess.run(mount, check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def whole(folder: Path) -> dict[str, Any]:
    """Every entry below `folder` (bytes, link texts, folders; a FIFO as such, never opened)
    and each one's mode."""
    seen: dict[str, Any] = {}
    for path in folder.rglob("*"):
        found = path.lstat()
        if stat.S_ISFIFO(found.st_mode):
            value: Any = "FIFO"
        elif stat.S_ISLNK(found.st_mode):
            value = ("link", os.readlink(path))
        else:
            value = "folder" if stat.S_ISDIR(found.st_mode) else path.read_bytes()
        seen[str(path.relative_to(folder))] = (value, stat.S_IMODE(found.st_mode))
    return seen


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_move_to_another_filesystem_that_fills_it_puts_the_source_back_and_says_so(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """2 MiB onto a 1 MiB filesystem: the copy stops at ENOSPC, its partial copy is removed,
    and the source is back whole under its name; a folder holding 2 MiB the same way."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    data = os.urandom(2 * 1024 * 1024)
    (root / "big.bin").write_bytes(data)
    (root / "d" / "big.bin").write_bytes(data)
    before = whole(root)
    with FilesystemServer([root, small_disk]) as server:
        args = {"source": "big.bin", "destination": str(small_disk / "big.bin")}
        expect = json.loads(server.ok("plan", tool="move", args=args))["paths"]
        result = server.call("move", **args, expect=expect)
        args = {"source": "d", "destination": str(small_disk / "d")}
        expect = json.loads(server.ok("plan", tool="move", args=args))["paths"]
        folder = server.call("move", **args, expect=expect)
    assert result.is_error and "\n" not in result.text
    assert result.text == (
        f"move 'big.bin' to '{small_disk}/big.bin' stopped on its copy to the other "
        "filesystem: No space left on device; the partial copy was removed and 'big.bin' is "
        "where it was: nothing was moved"
    )
    assert folder.is_error and "\n" not in folder.text
    said = re.fullmatch(
        f"move 'd' to '{re.escape(str(small_disk))}/d' stopped on its copy to the other "
        r"filesystem at 'd/big.bin': No space left on device; (\d+) files had been copied, "
        "and the partial copy was removed; 'd' is where it was: nothing was moved",
        folder.text,
    )
    assert said is not None, folder.text
    assert whole(root) == before
    assert list(small_disk.iterdir()) == [] and hidden(root) == []
    data_folder = own_xdg_folders / "data"
    assert journal_sizes(data_folder, root) == journal_sizes(data_folder, small_disk) == [0]


@pytest.mark.parametrize(
    "step",
    ["recorded aside", "renamed aside", "committed aside", "cleared temp"],
)
def test_a_stopped_delete_killed_at_any_step_leaves_nothing_hidden_or_changed(
    immutable: Path, tmp_path: Path, own_xdg_folders: Path, step: str
) -> None:
    """Killed at each step its journal announces (the last: once what is left is back under
    its name, before its record is closed), then a new server on the root: every file is
    under its own path with its own content or gone, the immutable one is there, nothing is
    under a temp name, the journal is empty."""
    root = immutable
    before = {name: f"{name}\n" for name in SIX_FILES}
    pauses = Pauses(tmp_path / "steps")
    with RawServer([root], env={STEP_PAUSE_ENV: str(pauses.folder)}) as raw:
        raw.call("delete", path="d", recursive=True)
        while pauses.next_line() != f"paused {step}":
            pauses.go()
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    with FilesystemServer([root]) as server:
        server.ok("list_allowed_roots")
    now = {
        str(path.relative_to(root / "d")): path.read_text()
        for path in (root / "d").rglob("*")
        if path.is_file()
    }
    assert now.items() <= before.items() and "sub/keep.txt" in now, (step, now)
    assert hidden(root) == [] and journal_sizes(own_xdg_folders / "data", root) == [0]


# -- a folder moved to another filesystem (issue 40) ------------------------------------------


def folder_tree(root: Path) -> None:
    """d: the six files, a read-only file, an empty folder, a link inside and one to a file
    outside the folder (both kept as links, with their own text)."""
    tree(root)
    (root / "d" / "sub" / "b.txt").chmod(0o640)
    (root / "d" / "empty").mkdir(mode=0o750)
    (root / "d" / "empty").chmod(0o750)
    os.symlink("../a.txt", root / "d" / "sub" / "to-a")
    (root / "top.txt").write_text("top\n")
    os.symlink(str(root / "top.txt"), root / "d" / "to-top")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_folder_moved_to_another_filesystem_arrives_whole_and_leaves_nothing_behind(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    folder_tree(root)
    before = whole(root / "d")
    with FilesystemServer([root, small_disk]) as server:
        args = {"source": "d", "destination": str(small_disk / "d")}
        expect = json.loads(server.ok("plan", tool="move", args=args))["paths"]
        result = server.call("move", **args, expect=expect)
    assert not result.is_error, result.text
    assert json.loads(result.text)["type"] == "folder"
    assert whole(small_disk / "d") == before  # bytes, link texts, folders, modes
    assert not (root / "d").exists() and hidden(root) == [] and hidden(small_disk) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_folder_moved_to_another_filesystem_keeps_its_times(
    tmp_path: Path, small_disk: Path
) -> None:
    """As `mv` keeps it: each file's, link's and folder's modification time, the folder moved
    included (set a day apart from one another, in the past). Access times are carried as the
    move finds them, after its own reads (relatime updates them), so they are not compared."""
    root = tmp_path / "root"
    root.mkdir()
    folder_tree(root)
    day = 86_400 * 10**9
    paths = sorted((root / "d").rglob("*"), key=lambda path: -len(path.parts)) + [root / "d"]
    for number, path in enumerate(paths):  # the deepest first: a folder's own times last
        then = 1_600_000_000 * 10**9 + number * day
        os.utime(path, ns=(then + 7, then), follow_symlinks=False)
    before = {str(p.relative_to(root)): times(p) for p in paths}
    with FilesystemServer([root, small_disk]) as server:
        server.ok("move", source="d", destination=str(small_disk / "d"))
    moved = [small_disk / path.relative_to(root) for path in paths]
    assert {str(p.relative_to(small_disk)): times(p) for p in moved} == before


def times(path: Path) -> int:
    return path.lstat().st_mtime_ns


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_folder_holding_a_fifo_is_refused_before_anything_moves(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """A FIFO has no copy that is the same thing: a move must not drop it, so it refuses."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    os.mkfifo(root / "d" / "sub" / "pipe")
    os.mkfifo(root / "d" / "pipe2")
    before = whole(root)
    with FilesystemServer([root, small_disk]) as server:
        result = server.call("move", source="d", destination=str(small_disk / "d"))
    assert result.is_error
    assert re.fullmatch(
        r"cannot move 'd' to another filesystem: 'd/(sub/pipe|pipe2)' is a FIFO \(and 1 more "
        r"such entries\), which a copy cannot carry there; nothing was moved",
        result.text,
    ), result.text
    assert whole(root) == before and list(small_disk.iterdir()) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_folder_move_whose_removal_stops_puts_what_is_left_back_and_says_so(
    immutable: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """The copy is in place; the original's d/sub/keep.txt is immutable, so its removal
    stops there: what is left is back under 'd' (never hidden), and the line says what went
    and what remains, as a stopped delete says it."""
    root = immutable
    with FilesystemServer([root, small_disk]) as server:
        result = server.call("move", source="d", destination=str(small_disk / "d"))
    assert result.is_error and "\n" not in result.text
    said = re.fullmatch(
        f"move 'd' to '{re.escape(str(small_disk))}/d': the copy is in place, but removing "
        r"the original stopped: (\d+) of 6 files deleted; (\d+) remain under 'd' "
        r"\((.*?)(?: and \d+ more)?\): Operation not permitted: 'd/sub/keep.txt'",
        result.text,
    )
    assert said is not None, result.text
    left = files_under(root / "d")
    assert int(said.group(2)) == len(left) and int(said.group(1)) == 6 - len(left)
    assert said.group(3).split(", ")[0] == "'d/sub/keep.txt'" and "d/sub/keep.txt" in left
    assert {name.split("/", 1)[1] for name in files_under(small_disk / "d")} == set(SIX_FILES)
    assert hidden(root) == [] and hidden(small_disk) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_folder_changed_while_it_is_copied_across_is_not_moved(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """The preview's fingerprint is compared before the copy and again after it: a file
    added to the folder (set aside under its temp name) while it is copied refuses the move,
    the partial copy is removed, and the folder is back under its name with the new file."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    pauses = Pauses(tmp_path / "steps")
    try:
        with FilesystemServer([root, small_disk], env={STEP_PAUSE_ENV: str(pauses.folder)}) as s:
            args = {"source": "d", "destination": str(small_disk / "d")}
            expect = json.loads(s.ok("plan", tool="move", args=args))["paths"]
            call = pauses.start(s, "move", **args, expect=expect)
            pauses.reached("recorded", "temp")  # set aside and compared; the copy is next
            (aside,) = hidden(root)
            (aside / "sub" / "late.txt").write_text("added while it was copied\n")
            result = pauses.finish(call)
    finally:
        pauses.close()
    assert result.is_error and result.text.startswith(
        "precondition failed: 'd' changed since it was previewed"
    ), result.text
    assert (root / "d" / "sub" / "late.txt").exists() and len(files_under(root / "d")) == 7
    assert list(small_disk.iterdir()) == [] and hidden(root) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "landlock-off"])
def test_a_folder_whose_parent_leaves_the_root_while_it_is_copied_across_is_not_removed(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path, landlock: bool
) -> None:
    """docs/d is set aside and about to be copied when docs is moved out of the root: the
    copy is not put in place, so the move is not decided and the source is never removed
    out there; without Landlock it is put back under its name where docs went, with
    Landlock (which refuses that out there) the refusal names where it is. The other
    filesystem keeps nothing either way."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root / "docs")
    outside = tmp_path / "outside"
    outside.mkdir()
    before = whole(root / "docs" / "d")
    pauses = Pauses(tmp_path / "steps")
    env = {STEP_PAUSE_ENV: str(pauses.folder), **({} if landlock else {ABI_ENV: "0"})}
    try:
        with FilesystemServer([root, small_disk], env=env) as server:
            call = pauses.start(server, "move", source="docs/d", destination=str(small_disk / "d"))
            pauses.reached("recorded", "temp")  # set aside; the copy is next
            os.rename(root / "docs", outside / "docs")
            result = pauses.finish(call)
    finally:
        pauses.close()
    assert result.is_error and "\n" not in result.text
    assert list(small_disk.iterdir()) == []
    if landlock and kernel_abi()[0] > 0 and abi_cap() != 0:  # the kernel refuses to read it
        (aside,) = hidden(outside)
        assert "nothing was moved" in result.text and result.text.endswith(
            f"could not be put back (Permission denied): it is '{aside.name}' in that folder, "
            "wherever it went"
        ), result.text
        assert whole(aside) == before
        return
    waiting = "changed while waiting: 'docs' was moved or replaced after the check"
    assert result.text.startswith(f"{waiting}; nothing was changed"), result.text
    assert whole(outside / "docs" / "d") == before and hidden(outside) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


# -- the limits of a folder moved across or copied (issue 40) ---------------------------------
# Each made to hold as a user of `mv` or `cp -a` expects, or refused in one line: hard links
# inside a folder moved across arrive as hard links; an entry under the server's own names
# inside it refuses the move (a copy skips and lists it); a subfolder that cannot be listed
# refuses the move, nothing moved.

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
PATHS = {
    "plain": {},
    "portable": {PORTABLE_ENV: "1"},
    "landlock-off": {ABI_ENV: "0"},
    "landlock-1": {ABI_ENV: "1"},  # no link across folders there, as no rename
}
TEMP = ".fsagent-0123456789abcdef.tmp"
KEPT = ".fsagent-kept-0123456789abcdef"


def inode_groups(folder: Path) -> set[frozenset[str]]:
    """The names below `folder` that share one file, for each file with more than one."""
    groups: dict[int, set[str]] = {}
    for path in folder.rglob("*"):
        found = path.lstat()
        if stat.S_ISREG(found.st_mode):
            groups.setdefault(found.st_ino, set()).add(str(path.relative_to(folder)))
    return {frozenset(names) for names in groups.values() if len(names) > 1}


def move_across(server: FilesystemServer, source: str, to: Path) -> Any:
    """The move as the agent makes it: with its plan's `expect`."""
    args = {"source": source, "destination": str(to)}
    expect = json.loads(server.ok("plan", tool="move", args=args))["paths"]
    return server.call("move", **args, expect=expect)


def nothing_moved(root: Path, before: dict[str, Any], disk: Path, data: Path) -> None:
    assert whole(root) == before and list(disk.iterdir()) == []
    assert journal_sizes(data, root) == journal_sizes(data, disk) == [0]


@needs_root
@pytest.mark.parametrize("env", PATHS.values(), ids=PATHS.keys())
def test_hard_links_inside_a_folder_moved_across_arrive_as_one_file(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path, env: dict[str, str]
) -> None:
    """d/a.txt has two more names in the folder (one in a subfolder, one beside it), and
    d/shared.txt one outside it: the three arrive as one file (one inode, three links), the
    one whose other name stays behind as a file of its own, as `mv` does."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    (root / "d" / "a.txt").chmod(0o640)
    os.link(root / "d" / "a.txt", root / "d" / "sub" / "again.txt")
    os.link(root / "d" / "a.txt", root / "d" / "also.txt")
    (root / "d" / "shared.txt").write_text("shared\n")
    os.link(root / "d" / "shared.txt", root / "outer.txt")
    before = whole(root / "d")
    with FilesystemServer([root, small_disk], env=env) as server:
        result = move_across(server, "d", small_disk / "d")
    assert not result.is_error, result.text
    moved = small_disk / "d"
    assert whole(moved) == before  # bytes, modes, links' texts, folders
    one_file = {"a.txt", "sub/again.txt", "also.txt"}
    if env.get(ABI_ENV) == "1" and kernel_abi()[0] > 0:  # sub/again.txt: a copy of its own
        one_file.remove("sub/again.txt")
    assert inode_groups(moved) == {frozenset(one_file)}
    assert (moved / "a.txt").stat().st_nlink == len(one_file)
    assert (moved / "shared.txt").stat().st_nlink == 1
    assert (root / "outer.txt").read_text() == "shared\n"
    assert (root / "outer.txt").stat().st_nlink == 1  # its other name went with d
    assert not (root / "d").exists() and hidden(root) == [] and hidden(small_disk) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@needs_root
@pytest.mark.parametrize(
    ("name", "todo"),
    [
        (TEMP, "let that call finish (or start fsagent again on this folder), then try again"),
        (KEPT, "rename it outside fsagent, then try again"),
    ],
    ids=["temp", "kept"],
)
def test_a_folder_holding_a_reserved_name_is_not_moved_across(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path, name: str, todo: str
) -> None:
    """An entry under the server's own names (here one no live server owns) refuses the move
    before anything is copied: which entry, what it is, what to do; nothing moved."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    (root / "d" / "sub" / name).write_text("someone's work\n")
    before = whole(root)
    pauses = Pauses(tmp_path / "steps")
    try:
        with FilesystemServer([root, small_disk], env={STEP_PAUSE_ENV: str(pauses.folder)}) as s:
            args = {"source": "d", "destination": str(small_disk / "d")}
            expect = json.loads(s.ok("plan", tool="move", args=args))["paths"]
            call = pauses.start(s, "move", **args, expect=expect)
            pauses.reached("renamed", "aside")
            result = pauses.finish(call)
    finally:
        pauses.close()
    # Refused before the copy began: no temp tree was ever made on the other filesystem.
    assert "paused recorded temp" not in pauses.seen, pauses.seen
    assert result.is_error and "\n" not in result.text
    assert result.text.startswith(
        f"cannot move 'd' to another filesystem: 'd/sub/{name}' has a name this server keeps "
        "for its own entries (every name starting '.fsagent-': "
    ), result.text
    assert result.text.endswith(
        f"which the move must not carry away from its journal; nothing was moved: {todo}"
    ), result.text
    nothing_moved(root, before, small_disk, own_xdg_folders / "data")


@needs_root
def test_another_calls_work_in_progress_in_a_folder_refuses_its_move_across(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """A second server holds move(d/a.txt -> d/moved.txt) with d/a.txt set aside under its temp
    name in d; moving d across meanwhile would take that entry out of the first server's
    journal's sight: refused, nothing moved, and the first move then completes."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    pauses = Pauses(tmp_path / "steps")
    try:
        with FilesystemServer([root], env={STEP_PAUSE_ENV: str(pauses.folder)}) as first:
            call = pauses.start(first, "move", source="d/a.txt", destination="d/moved.txt")
            pauses.reached("renamed", "aside")
            (aside,) = hidden(root)
            before = whole(root)
            with FilesystemServer([root, small_disk]) as second:
                result = move_across(second, "d", small_disk / "d")
            assert whole(root) == before and list(small_disk.iterdir()) == []
            done = pauses.finish(call)
    finally:
        pauses.close()
    assert result.is_error and "\n" not in result.text
    assert result.text.startswith(
        f"cannot move 'd' to another filesystem: 'd/{aside.name}' has a name this server keeps"
    ), result.text
    assert "another call's work in progress" in result.text
    assert not done.is_error, done.text
    assert (root / "d" / "moved.txt").read_text() == "a.txt\n" and not (
        root / "d" / "a.txt"
    ).exists()
    assert hidden(root) == [] and set(journal_sizes(own_xdg_folders / "data", root)) == {0}


def test_a_folder_copy_skips_and_lists_the_servers_own_entries(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """A copy leaves the source where the journal knows it, so it goes on without them: each
    is skipped (a folder under such a name with what it holds), listed, and never made in the
    copy, where no tool could name it and no journal would know it."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    (root / "d" / KEPT).write_text("kept aside\n")
    (root / "d" / "sub" / TEMP).mkdir()
    (root / "d" / "sub" / TEMP / "inside.txt").write_text("in progress\n")
    (root / "d" / "sub").chmod(0o750)
    umask = os.umask(0o022)
    os.umask(umask)
    with FilesystemServer([root]) as server:
        done = json.loads(server.ok("copy", source="d", destination="e"))
    # Each folder of the copy gets its source's bits less the umask once it is full.
    assert stat.S_IMODE((root / "e" / "sub").stat().st_mode) == 0o750 & ~umask
    assert done["skipped_reserved"] == [f"d/{KEPT}", f"d/sub/{TEMP}"]
    assert (done["files"], done["folders"]) == (6, 1)
    copied = {str(path.relative_to(root / "e")) for path in (root / "e").rglob("*")}
    assert copied == {"a.txt", "b.txt", "c.txt", "sub", "sub/keep.txt", "sub/b.txt", "sub/z.txt"}
    assert (root / "d" / KEPT).exists() and (root / "d" / "sub" / TEMP / "inside.txt").exists()
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


@needs_root
def test_a_folder_with_a_subfolder_it_cannot_list_is_not_moved_across(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """Without CAP_DAC_OVERRIDE, d/sub/closed (mode 0311) cannot be listed: what it holds can
    be neither checked nor copied, so the move is refused in one line, nothing moved."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    closed = root / "d" / "sub" / "closed"
    closed.mkdir()
    (closed / "secret.txt").write_text("secret\n")
    closed.chmod(0o311)
    try:
        before = whole(root)
        with FilesystemServer([root, small_disk], wrapper=AS_A_PERSON) as server:
            result = server.call("move", source="d", destination=str(small_disk / "d"))
        after = whole(root)
    finally:
        closed.chmod(0o755)
    assert result.is_error and "\n" not in result.text
    assert result.text == (
        "cannot move 'd' to another filesystem: 'd/sub/closed' could not be listed (Permission "
        "denied), so what it holds can neither be checked nor copied; nothing was moved: make "
        "it readable for this server's user, then try again"
    )
    assert after == before and (closed / "secret.txt").read_text() == "secret\n"
    assert list(small_disk.iterdir()) == [] and hidden(root) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@needs_root
def test_a_reserved_name_made_in_a_folder_while_it_is_copied_across_stops_the_move(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """The scan found nothing; an entry under a kept name is made in the folder (set aside
    under its temp name) right before the copy: the copy meets it, and the move is refused
    with the same line, its partial copy removed and the folder back under its name."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    pauses = Pauses(tmp_path / "steps")
    try:
        with FilesystemServer([root, small_disk], env={STEP_PAUSE_ENV: str(pauses.folder)}) as s:
            call = pauses.start(s, "move", source="d", destination=str(small_disk / "d"))
            pauses.reached("recorded", "temp")  # set aside and scanned; the copy is next
            (aside,) = hidden(root)
            (aside / "sub" / KEPT).write_text("made while it was copied\n")
            result = pauses.finish(call)
    finally:
        pauses.close()
    assert result.is_error and "\n" not in result.text
    assert result.text.startswith(
        f"cannot move 'd' to another filesystem: 'd/sub/{KEPT}' has a name this server keeps"
    ), result.text
    assert result.text.endswith("nothing was moved: rename it outside fsagent, then try again")
    assert len(files_under(root / "d")) == 7 and hidden(root) == [root / "d" / "sub" / KEPT]
    assert list(small_disk.iterdir()) == []
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, small_disk) == [0]


@needs_root
def test_a_hard_link_is_never_made_through_a_folder_swapped_for_a_link(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """Landlock off, the server's own checks alone: d/sub/a.txt is copied, and right before
    d/z.txt (its other name) is linked to that copy, the copy's folder sub is swapped for a
    link to a folder outside the roots holding an a.txt. The link is never made through it:
    the move is refused, the outside file keeps its one name, nothing moved."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        (disk / "in").mkdir()
        evil = disk / "outside" / "evil"
        evil.mkdir(parents=True)
        (evil / "a.txt").write_text("outside\n")
        root = tmp_path / "root"
        (root / "d" / "sub").mkdir(parents=True)
        (root / "d" / "sub" / "a.txt").write_text("inside\n")
        os.link(root / "d" / "sub" / "a.txt", root / "d" / "z.txt")
        before = whole(root)
        pauses = Pauses(tmp_path / "steps")
        env = {STEP_PAUSE_ENV: str(pauses.folder), ABI_ENV: "0"}
        try:
            with FilesystemServer([root, disk / "in"], env=env) as server:
                call = pauses.start(server, "move", source="d", destination=str(disk / "in" / "d"))
                pauses.reached("linking", "z.txt")
                (building,) = hidden(disk / "in")
                os.rename(building / "sub", disk / "outside" / "sub_moved")
                os.symlink(evil, building / "sub")
                result = pauses.finish(call)
        finally:
            pauses.close()
        assert result.is_error and "\n" not in result.text
        assert "changed while this call ran" in result.text, result.text
        assert (evil / "a.txt").read_text() == "outside\n"
        assert (evil / "a.txt").stat().st_nlink == 1
        assert list((disk / "in").iterdir()) == [] and whole(root) == before
        data = own_xdg_folders / "data"
        assert journal_sizes(data, root) == journal_sizes(data, disk / "in") == [0]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
