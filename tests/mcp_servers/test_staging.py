"""No temp entry left anywhere (issue 40): what has no final name yet, a folder copy's tree (a
folder's copy, a folder moved to another filesystem) and, without O_TMPFILE, a file being
written, is built in the destination's staging folder (mcp_servers/staging.py: the root, or the
top of the mount the destination is on inside the root), which no move of the destination's
folder can carry, and renamed into the folder checked only at the end.

Through the real server on real temp trees: the destination's folder is moved out of the roots
while the tree or file is built (the step pause `built temp` / `written temp`, after the last
entry is made and before it is put in place), with Landlock and without: the call is refused in
one line that names the folder the person knows, the outside folder byte for byte as the person
left it (hidden names included), the root as it was, the journals empty. A second filesystem is
a tmpfs each test mounts (as root). Landlock ABI 1, which refuses every rename across folders,
builds in place as before, and still works.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_session import PORTABLE_ENV, FilesystemServer, RawServer, Result
from race_pause import Pauses
from tree_entries import entries

from mcp_servers.dirfd import TEMP_NAME
from mcp_servers.kernel_sandbox import ABI_ENV, abi_cap, kernel_abi
from mcp_servers.platform_calls import NO_TMPFILE_ENV, portable_forced
from mcp_servers.race_hook import CHECKED_PAUSE_ENV, STEP_PAUSE_ENV

LANDLOCK = kernel_abi()[0] > 0 and abi_cap() != 0
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
WITH_LANDLOCK = pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "landlock-off"])


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A second filesystem (a tmpfs this test mounts, as root), as test_filesystem_stopped_acts
    mounts its small disk."""
    folder = tmp_path / "disk"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def tree(folder: Path) -> None:
    """A folder `d` to copy or move: files, a hidden one, a folder inside."""
    (folder / "d" / "sub").mkdir(parents=True)
    (folder / "d" / "one.txt").write_text("one\n")
    (folder / "d" / ".hidden").write_text("hidden\n")
    (folder / "d" / "sub" / "two.txt").write_text("two\n")


def destination(folder: Path) -> None:
    """The destination's folder `docs/sub`, with what the person keeps there."""
    (folder / "docs" / "sub").mkdir(parents=True)
    (folder / "docs" / "sub" / "a.txt").write_text("sub a\n")
    (folder / "docs" / "note.txt").write_text("docs' note\n")


def ours(folder: Path) -> list[str]:
    """Our temp entries anywhere below `folder`."""
    return [key for key in entries(folder) if TEMP_NAME.fullmatch(Path(key).name)]


def journal_sizes(data: Path, root: Path) -> list[int]:
    found = root.stat()
    folder = data / "fsagent" / "journal" / f"{found.st_dev}-{found.st_ino}"
    return [path.stat().st_size for path in folder.iterdir()]


def env_of(variable: str, pauses: Pauses, landlock: bool, **more: str) -> dict[str, str]:
    return {variable: str(pauses.folder), **({} if landlock else {ABI_ENV: "0"}), **more}


def waiting(shown: str) -> str:
    return (
        f"changed while waiting: '{shown}' was moved or replaced after the check; nothing was "
        "changed; look at it and try again"
    )


def assert_one_line(result: Result, expected: str) -> None:
    assert result.is_error and "\n" not in result.text, result.text
    assert result.text == expected, result.text


def held_while_built(
    roots: list[Path], env: dict[str, str], pauses: Pauses, line: str, act: Any, call: Any
) -> tuple[Result, list[str]]:
    """`call` (tool, arguments) held at the step `line`, where `act` runs (the person's
    move); its answer, and our temp entries found under the roots while it was held."""
    with FilesystemServer(roots, env=env) as server:
        tool, arguments = call
        started = pauses.start(server, tool, **arguments)
        pauses.reached(*line.split(" ", 1))
        seen = [str(root / key) for root in roots for key in ours(root)]
        act()
        return pauses.finish(started), seen


# -- a folder copy's destination moved out while its tree is built ---------------------------


