"""The act runs in the folder that was checked (issue 40): every write tool is held at its pause
between the check and the act (mcp_servers/race_hook.py, through the real stdio server), and
there the folder holding its entry is moved out of the root, replaced by another folder, or
replaced by a symlink to where it went. The server holds that folder's descriptor, and a
descriptor follows its folder: without the check of parent_checks.py the act lands outside
(`write_file(docs/sub/a.txt)` replaced `outside/sub_moved/a.txt`, and with Landlock the
approved bytes were left there in a temp file), and make_dir resolved its path again and made
its folder in the one put in place.

Each call must be refused in one line that names the folder the person knows, with nothing
done: the whole world (the root and the outside folder, hidden names included, so a temp file
left anywhere fails) byte for byte as the person's own moves alone left it, and the journal of
intent empty. Run with Landlock (the suite's first pass), without it (FSAGENT_LANDLOCK_ABI=0,
the Makefile's first-layer pass: the server's own check alone, as on macOS) and on the portable
calls (FSAGENT_PORTABLE_CALLS=1: no O_PATH, no renameat2).

The instant left between that check and the act's one rename is covered by a check right
after it: a test holds the server there (FSAGENT_TEST_STEP_PAUSE, right before the rename) and
moves the folder out; the act is undone where it landed and the call refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp_session import PORTABLE_ENV, FilesystemServer, Result
from race_pause import Pauses
from tree_entries import entries

from mcp_servers.kernel_sandbox import ABI_ENV, abi_cap, kernel_abi
from mcp_servers.platform_calls import UNNAMED_FILES
from mcp_servers.race_hook import CHECKED_PAUSE_ENV, PAUSE_ENV, STEP_PAUSE_ENV

KINDS = ("moved", "replaced", "link")  # what the person does to the folder at the pause
PORTABLE = os.environ.get(PORTABLE_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class Case:
    """A write call on the tree of `build`, held at the pause of `argument`, where the folder
    `swapped` (below the kind's own folder) is moved, replaced or linked."""

    tool: str
    args: dict[str, Any]
    argument: str
    swapped: str = "docs/sub"
    name: str = ""
    more: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.name or f"{self.tool}-{self.argument}"


CASES = [
    Case("write_file", {"path": "docs/sub/a.txt", "content": "NEW\n"}, "path", name="write-over"),
    Case(
        "write_file",
        {"path": "docs/sub/a.txt", "content": "NEW\n"},
        "path",
        swapped="docs",
        name="write-over-grandparent",
    ),
    Case("write_file", {"path": "docs/sub/new.txt", "content": "NEW\n"}, "path", name="write-new"),
    Case(
        "write_file",
        {"path": "docs/sub/fresh/new.txt", "content": "NEW\n"},
        "path",
        name="write-new-folders",
    ),
    Case(
        "write_file",
        {"path": "docs/sub/a.txt", "content": "MORE\n", "mode": "append"},
        "path",
        name="append",
    ),
    Case(
        "patch_file",
        {"path": "docs/sub/a.txt", "edits": [{"old_text": "alpha", "new_text": "ALPHA"}]},
        "path",
        name="patch",
    ),
    Case("make_dir", {"path": "docs/sub/newdir"}, "path", name="make-dir"),
    Case("make_dir", {"path": "docs/sub/new1/new2"}, "path", swapped="docs", name="make-dirs"),
    Case("touch", {"path": "docs/sub/a.txt"}, "path", name="touch-existing"),
    Case("touch", {"path": "docs/sub/new.txt"}, "path", name="touch-new"),
    Case("copy", {"source": "docs/sub/a.txt", "destination": "top-copy.txt"}, "source"),
    Case("copy", {"source": "top.txt", "destination": "docs/sub/c.txt"}, "destination"),
    Case(
        "copy",
        {"source": "top.txt", "destination": "docs/sub/b.txt", "overwrite": True},
        "destination",
        name="copy-over-destination",
    ),
    Case(
        "copy",
        {"source": "docs/sub/d", "destination": "top-d"},
        "source",
        name="copy-folder-source",
    ),
    Case(
        "copy",
        {"source": "topdir", "destination": "docs/sub/d2"},
        "destination",
        name="copy-folder-destination",
    ),
    Case("move", {"source": "docs/sub/a.txt", "destination": "top-moved.txt"}, "source"),
    Case("move", {"source": "top.txt", "destination": "docs/sub/c.txt"}, "destination"),
    Case(
        "move",
        {"source": "docs/sub/d", "destination": "top-d"},
        "source",
        name="move-folder-source",
    ),
    Case(
        "move",
        {"source": "topdir", "destination": "docs/sub/d2"},
        "destination",
        name="move-folder-destination",
    ),
    Case("delete", {"path": "docs/sub/a.txt"}, "path", name="delete-file"),
    Case("delete", {"path": "docs/sub/d", "recursive": True}, "path", name="delete-folder"),
]


def build(folder: Path) -> None:
    """The tree of one kind: the folder to swap, what the calls take from outside it, and a
    decoy with the same names (an act that went to the folder put in its place would show)."""
    for base, text in ((folder / "docs" / "sub", "sub"), (folder / "decoy", "decoy")):
        (base / "d" / "e").mkdir(parents=True)
        (base / "a.txt").write_text(f"{text} a: alpha\n")
        (base / "b.txt").write_text(f"{text} b\n")
        (base / "d" / "x.txt").write_text(f"{text} x\n")
        (base / "d" / "e" / "y.txt").write_text(f"{text} y\n")
    (folder / "docs" / "note.txt").write_text("docs' own note\n")
    (folder / "top.txt").write_text("top\n")
    (folder / "topdir").mkdir()
    (folder / "topdir" / "z.txt").write_text("z\n")


def swap(kind: str, folder: Path, swapped: str, outside: Path) -> None:
    """What the person does at the pause: `swapped` goes outside the root, and another
    folder, a link to it, or nothing takes its place."""
    gone = outside / kind / "moved_away"
    gone.parent.mkdir(parents=True)
    os.rename(folder / swapped, gone)
    if kind == "replaced":
        os.rename(folder / "decoy", folder / swapped)
    elif kind == "link":
        os.symlink(gone, folder / swapped)


def snapshot(top: Path) -> dict[str, Any]:
    """Every entry below `top`, hidden ones and our temp names included."""
    return entries(top)


def as_left(before: dict[str, Any], kind: str, swapped: str, tmp_path: Path) -> dict[str, Any]:
    """The world `before` the call (`world`) with only the person's swap done."""
    moved_from = f"root/{kind}/{swapped}"
    moved_to = f"outside/{kind}/moved_away"
    decoy = f"root/{kind}/decoy"
    after: dict[str, Any] = {f"outside/{kind}": "folder"}
    for key, value in before.items():
        if key == moved_from or key.startswith(moved_from + "/"):
            key = moved_to + key[len(moved_from) :]
        elif kind == "replaced" and (key == decoy or key.startswith(decoy + "/")):
            key = moved_from + key[len(decoy) :]
        after[key] = value
    if kind == "link":
        after[moved_from] = ("link", str(tmp_path / moved_to))
    return after


def world(tmp_path: Path) -> dict[str, Any]:
    seen = {f"root/{key}": value for key, value in snapshot(tmp_path / "root").items()}
    seen.update({f"outside/{key}": value for key, value in snapshot(tmp_path / "outside").items()})
    return seen


def journal_sizes(data: Path, root: Path) -> list[int]:
    """The sizes of the root's journal files (one folder per root, by device and inode)."""
    found = root.stat()
    folder = data / "fsagent" / "journal" / f"{found.st_dev}-{found.st_ino}"
    return [path.stat().st_size for path in folder.iterdir()]


def arena(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for kind in KINDS:
        build(root / kind)
    (tmp_path / "outside").mkdir()
    return root


def in_kind(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """The call's path arguments below the kind's own folder."""
    paths = ("path", "source", "destination")
    return {key: f"{kind}/{value}" if key in paths else value for key, value in args.items()}


def waiting(kind: str, swapped: str) -> str:
    return (
        f"changed while waiting: '{kind}/{swapped}' was moved or replaced after the check; "
        "nothing was changed; look at it and try again"
    )


def assert_one_line(result: Result, expected: str) -> None:
    assert result.is_error and "\n" not in result.text, result.text
    assert result.text == expected, result.text


def held_call(
    server: FilesystemServer, pauses: Pauses, case: Case, kind: str, outside: Path
) -> tuple[Result, dict[str, Any]]:
    """The call, held at its pause while the person swaps the folder; its answer, and the
    world as the person left it."""
    tmp_path = outside.parent
    before = world(tmp_path)
    call = pauses.start(server, case.tool, **in_kind(kind, case.args))
    pauses.reached(case.tool, case.argument)
    swap(kind, tmp_path / "root" / kind, case.swapped, outside)
    result = pauses.finish(call)
    return result, as_left(before, kind, case.swapped, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_folder_moved_or_replaced_at_the_pause_refuses_the_call_with_nothing_done(
    tmp_path: Path, own_xdg_folders: Path, case: Case
) -> None:
    root = arena(tmp_path)
    outside = tmp_path / "outside"
    pauses = Pauses(tmp_path / "pause")
    try:
        with FilesystemServer([root], env={PAUSE_ENV: str(pauses.folder)}) as server:
            for kind in KINDS:
                result, expected = held_call(server, pauses, case, kind, outside)
                assert_one_line(result, waiting(kind, case.swapped))
                assert world(tmp_path) == expected, kind
                assert journal_sizes(own_xdg_folders / "data", root) == [0], kind
    finally:
        pauses.close()


# -- after the check, before the rename ------------------------------------------------------

WRITTEN_INTO = [
    # a temp file is made and written in the folder moved out (on the portable path, and a
    # folder copy's tree, at the top of the root: staging.py; the folder takes none along)
    Case("write_file", {"path": "docs/sub/a.txt", "content": "NEW\n"}, "path"),
    Case("copy", {"source": "topdir", "destination": "docs/sub/d2"}, "destination"),
]
RENAMED_IN = [
    # (case, the step right before (or after) the act's rename: renameat2's, the portable path's)
    (Case("delete", {"path": "docs/sub/a.txt"}, "path"), ("recorded aside", "recorded aside")),
    (
        Case("write_file", {"path": "docs/sub/a.txt", "content": "NEW\n"}, "path"),
        ("recorded exchange", "recorded aside"),
    ),
    (
        # on the portable path: the checked file set aside, the new one not yet renamed in
        Case(
            "write_file",
            {"path": "docs/sub/a.txt", "content": "NEW\n"},
            "path",
            name="write-over-set-aside",
        ),
        ("recorded exchange", "renamed aside"),
    ),
    (
        Case("move", {"source": "docs/sub/a.txt", "destination": "top-moved.txt"}, "source"),
        ("recorded aside", "recorded aside"),
    ),
    (
        Case("delete", {"path": "docs/sub/d", "recursive": True}, "path", name="delete-folder"),
        ("recorded aside", "recorded aside"),
    ),
]
CHECKED = [
    # held right after the last check before the act's call (FSAGENT_TEST_CHECKED_PAUSE)
    Case("move", {"source": "top.txt", "destination": "docs/sub/c.txt"}, "destination"),
    Case("copy", {"source": "top.txt", "destination": "docs/sub/c.txt"}, "destination"),
    Case("touch", {"path": "docs/sub/new.txt"}, "path", name="touch-new"),
    Case("make_dir", {"path": "docs/sub/newdir"}, "path", name="make-dir"),
]
ACTING = (
    "changed while acting: 'moved/docs/sub' was moved or replaced during the act; what was "
    "done there was undone; look at it and try again"
)


def moved_at(
    tmp_path: Path, data: Path, case: Case, hook: str, line: tuple[str, str], expected: str
) -> None:
    """Without Landlock (as on macOS), `case` held by the hook `hook` at its `line` while its
    folder is moved out: answered `expected`, the world as the person left it, no record."""
    root = arena(tmp_path)
    outside = tmp_path / "outside"
    pauses = Pauses(tmp_path / "steps")
    env = {hook: str(pauses.folder), ABI_ENV: "0"}
    try:
        with FilesystemServer([root], env=env) as server:
            kind = "moved"
            before = world(tmp_path)
            call = pauses.start(server, case.tool, **in_kind(kind, case.args))
            pauses.reached(*line)
            swap(kind, root / kind, case.swapped, outside)
            result = pauses.finish(call)
            assert_one_line(result, expected)
            assert world(tmp_path) == as_left(before, kind, case.swapped, tmp_path)
            assert journal_sizes(data, root) == [0]
    finally:
        pauses.close()


@pytest.mark.parametrize("case", WRITTEN_INTO, ids=[case.id for case in WRITTEN_INTO])
def test_a_folder_moved_while_its_temp_entry_is_written_is_refused_before_the_rename(
    tmp_path: Path, own_xdg_folders: Path, case: Case
) -> None:
    """The temp entry goes along with the folder (one built at the top of the root stays
    there); the check before the rename refuses the call, and the temp entry is removed
    where it is."""
    expected = waiting("moved", case.swapped)
    data = own_xdg_folders / "data"
    moved_at(tmp_path, data, case, STEP_PAUSE_ENV, ("recorded", "temp"), expected)


@pytest.mark.parametrize("case, steps", RENAMED_IN, ids=[case.id for case, _ in RENAMED_IN])
def test_a_folder_moved_right_before_the_rename_has_the_act_undone_where_it_landed(
    tmp_path: Path, own_xdg_folders: Path, case: Case, steps: tuple[str, str]
) -> None:
    """The rename lands in the folder moved out, the check right after it sees that, and the
    act is undone there; the call is refused."""
    what, which = (steps[1] if PORTABLE else steps[0]).split()
    data = own_xdg_folders / "data"
    moved_at(tmp_path, data, case, STEP_PAUSE_ENV, (what, which), ACTING)


@pytest.mark.parametrize("case", CHECKED, ids=[case.id for case in CHECKED])
def test_a_folder_moved_right_after_the_last_check_has_the_act_undone_where_it_landed(
    tmp_path: Path, own_xdg_folders: Path, case: Case
) -> None:
    """The act's one call (a rename to a new name, a file or folder made) lands in the folder
    moved out; the check right after it sees that and undoes it there."""
    data = own_xdg_folders / "data"
    line = ("checked", f"{case.tool} {case.argument}")
    moved_at(tmp_path, data, case, CHECKED_PAUSE_ENV, line, ACTING)


# -- a move's source folder moved out at the destination's pause ----------------------------

SOURCE_AT_DESTINATION = Case(
    "move", {"source": "docs/sub/a.txt", "destination": "top-moved.txt"}, "destination"
)


def test_a_moves_source_folder_moved_out_at_the_destinations_pause_gets_its_entry_back(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """The source is set aside by then; without Landlock it is put back in the folder where
    it went, under its own name, and the call refused with nothing else done."""
    data = own_xdg_folders / "data"
    line = ("move", "destination")
    case = SOURCE_AT_DESTINATION
    moved_at(tmp_path, data, case, PAUSE_ENV, line, waiting("moved", case.swapped))


def test_with_landlock_a_set_aside_entry_taken_out_of_the_roots_is_named_where_it_is(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """With Landlock the kernel refuses to put it back out there: the answer says so and
    names it (the one time a temp name is said: it is the only way to find the entry), and
    the journal keeps its record for the next start. Without Landlock (this machine's kernel,
    or the first-layer pass) it is put back, as above."""
    landlock = kernel_abi()[0] > 0 and abi_cap() != 0
    root = arena(tmp_path)
    gone = tmp_path / "outside" / "moved" / "moved_away"
    pauses = Pauses(tmp_path / "pause")
    try:
        with FilesystemServer([root], env={PAUSE_ENV: str(pauses.folder)}) as server:
            call = pauses.start(server, "move", **in_kind("moved", SOURCE_AT_DESTINATION.args))
            pauses.reached("move", "destination")
            swap("moved", root / "moved", "docs/sub", tmp_path / "outside")
            result = pauses.finish(call)
            journal = journal_sizes(own_xdg_folders / "data", root)
    finally:
        pauses.close()
    assert result.is_error and "\n" not in result.text, result.text
    assert result.text.startswith(waiting("moved", "docs/sub")), result.text
    asides = [path.name for path in gone.iterdir() if path.name.startswith(".fsagent-")]
    if not landlock:
        assert not asides and (gone / "a.txt").read_text() == "sub a: alpha\n"
        assert journal == [0]
        return
    (aside,) = asides
    assert result.text.endswith(
        ", except that the entry set aside from 'moved/docs/sub/a.txt' could not be put back "
        f"(Permission denied): it is '{aside}' in that folder, wherever it went"
    ), result.text
    assert (gone / aside).read_text() == "sub a: alpha\n"
    assert journal != [0]  # its record stays for the next start


# -- a folder moved out of the roots while a temp file is written into it -------------------

WRITES = [
    Case("write_file", {"path": "docs/sub/a.txt", "content": "NEW\n"}, "path", name="write-over"),
    Case("write_file", {"path": "docs/sub/new.txt", "content": "NEW\n"}, "path", name="write-new"),
    Case(
        "copy",
        {"source": "top.txt", "destination": "docs/sub/b.txt", "overwrite": True},
        "destination",
        name="copy-over",
    ),
]
# Where the folder goes: once the temp file is written, before the check that precedes its
# name (FSAGENT_TEST_STEP_PAUSE, `written temp`); or right after that check, before the call
# that names it or puts it in place (FSAGENT_TEST_CHECKED_PAUSE).
HOLDS = {"written": (STEP_PAUSE_ENV, "written temp"), "checked": (CHECKED_PAUSE_ENV, "")}


@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "landlock-off"])
@pytest.mark.parametrize("hold", list(HOLDS))
@pytest.mark.parametrize("case", WRITES, ids=[case.id for case in WRITES])
def test_a_folder_moved_out_while_a_temp_file_is_written_leaves_nothing_there(
    tmp_path: Path, own_xdg_folders: Path, case: Case, hold: str, landlock: bool
) -> None:
    """With O_TMPFILE the file has no name until the folder is checked again, so the folder
    takes nothing along: refused, the outside folder and the root byte for byte as the
    person left them (hidden names included), the journal empty; with Landlock (which refuses
    the link out there) and without it (the check right after the link removes it there). On
    the portable path (no O_TMPFILE, as on macOS) the file is named from the start at the top
    of the root (staging.py), which the folder's move does not carry: nothing is left out
    there either, with Landlock or without (before, its temp file went along, and Landlock
    refused its removal there)."""
    landlock = landlock and kernel_abi()[0] > 0 and abi_cap() != 0
    variable, line = HOLDS[hold]
    root = arena(tmp_path)
    outside = tmp_path / "outside"
    pauses = Pauses(tmp_path / "steps")
    env = {variable: str(pauses.folder), **({} if landlock else {ABI_ENV: "0"})}
    try:
        with FilesystemServer([root], env=env) as server:
            before = world(tmp_path)
            call = pauses.start(server, case.tool, **in_kind("moved", case.args))
            pauses.reached(*(line or f"checked {case.tool} {case.argument}").split(" ", 1))
            swap("moved", root / "moved", case.swapped, outside)
            result = pauses.finish(call)
            expected = as_left(before, "moved", case.swapped, tmp_path)
            now, journal = world(tmp_path), journal_sizes(own_xdg_folders / "data", root)
    finally:
        pauses.close()
    assert result.is_error and "\n" not in result.text, result.text
    assert now == expected
    assert journal == [0]
    if hold == "written" or (landlock and UNNAMED_FILES):
        assert result.text == waiting("moved", case.swapped)  # nothing was made out there
    elif UNNAMED_FILES:
        assert result.text == ACTING  # linked where it went, seen and removed there
    else:
        assert result.text in (waiting("moved", case.swapped), ACTING)
