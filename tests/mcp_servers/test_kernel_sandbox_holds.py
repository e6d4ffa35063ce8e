"""The kernel holds the roots when the server's own containment does not (Landlock).

The real stdio server is started with its containment broken on purpose
(`FSAGENT_TEST_BROKEN_CONTAINMENT`, mcp_servers/broken_containment.py: every root's descriptor
leads to a folder outside). Without the kernel sandbox its tools then read, list, write and
rename out there: the switch is a real hole. With it, the kernel refuses each of them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from mcp_session import RawServer, server_command, tool_text

from mcp_servers.broken_containment import BROKEN_ENV
from mcp_servers.kernel_sandbox import ABI_ENV, CAPABILITY, kernel_abi

NO_LANDLOCK = {ABI_ENV: "0"}  # the server believes the kernel has no Landlock
KERNEL_ABI, _ = kernel_abi()
pytestmark = pytest.mark.skipif(KERNEL_ABI == 0, reason="this kernel offers no Landlock")


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry below `folder` with its content (None for a folder)."""
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A root and a folder outside it holding the same names, with other contents."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder, words in ((root, "inside"), (outside, "OUTSIDE SECRET")):
        (folder / "sub").mkdir(parents=True)
        (folder / "note.txt").write_text(f"{words}\n")
        (folder / "old.txt").write_text(f"{words} old\n")
    (outside / "only-outside.txt").write_text("listed only outside\n")
    return root, outside


def calls_outside(raw: RawServer) -> dict[str, tuple[str, bool]]:
    """A read, a listing, a write and a rename, each as (text, is_error)."""
    asked = {
        "read": raw.call("read_file", path="note.txt"),
        "list": raw.call("list_directory", path="."),
        "write": raw.call("write_file", path="sub/new.txt", content="written\n"),
        "rename": raw.call("move", source="old.txt", destination="sub/moved.txt"),
    }
    answers = {}  # they run side by side, so they may come in any order
    while len(answers) < len(asked):
        answer = raw.next_answer()
        answers[answer["id"]] = answer
    return {what: tool_text(answers[request]) for what, request in asked.items()}


def test_without_the_kernel_the_broken_switch_reaches_outside(places) -> None:
    # The control: with no kernel sandbox, the switch really is a way out.
    root, outside = places
    env = {BROKEN_ENV: str(outside), **NO_LANDLOCK}
    with RawServer([root], env=env) as raw:
        answers = calls_outside(raw)
    assert answers["read"] == ("OUTSIDE SECRET\n", False)
    assert "[FILE] only-outside.txt" in answers["list"][0]
    assert not answers["write"][1] and not answers["rename"][1]
    assert (outside / "sub" / "new.txt").read_text() == "written\n"
    assert (outside / "sub" / "moved.txt").read_text() == "OUTSIDE SECRET old\n"


def test_the_kernel_refuses_a_read_a_listing_a_write_and_a_rename_outside(places) -> None:
    root, outside = places
    before_outside, before_root = tree(outside), tree(root)
    with RawServer([root], env={BROKEN_ENV: str(outside)}) as raw:
        answers = calls_outside(raw)
        assert raw.ask("ping")["result"] == {}  # refused calls, a server that goes on
    for what, (text, is_error) in answers.items():
        assert is_error, f"{what} was not refused: {text}"
        assert "Permission denied" in text and "\n" not in text, what
    assert tree(outside) == before_outside
    assert tree(root) == before_root