@WITH_LANDLOCK
@pytest.mark.parametrize("hold", ["built", "checked"])
def test_a_folder_copy_whose_destination_leaves_the_roots_while_it_is_built_leaves_nothing(
    tmp_path: Path, own_xdg_folders: Path, landlock: bool, hold: str
) -> None:
    """The tree is built at the top of the root, not in docs/sub: docs/sub moved out once the
    tree is built (`built temp`) or right after the last check before the rename (then the
    kernel refuses the rename out there, or, without Landlock, it lands there, is seen and
    taken back) takes nothing along."""
    landlock = landlock and LANDLOCK
    root, outside = tmp_path / "root", tmp_path / "outside"
    tree(root)
    destination(root)
    (outside / "kept").mkdir(parents=True)
    (outside / "kept" / ".theirs").write_text("theirs\n")
    before_root, before_outside = entries(root), entries(outside)
    pauses = Pauses(tmp_path / "steps")
    variable, line = {
        "built": (STEP_PAUSE_ENV, "built temp"),
        "checked": (CHECKED_PAUSE_ENV, "checked copy destination"),
    }[hold]
    try:
        result, seen = held_while_built(
            [root],
            env_of(variable, pauses, landlock),
            pauses,
            line,
            lambda: os.rename(root / "docs" / "sub", outside / "sub"),
            ("copy", {"source": "d", "destination": "docs/sub/e"}),
        )
    finally:
        pauses.close()
    assert len(seen) == 1 and Path(seen[0]).parent == root, seen  # at the top of the root
    acting = (
        "changed while acting: 'docs/sub' was moved or replaced during the act; what was done "
        "there was undone; look at it and try again"
    )
    undone = hold == "checked" and not landlock  # renamed out there, seen, and taken back
    assert_one_line(result, acting if undone else waiting("docs/sub"))
    moved = {f"sub/{key[len('docs/sub/') :]}": value for key, value in before_root.items()
             if key.startswith("docs/sub/")}  # fmt: skip
    assert entries(outside) == {**before_outside, "sub": "folder", **moved}
    left = {key: value for key, value in before_root.items() if not key.startswith("docs/sub")}
    assert entries(root) == left
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


# -- a file written under a name (no O_TMPFILE), its folder moved out -------------------------

# Without O_TMPFILE: the portable calls (no renameat2 either: a set-aside and a rename), or a
# file system without it on a system with renameat2 (the rename across is an exchange, or a
# rename that refuses to replace).
NAMED = {"portable": {PORTABLE_ENV: "1"}, "renameat2": {NO_TMPFILE_ENV: "1"}}


@WITH_LANDLOCK
@pytest.mark.parametrize("hold", ["written", "checked"])
@pytest.mark.parametrize("calls", list(NAMED))
@pytest.mark.parametrize("path", ["docs/sub/a.txt", "docs/sub/new.txt"], ids=["over", "new"])
def test_a_named_write_whose_folder_leaves_the_roots_while_it_is_written_leaves_nothing(
    tmp_path: Path, own_xdg_folders: Path, landlock: bool, path: str, calls: str, hold: str
) -> None:
    """Without O_TMPFILE (as on macOS, or a file system without it) the file is named from
    the start, at the top of the root: its folder moved out once it is written (`written
    temp`), or right after the last check before the rename that puts it in place (then the
    kernel refuses that rename out there, or, without Landlock, a rename to a new name lands
    there, is seen and taken back), takes nothing along."""
    landlock = landlock and LANDLOCK
    root, outside = tmp_path / "root", tmp_path / "outside"
    destination(root)
    outside.mkdir()
    pauses = Pauses(tmp_path / "steps")
    variable, line = {
        "written": (STEP_PAUSE_ENV, "written temp"),
        "checked": (CHECKED_PAUSE_ENV, "checked write_file path"),
    }[hold]
    try:
        result, seen = held_while_built(
            [root],
            env_of(variable, pauses, landlock, **NAMED[calls]),
            pauses,
            line,
            lambda: os.rename(root / "docs" / "sub", outside / "sub"),
            ("write_file", {"path": path, "content": "NEW\n"}),
        )
    finally:
        pauses.close()
    assert len(seen) == 1 and Path(seen[0]).parent == root, seen
    acting = (
        "changed while acting: 'docs/sub' was moved or replaced during the act; what was done "
        "there was undone; look at it and try again"
    )
    # Renamed (or swapped) out there, seen, and taken back; the portable path's set-aside of
    # the file written over comes first, refused by its own check.
    # (The suite's portable pass takes renameat2 away from both.)
    renamed = path.endswith("new.txt") or (calls == "renameat2" and not portable_forced())
    undone = hold == "checked" and not landlock and renamed
    assert_one_line(result, acting if undone else waiting("docs/sub"))
    assert entries(outside) == {"sub": "folder", "sub/a.txt": b"sub a\n"}
    assert entries(root) == {"docs": "folder", "docs/note.txt": b"docs' note\n"}
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


