"""A folder act that stops half-way hides nothing (issue 40): a recursive delete that meets an
entry it cannot remove, a folder copy that cannot read a file. Real servers on real trees.

What could not be deleted is back under its own path (never left in a `.fsagent-*` folder),
the journal is empty, and the answer is one line that says what was deleted and what remains,
with counts and the first paths, so the person and the model see the truth.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer, RawServer
from race_pause import Pauses

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


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_move_to_another_filesystem_that_fills_it_puts_the_source_back_and_says_so(
    tmp_path: Path, small_disk: Path, own_xdg_folders: Path
) -> None:
    """2 MiB onto a 1 MiB filesystem: the copy stops at ENOSPC, its partial copy is removed,
    and the source is back whole under its name. A folder is refused before anything."""
    root = tmp_path / "root"
    root.mkdir()
    tree(root)
    data = os.urandom(2 * 1024 * 1024)
    (root / "big.bin").write_bytes(data)
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}
    with FilesystemServer([root, small_disk]) as server:
        args = {"source": "big.bin", "destination": str(small_disk / "big.bin")}
        expect = json.loads(server.ok("plan", tool="move", args=args))["paths"]
        result = server.call("move", **args, expect=expect)
        folder = server.call("move", source="d", destination=str(small_disk / "d"))
    assert result.is_error and "\n" not in result.text
    assert result.text == (
        f"move 'big.bin' to '{small_disk}/big.bin' stopped on its copy to the other "
        "filesystem: No space left on device; the partial copy was removed and 'big.bin' is "
        "where it was: nothing was moved"
    )
    assert folder.is_error and folder.text.startswith("cannot move 'd' to another filesystem")
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file()} == before
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
