"""Nothing set aside is ever lost (issue 40): the journal of intent (mcp_servers/journal.py).

The crash test kills the real server (SIGKILL) at every step its journal announces, through the
test-only step hook (FSAGENT_TEST_STEP_PAUSE, mcp_servers/race_hook.py): after each record is
durable and before the rename it announces, after a checked delete is committed, once a file
being written is full or a folder copy's tree is built (in the destination's staging folder,
mcp_servers/staging.py, for a destination below the root), and after each temp name is gone and
before its record is closed: 107 kill points over the 21 acts below (outside the portable
pass). A first run of each act counts its steps; then one run per step kills the server there
and a new server starts on the same root. After each: the tree is exactly as before the act or
exactly as after it (every entry old or new under its own name, nothing under a temp name), and
the journal is empty.

Two real servers on one root: a second server's start never touches what a live one has set
aside, and the live one's act completes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp_session import (
    JOURNAL_ENV,
    PORTABLE_ENV,
    FilesystemServer,
    RawServer,
    server_command,
    tool_text,
)
from race_pause import Pauses, paused_server

from mcp_servers.dirfd import TEMP_NAME
from mcp_servers.kernel_sandbox import ABI_ENV
from mcp_servers.platform_calls import NO_TMPFILE_ENV, UNNAMED_FILES, portable_forced
from mcp_servers.race_hook import PAUSE_ENV, STEP_PAUSE_ENV


def journal_files(data: Path, root: Path) -> list[Path]:
    """The journal files of `root` (one folder per root, by its device and inode)."""
    found = root.stat()
    return sorted((data / "fsagent" / "journal" / f"{found.st_dev}-{found.st_ino}").iterdir())


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry below `folder`, hidden ones included: a file's bytes (and its number of
    names, when it has more than one), a folder's presence."""
    seen: dict[str, Any] = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current, name)
            value: Any = "folder" if path.is_dir() else path.read_bytes()
            if not path.is_dir() and (links := path.stat().st_nlink) > 1:
                value = (value, links)
            seen[str(path.relative_to(folder))] = value
    return seen


@dataclass
class Act:
    """One write tool call on a fresh tree: `build` makes the tree, `tool`/`args` the call."""

    name: str
    tool: str
    args: dict[str, Any]
    build: Callable[[Path], None]
    env: dict[str, str] = field(default_factory=dict)