# -- a folder moved to another filesystem, its destination moved out --------------------------


@needs_root
@WITH_LANDLOCK
def test_a_folder_move_across_whose_destination_leaves_the_roots_while_it_is_built_leaves_nothing(
    tmp_path: Path, disk: Path, own_xdg_folders: Path, landlock: bool
) -> None:
    """`d` moved to another filesystem served as the root `disk/inner`: its copy is built at
    the top of that root, so `inner/docs/sub` moved to `disk/outside` (the same filesystem,
    outside the roots) once the copy is built takes nothing along; the move is refused and
    `d` is back under its name."""
    landlock = landlock and LANDLOCK
    root, inner, outside = tmp_path / "root", disk / "inner", disk / "outside"
    tree(root)
    destination(inner)
    outside.mkdir()
    (outside / ".theirs").write_text("theirs\n")
    before_root, before_inner = entries(root), entries(inner)
    pauses = Pauses(tmp_path / "steps")
    try:
        result, seen = held_while_built(
            [root, inner],
            env_of(STEP_PAUSE_ENV, pauses, landlock),
            pauses,
            "built temp",
            lambda: os.rename(inner / "docs" / "sub", outside / "sub"),
            ("move", {"source": "d", "destination": str(inner / "docs" / "sub" / "d")}),
        )
    finally:
        pauses.close()
    assert len(seen) == 2 and Path(seen[1]).parent == inner, seen  # the source set aside too
    assert_one_line(result, waiting(str(inner / "docs" / "sub")))
    assert entries(root) == before_root  # `d` back under its name, nothing hidden
    assert entries(outside) == {".theirs": b"theirs\n", "sub": "folder", "sub/a.txt": b"sub a\n"}
    assert entries(inner) == {key: value for key, value in before_inner.items() if "sub" not in key}
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, inner) == [0]


# -- where the staging folder is ---------------------------------------------------------------


@needs_root
@pytest.mark.parametrize("tool", ["copy", "move"])
def test_a_destination_on_a_filesystem_mounted_inside_the_root_is_built_at_its_mount_point(
    tmp_path: Path, own_xdg_folders: Path, tool: str
) -> None:
    """The root's own top is on another filesystem than `mnt/docs/sub`: the tree is built at
    `mnt`, the top of the mount, from which a rename reaches the destination; it arrives
    whole, and nothing of ours is left."""
    root = tmp_path / "root"
    tree(root)
    mount = root / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        destination(mount)
        before = entries(root / "d")
        pauses = Pauses(tmp_path / "steps")
        try:
            result, seen = held_while_built(
                [root],
                {STEP_PAUSE_ENV: str(pauses.folder)},
                pauses,
                "built temp",
                lambda: None,
                (tool, {"source": "d", "destination": "mnt/docs/sub/e"}),
            )
        finally:
            pauses.close()
        assert not result.is_error, result.text
        assert [path for path in seen if Path(path).parent == mount] == seen[-1:], seen
        assert entries(mount / "docs" / "sub" / "e") == before
        assert ours(root) == [] and (root / "d").exists() == (tool == "copy")
        assert journal_sizes(own_xdg_folders / "data", root) == [0]
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.skipif(not LANDLOCK, reason="Landlock ABI 1 needs a kernel with Landlock")
@pytest.mark.parametrize("tool", ["copy", "write_file"])
def test_under_landlock_abi_1_what_is_built_is_built_in_place_and_still_arrives(
    tmp_path: Path, own_xdg_folders: Path, tool: str
) -> None:
    """ABI 1 has no REFER right: the kernel refuses every rename across folders (EXDEV), so a
    tree (and a file written under a name: the portable path) is built in the destination's
    folder itself, as before, and arrives."""
    root = tmp_path / "root"
    tree(root)
    destination(root)
    pauses = Pauses(tmp_path / "steps")
    args: dict[str, Any] = {"source": "d", "destination": "docs/sub/e"}
    line = "built temp"
    if tool == "write_file":
        args, line = {"path": "docs/sub/a.txt", "content": "NEW\n"}, "written temp"
    env = {STEP_PAUSE_ENV: str(pauses.folder), ABI_ENV: "1", PORTABLE_ENV: "1"}
    try:
        result, seen = held_while_built([root], env, pauses, line, lambda: None, (tool, args))
    finally:
        pauses.close()
    assert not result.is_error, result.text
    assert len(seen) == 1 and Path(seen[0]).parent == root / "docs" / "sub", seen
    if tool == "copy":
        assert entries(root / "docs" / "sub" / "e") == entries(root / "d")
    else:
        assert (root / "docs" / "sub" / "a.txt").read_text() == "NEW\n"
    assert ours(root) == []
    assert journal_sizes(own_xdg_folders / "data", root) == [0]