def test_inside_the_roots_reads_and_writes_still_work(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with RawServer([tmp_path]) as raw:
        report = raw.initialized["capabilities"]["experimental"][CAPABILITY]
        read = tool_text(raw.answer(raw.call("read_file", path="a.txt")))
        wrote = tool_text(raw.answer(raw.call("write_file", path="d/b.txt", content="new\n")))
        moved = tool_text(raw.answer(raw.call("move", source="d/b.txt", destination="c.txt")))
    assert report == {
        "holds": True,
        "kind": "landlock",
        "abi": min(KERNEL_ABI, 7),
        "kernel_abi": KERNEL_ABI,
        "rights": "read-write",
        "gaps": [],
        "sockets": "denied",
    }
    assert read == ("hello\n", False)
    assert not wrote[1] and not moved[1]
    assert (tmp_path / "c.txt").read_text() == "new\n"


def test_a_read_only_server_is_held_to_reading(places) -> None:
    root, outside = places
    with RawServer([root], "--read-only", env={BROKEN_ENV: str(outside)}) as raw:
        report = raw.initialized["capabilities"]["experimental"][CAPABILITY]
        text, is_error = tool_text(raw.answer(raw.call("read_file", path="note.txt")))
    assert report["holds"] and report["rights"] == "read"
    assert is_error and "Permission denied" in text


def test_without_landlock_the_server_says_so_and_runs_on_its_own_checks(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with RawServer([tmp_path], env=NO_LANDLOCK) as raw:
        report = raw.initialized["capabilities"]["experimental"][CAPABILITY]
        read = tool_text(raw.answer(raw.call("read_file", path="a.txt")))
        escape = tool_text(raw.answer(raw.call("read_file", path="../outside.txt")))
    assert report == {
        "holds": False,
        "reason": f"{ABI_ENV}=0 says this kernel has no Landlock",
        "sockets": "denied",
    }
    assert read == ("hello\n", False)
    assert escape[1] and escape[0].startswith("security_error:")


def test_require_kernel_sandbox_refuses_to_start_without_it(tmp_path: Path) -> None:
    command = server_command([tmp_path], "--require-kernel-sandbox")
    refused = subprocess.run(
        command, env=env_with(NO_LANDLOCK), input="", capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "mcp_servers.filesystem: --require-kernel-sandbox: no kernel sandbox: "
        f"{ABI_ENV}=0 says this kernel has no Landlock; the server's own checks alone hold "
        "the roots; not started\n"
    )
    with RawServer([tmp_path], "--require-kernel-sandbox") as raw:  # where it holds, it starts
        assert raw.initialized["capabilities"]["experimental"][CAPABILITY]["holds"]


def test_before_abi_2_a_move_across_folders_is_a_copy_of_a_file_and_of_a_folder(
    tmp_path: Path,
) -> None:
    # ABI 1 has no REFER: the kernel refuses every rename across folders (EXDEV), as across
    # filesystems, and the server's move falls back to its copy, of a folder too.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f.txt").write_text("moved\n")
    (tmp_path / "a" / "folder").mkdir()
    (tmp_path / "a" / "folder" / "in.txt").write_text("inside\n")
    with RawServer([tmp_path], env={ABI_ENV: "1"}) as raw:
        report = raw.initialized["capabilities"]["experimental"][CAPABILITY]
        file_move = tool_text(raw.answer(raw.call("move", source="a/f.txt", destination="b/f.txt")))
        folder_move = raw.call("move", source="a/folder", destination="b/folder")
        folder_text, folder_refused = tool_text(raw.answer(folder_move))
        same_folder = raw.call("write_file", path="a/g.txt", content="atomic\n")
        write = tool_text(raw.answer(same_folder))  # a temp file renamed in its own folder
    assert report["abi"] == 1 and any("REFER" in gap for gap in report["gaps"])
    assert not file_move[1]
    assert (tmp_path / "b" / "f.txt").read_text() == "moved\n"
    assert not (tmp_path / "a" / "f.txt").exists()
    assert not folder_refused, folder_text
    assert (tmp_path / "b" / "folder" / "in.txt").read_text() == "inside\n"
    assert not (tmp_path / "a" / "folder").exists()
    assert not write[1] and (tmp_path / "a" / "g.txt").read_text() == "atomic\n"


def env_with(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def test_the_journal_is_written_under_the_restriction_and_no_start_walks_the_tree(
    tmp_path: Path,
) -> None:
    """The journal (mcp_servers/journal.py) lives outside the roots and is opened before the
    restriction: every act still journals and clears under Landlock. Entries named like the
    server's temp ones that no journal names are never deleted at start (issue 40)."""
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    for number in range(200):
        (root / f".fsagent-{number:016x}.tmp").touch()
    (root / "kept.txt").write_text("kept\n")
    env = {"XDG_DATA_HOME": str(data)}
    with RawServer([root], env=env) as raw:
        assert raw.initialized["capabilities"]["experimental"][CAPABILITY]["holds"]
        answer = raw.ask(
            "tools/call",
            {"name": "write_file", "arguments": {"path": "kept.txt", "content": "new\n"}},
        )
        assert not tool_text(answer)[1], tool_text(answer)
        journals = list((data / "fsagent" / "journal").glob("*/*.journal"))
        assert len(journals) == 1 and journals[0].stat().st_size == 0  # written, then cleared
    assert (root / "kept.txt").read_text() == "new\n"
    assert len(list(root.glob(".fsagent-*.tmp"))) == 200


def test_every_root_is_open_to_the_server_not_only_the_first(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "b.txt").write_text("in the second root\n")
    with RawServer([first, second]) as raw:
        assert raw.initialized["capabilities"]["experimental"][CAPABILITY]["holds"]
        read = tool_text(raw.answer(raw.call("read_file", path=str(second / "b.txt"))))
        wrote = tool_text(
            raw.answer(raw.call("write_file", path=str(second / "c.txt"), content="c\n"))
        )
    assert read == ("in the second root\n", False)
    assert not wrote[1], wrote
    assert (second / "c.txt").read_text() == "c\n"