def files(**contents: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        for name, text in contents.items():
            path = root / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    return build


TREE = files(**{"a.txt": "A\n", "b.txt": "B\n", "d__one.txt": "1\n", "d__sub__two.txt": "2\n"})


def linked_tree(root: Path) -> None:
    """TREE, and a second name for d/sub/two.txt beside it: a folder moved across keeps the
    two names one file (tree_copy.py), so each step's recovery is checked with it."""
    TREE(root)
    os.link(root / "d" / "sub" / "two.txt", root / "d" / "sub" / "two-again.txt")


PORTABLE = {PORTABLE_ENV: "1"}
ACTS = [
    Act("move file", "move", {"source": "a.txt", "destination": "c.txt"}, TREE),
    Act(
        "move over a file",
        "move",
        {"source": "a.txt", "destination": "b.txt", "overwrite": True},
        TREE,
    ),
    Act("move folder", "move", {"source": "d", "destination": "e"}, TREE),
    Act("delete file", "delete", {"path": "a.txt"}, TREE),
    Act("delete folder", "delete", {"path": "d", "recursive": True}, TREE),
    Act(
        "copy over a file",
        "copy",
        {"source": "a.txt", "destination": "b.txt", "overwrite": True},
        TREE,
    ),
    Act("copy folder", "copy", {"source": "d", "destination": "e"}, TREE),
    Act("write over a file", "write_file", {"path": "a.txt", "content": "NEW\n"}, TREE),
    Act("write a new file", "write_file", {"path": "new/n.txt", "content": "NEW\n"}, TREE),
    Act(
        "patch a file",
        "patch_file",
        {"path": "a.txt", "edits": [{"old_text": "A", "new_text": "Z"}]},
        TREE,
    ),
]
# Landlock ABI 1 has no REFER: the kernel refuses every rename across folders (EXDEV), as
# across filesystems, and a move of a file copies it there, then removes the source.
ACTS.append(
    Act(
        "move across filesystems",
        "move",
        {"source": "a.txt", "destination": "d/a.txt"},
        TREE,
        {ABI_ENV: "1"},
    )
)
# A folder the same way: copied there under a temp name, put in place, then removed.
ACTS.append(
    Act(
        "move folder across filesystems",
        "move",
        {"source": "d/sub", "destination": "sub"},
        linked_tree,
        {ABI_ENV: "1"},
    )
)
# A destination below the root: a folder copy's tree is built at the top of the root (its
# staging folder, staging.py) and renamed into `d` at the end; on the portable path (no
# O_TMPFILE) a file being written is too. Its `temp` record names the root, where it is.
ACTS += [
    Act("copy folder into a folder", "copy", {"source": "d/sub", "destination": "d/copy"}, TREE),
    Act(
        "write over a file in a folder",
        "write_file",
        {"path": "d/one.txt", "content": "NEW\n"},
        TREE,
    ),
    # A file system without O_TMPFILE, with renameat2: the file named at the root's top is
    # swapped across into `d` (the `exchange` record names the root too).
    Act(
        "write over a file in a folder, without O_TMPFILE",
        "write_file",
        {"path": "d/one.txt", "content": "NEW\n"},
        TREE,
        {NO_TMPFILE_ENV: "1"},
    ),
]
# On the portable path too, where it differs. Not in the pass that runs the whole suite
# portable (the Makefile's FSAGENT_PORTABLE_CALLS=1): there the acts above are these already,
# and each copy would repeat ~40 server starts to test the same thing again.
ACTS += [
    Act(f"{act.name}, portable", act.tool, act.args, act.build, {**act.env, **PORTABLE})
    for act in ACTS
    if act.name
    in {
        "move over a file",
        "copy over a file",
        "write over a file",
        "delete file",
        "move folder across filesystems",
        "write over a file in a folder",
    }
    and not portable_forced()
]


def with_expect(raw: RawServer, act: Act) -> dict[str, Any]:
    """The call as the agent makes it: with the plan's `expect`."""
    answer = raw.ask(
        "tools/call", {"name": "plan", "arguments": {"tool": act.tool, "args": act.args}}
    )
    text, failed = tool_text(answer)
    assert not failed, text
    return {**act.args, "expect": json.loads(text)["paths"]}


def run_whole(tmp_path: Path, act: Act) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(tree before, tree after, its steps' lines) of the act left to run through."""
    root = tmp_path / "whole"
    root.mkdir()
    act.build(root)
    before = snapshot(root)
    pauses = Pauses(tmp_path / "whole-steps")
    with RawServer([root], env={STEP_PAUSE_ENV: str(pauses.folder), **act.env}) as raw:
        call = raw.call(act.tool, **with_expect(raw, act))
        answerer = threading.Thread(target=pauses.answer_all, daemon=True)
        answerer.start()
        text, failed = tool_text(raw.answer(call))
        os.write(pauses.paused, b"stop\n")
        answerer.join()
    pauses.close()
    assert not failed, text
    return before, snapshot(root), pauses.seen


# From these steps on, the act has gone through: a delete committed, a swap made, a temp name
# gone (every act's last rename comes before its first clearing). Killed there, the next start
# must finish it, never undo it.
DECIDED = ("paused committed aside", "paused renamed exchange", "paused cleared temp")


def kill_at(tmp_path: Path, act: Act, step: int) -> Path:
    """Run the act on a fresh tree and SIGKILL the server at its `step`-th step."""
    root = tmp_path / f"root{step}"
    root.mkdir()
    act.build(root)
    pauses = Pauses(tmp_path / f"steps{step}")
    with RawServer([root], env={STEP_PAUSE_ENV: str(pauses.folder), **act.env}) as raw:
        raw.call(act.tool, **with_expect(raw, act))
        for _ in range(step - 1):
            pauses.next_line()
            pauses.go()
        pauses.next_line()
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    return root


def assert_recovered(root: Path, data: Path, states: list[dict[str, Any]], where: str) -> None:
    """A new server on the root: the tree is one of `states`, the journal empty."""
    with FilesystemServer([root]) as server:
        server.ok("list_allowed_roots")
        # The killed server's journal is gone; the only one left is the new server's, empty.
        left = journal_files(data, root)
        assert [path.stat().st_size for path in left] == [0], (where, left)
    now = snapshot(root)
    assert now in states, (where, now)


@pytest.mark.parametrize("act", ACTS, ids=lambda act: act.name)
def test_a_server_killed_at_any_step_of_an_act_loses_and_hides_nothing(
    tmp_path: Path, act: Act, own_xdg_folders: Path
) -> None:
    before, after, lines = run_whole(tmp_path, act)
    assert len(lines) >= 2  # at least a record and its clearing
    if act.build is linked_tree:  # moved across as one file with two names
        assert after["sub/two.txt"] == after["sub/two-again.txt"] == (b"2\n", 2), after
    decided = min(number for number, line in enumerate(lines, 1) if line in DECIDED)
    for step, line in enumerate(lines, 1):
        root = kill_at(tmp_path, act, step)
        states = [after] if step >= decided else [before, after]
        assert_recovered(root, own_xdg_folders / "data", states, f"{act.name}, {step}: {line}")


@pytest.mark.parametrize("tool", ["move", "delete"])
def test_a_refused_act_killed_before_its_put_back_puts_the_entry_back(
    tmp_path: Path, tool: str, own_xdg_folders: Path
) -> None:
    """The entry under the name was swapped after the check: the act captures it, refuses,
    and is killed right before it puts it back; the next start puts it back."""
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    (root / "other.txt").write_text("another file\n")
    args = {"source": "a.txt", "destination": "c.txt"} if tool == "move" else {"path": "a.txt"}
    argument = "source" if tool == "move" else "path"
    pauses = Pauses(tmp_path / "pause")
    with RawServer([root], env={PAUSE_ENV: str(pauses.folder)}) as raw:
        plan = raw.ask("tools/call", {"name": "plan", "arguments": {"tool": tool, "args": args}})
        raw.call(tool, **args, expect=json.loads(tool_text(plan)[0])["paths"])
        while pauses.next_line() != f"paused {tool} {argument}":
            pauses.go()
        os.rename(root / "a.txt", root / "a.txt.was")
        os.rename(root / "other.txt", root / "a.txt")
        swapped = snapshot(root)
        pauses.go()
        assert pauses.next_line() == f"paused {tool} {argument} put-back"
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    assert_recovered(root, own_xdg_folders / "data", [swapped], f"{tool} put-back")
    assert (root / "a.txt").read_text() == "another file\n"


def test_an_entry_whose_name_was_taken_is_kept_under_a_visible_name_and_said(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    act = ACTS[0]  # move a.txt -> c.txt, killed between the set-aside and the rename
    pauses = Pauses(tmp_path / "pause")
    with RawServer([root], env={PAUSE_ENV: str(pauses.folder)}) as raw:
        raw.call(act.tool, **with_expect(raw, act))
        while pauses.next_line() != "paused move destination":  # set aside, not yet moved
            pauses.go()
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    assert not (root / "a.txt").exists()
    (root / "a.txt").write_text("made meanwhile\n")
    with RawServer([root], env={}) as raw:
        said = raw.initialized["capabilities"]["experimental"]["fsagent/recovery"]["kept"]
    (kept,) = [path for path in root.iterdir() if ".fsagent-recovered-" in path.name]
    assert kept.name.startswith("a.txt.fsagent-recovered-") and kept.read_text() == "A\n"
    assert (root / "a.txt").read_text() == "made meanwhile\n"
    assert len(said) == 1 and said[0].endswith(f"is kept as {kept}"), said
    assert not [path for path in root.iterdir() if path.name.startswith(".fsagent-")]


def test_a_folder_replaced_since_the_crash_is_not_taken_for_the_recorded_one(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """The move of d/one.txt is killed once it is set aside; then d is renamed and another
    d made: recovery acts in no other folder than the one recorded, and says where to look."""
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    act = Act("move in d", "move", {"source": "d/one.txt", "destination": "d/two.txt"}, TREE)
    pauses = Pauses(tmp_path / "pause")
    with RawServer([root], env={PAUSE_ENV: str(pauses.folder)}) as raw:
        raw.call(act.tool, **with_expect(raw, act))
        while pauses.next_line() != "paused move destination":
            pauses.go()
        raw.process.kill()
        raw.process.wait()
    pauses.close()
    os.rename(root / "d", root / "d_old")
    (root / "d").mkdir()
    with RawServer([root], env={}) as raw:
        said = raw.initialized["capabilities"]["experimental"]["fsagent/recovery"]["kept"]
    assert len(said) == 1 and "is gone or was replaced" in said[0], said
    (aside,) = [path for path in (root / "d_old").iterdir() if path.name.startswith(".fsagent-")]
    assert aside.name in said[0] and aside.read_text() == "1\n"
    assert list((root / "d").iterdir()) == []


def test_a_second_server_never_touches_what_a_live_one_set_aside(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """Server A is held between its set-aside of a.txt and its rename to c.txt; server B
    starts on the same root (its recovery runs); A's entry is untouched, and A's move ends."""
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    with paused_server(tmp_path, root) as (first, pauses):
        expect = json.loads(
            first.ok("plan", tool="move", args={"source": "a.txt", "destination": "c.txt"})
        )["paths"]
        call = pauses.start(first, "move", source="a.txt", destination="c.txt", expect=expect)
        pauses.reached("move", "destination")  # a.txt is set aside now
        (aside,) = [path for path in root.iterdir() if path.name.startswith(".fsagent-")]
        with FilesystemServer([root]) as second:
            second.ok("list_allowed_roots")
            assert aside.read_text() == "A\n"
            assert len(journal_files(own_xdg_folders / "data", root)) == 2  # one each
        result = pauses.finish(call)
    assert not result.is_error, result.text
    assert (root / "c.txt").read_text() == "A\n" and not (root / "a.txt").exists()
    assert not [path for path in root.iterdir() if path.name.startswith(".fsagent-")]


# What the kernel saw (strace, on the real server): every step that puts something at a temp
# name, swaps, or makes a folder comes after an fdatasync of the journal made since the step
# before it. A SIGKILL cannot tell a record written from one made durable (the page cache
# outlives the process); the order of the system calls can.
TRACED = "trace=openat,mkdirat,renameat,renameat2,linkat,fdatasync,fsync"
RENAME = re.compile(r'renameat2?\([^,]+, "[^"]*", [^,]+, "([^"]*)"(?:, (\w+))?\) = 0')
CREATE = re.compile(r'openat\([^,]+, "(\.fsagent-[0-9a-f]{16}\.tmp)", [^)]*O_CREAT[^)]*\) = \d+')
# A file written without a name (O_TMPFILE) is given its temp name by a link, journalled first.
LINKED = re.compile(r'linkat\(AT_FDCWD, "/proc/self/fd/\d+", \d+, "\.fsagent-[0-9a-f]{16}\.tmp", ')
MADE = re.compile(r'mkdirat\([^,]+, "([^"]+)", [0-7]+\) = 0')
JOURNAL_OPENED = re.compile(r'openat\([^,]+, "[^"]*/\.\d+-[0-9a-f]{8}\.new", [^)]*\) = (\d+)')


def steps_out_of_order(trace: str) -> list[str]:
    """The steps of `trace` that no fresh fdatasync of the journal came before."""
    journal: str | None = None
    synced = False
    wrong: list[str] = []
    for line in trace.splitlines():
        call = line.split(None, 1)[1] if " " in line else line
        if opened := JOURNAL_OPENED.match(call):
            journal = opened.group(1)
        elif journal is not None and call.startswith(
            (f"fdatasync({journal})", f"fsync({journal})")
        ):
            synced = True
        elif (
            (
                (renamed := RENAME.match(call))
                and (TEMP_NAME.fullmatch(renamed.group(1)) or renamed.group(2) == "RENAME_EXCHANGE")
            )
            or CREATE.match(call)
            or LINKED.match(call)
            or MADE.match(call)
        ):
            if not synced:
                wrong.append(call)
            synced = False
    assert journal is not None, "the journal was never opened"
    return wrong


@pytest.mark.parametrize("portable", [False, True], ids=["renameat2", "portable"])
def test_each_step_is_journalled_durably_before_it_is_taken(tmp_path: Path, portable: bool) -> None:
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    log = tmp_path / "trace"
    wrapper = ["strace", "-f", "-qq", "-e", TRACED, "-o", str(log)]
    env = PORTABLE if portable else {}
    with FilesystemServer([root], wrapper=wrapper, env=env) as server:
        # Each act once (but those under their own switches), on a fresh tree; the two into a
        # folder build at the root's top (staging.py), journalled there first the same way.
        into = {"copy folder into a folder", "write over a file in a folder"}
        staged = [act for act in ACTS if act.name in into]
        assert len(staged) == len(into)
        for act in ACTS[:10] + staged:
            for entry in root.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            TREE(root)
            expect = json.loads(server.ok("plan", tool=act.tool, args=act.args))["paths"]
            result = server.call(act.tool, **act.args, expect=expect)
            assert not result.is_error, (act.name, result.text)
    trace = log.read_text()
    assert trace.count("fdatasync(") >= 9
    assert portable or not UNNAMED_FILES or LINKED.search(trace), "no file was linked in"
    assert steps_out_of_order(trace) == []


def test_a_journal_inside_a_root_is_no_write_tools_to_change(tmp_path: Path) -> None:
    """A root that holds the data folder (a root at ~): the journals are protected."""
    root = tmp_path / "root"
    root.mkdir()
    journals = root / ".local" / "journal"
    with FilesystemServer([root], env={JOURNAL_ENV: str(journals)}) as server:
        for tool, args in (
            ("delete", {"path": ".local", "recursive": True}),
            ("write_file", {"path": ".local/journal/x.journal", "content": "{}\n"}),
            ("move", {"source": ".local/journal", "destination": "elsewhere"}),
        ):
            result = server.call(tool, **args)
            assert result.is_error and "is protected" in result.text, (tool, result.text)
    assert len(list(journals.glob("*/*.journal"))) == 1


def test_a_set_aside_the_kernel_refuses_leaves_the_journal_empty(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """An immutable folder (chattr +i): the rename that would set the entry aside fails,
    nothing moved, and its record is closed at once (the journal is truncated to nothing)."""
    root = tmp_path / "root"
    root.mkdir()
    TREE(root)
    subprocess.run(["chattr", "+i", str(root / "d")], check=True)
    try:
        with FilesystemServer([root]) as server:
            result = server.call("delete", path="d/one.txt")
            assert result.is_error and "Operation not permitted" in result.text, result.text
            left = journal_files(own_xdg_folders / "data", root)
            assert [path.stat().st_size for path in left] == [0]
    finally:
        subprocess.run(["chattr", "-i", str(root / "d")], check=True)
    assert (root / "d" / "one.txt").read_text() == "1\n"


def test_a_journal_file_never_named_is_removed_only_when_its_server_is_gone(
    tmp_path: Path, own_xdg_folders: Path
) -> None:
    """A server makes its file under a dot-name and locks it before naming it: one whose
    process is gone is removed at the next start; one whose process lives is its own."""
    root = tmp_path / "root"
    root.mkdir()
    found = root.stat()
    folder = own_xdg_folders / "data" / "fsagent" / "journal" / f"{found.st_dev}-{found.st_ino}"
    folder.mkdir(parents=True)
    gone = folder / f".{2**22 + 1}-0badc0de.new"  # above the kernel's pid_max
    living = folder / f".{os.getpid()}-0badc0de.new"
    gone.touch()
    living.touch()
    with FilesystemServer([root]) as server:
        server.ok("list_allowed_roots")
    assert not gone.exists() and living.exists()


def test_a_server_that_cannot_keep_its_journal_does_not_start_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "a-file").write_text("not a folder\n")
    env = {**os.environ, JOURNAL_ENV: str(tmp_path / "a-file")}
    refused = subprocess.run(
        server_command([root]), env=env, input="", capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith(
        f"mcp_servers.filesystem: not started: cannot keep the journal of intent in "
        f"{tmp_path / 'a-file'}/"
    )
    assert line.endswith(f"set {JOURNAL_ENV} to a folder this user may write, or pass --read-only")
    read_only = subprocess.run(
        server_command([root], "--read-only"), env=env, input="", capture_output=True, timeout=60
    )
    assert read_only.returncode == 0, read_only.stderr  # keeps no journal, so starts