@needs_root
def test_a_destination_on_a_bind_mount_of_the_roots_own_filesystem_is_built_in_place(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """`bound` is a bind mount of a folder of the root's own filesystem: the same device, but
    another mount, and a rename between mounts fails (EXDEV). Its staging folder by device
    alone would be the root's top; the mount ids differ, so the tree is built in the
    destination's folder, and arrives."""
    root = tmp_path / "root"
    tree(root)
    elsewhere, bound = tmp_path / "elsewhere", root / "bound"
    destination(elsewhere)
    bound.mkdir()
    subprocess.run(["mount", "--bind", str(elsewhere), str(bound)], check=True)
    try:
        pauses = Pauses(tmp_path / "steps")
        try:
            result, seen = held_while_built(
                [root],
                {STEP_PAUSE_ENV: str(pauses.folder)},
                pauses,
                "built temp",
                lambda: None,
                ("copy", {"source": "d", "destination": "bound/docs/sub/e"}),
            )
        finally:
            pauses.close()
        assert not result.is_error, result.text
        assert len(seen) == 1 and Path(seen[0]).parent == bound / "docs" / "sub", seen
        assert entries(bound / "docs" / "sub" / "e") == entries(root / "d")
        assert ours(root) == []
        assert journal_sizes(own_xdg_folders / "data", root) == [0]
    finally:
        subprocess.run(["umount", "-l", str(bound)], check=True)


# -- a server killed once a tree is built in its staging folder --------------------------------


@needs_root
@pytest.mark.parametrize("moved", [False, True], ids=["stays", "moved-out-before-restart"])
@pytest.mark.parametrize("tool", ["copy", "move"])
def test_a_server_killed_once_a_tree_is_built_in_staging_has_it_removed_at_the_next_start(
    tmp_path: Path, disk: Path, own_xdg_folders: Path, tool: str, moved: bool
) -> None:
    """Killed (SIGKILL) at `built temp`, the tree sits at the top of the root its journal
    record names: the next start removes it there (a move's source goes back under its
    name), and every root is as before, nothing of ours left, the journals empty; so too
    when the destination's folder is moved out of the roots before the next start (it takes
    nothing of ours along). The copy into `docs/sub` of the first root; the move to
    `docs/sub` of another filesystem served as a second root."""
    root, inner, outside = tmp_path / "root", disk / "inner", disk / "outside"
    tree(root)
    destination(root)
    destination(inner)
    outside.mkdir()
    there = root if tool == "copy" else inner  # the destination's root
    before = entries(root), entries(inner)
    target = "docs/sub/e" if tool == "copy" else str(inner / "docs" / "sub" / "e")
    pauses = Pauses(tmp_path / "steps")
    try:
        with RawServer([root, inner], env={STEP_PAUSE_ENV: str(pauses.folder)}) as raw:
            raw.call(tool, source="d", destination=target)
            while pauses.next_line() != "paused built temp":
                pauses.go()
            built = ours(there)
            assert len(built) == 1 and "/" not in built[0], built  # at the top of the root
            raw.process.kill()
            raw.process.wait()
    finally:
        pauses.close()
    if moved:  # on the destination's filesystem, out of the roots
        away = tmp_path / "away" if tool == "copy" else outside / "sub"
        os.rename(there / "docs" / "sub", away)
        assert entries(away) == {"a.txt": b"sub a\n"}
    with FilesystemServer([root, inner]) as server:
        server.ok("list_allowed_roots")
    expected = {root: before[0], inner: before[1]}
    if moved:  # taken away by the person, with nothing of ours in it
        assert entries(away) == {"a.txt": b"sub a\n"}
        kept = expected[there].items()
        expected[there] = {key: value for key, value in kept if not key.startswith("docs/sub")}
    assert (entries(root), entries(inner)) == (expected[root], expected[inner])
    data = own_xdg_folders / "data"
    assert journal_sizes(data, root) == journal_sizes(data, inner) == [0]
