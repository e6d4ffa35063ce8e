"""The yes and the write act on one object (issue 28): each write tool, for each of its path
arguments, is stopped right before it acts (mcp_servers/race_hook.py, through the real stdio
server), another entry is put under the name there, and the call must then change nothing:
the entry swapped in keeps its bytes, it is back under its name, what it points at is
untouched, and the call is refused in one line.

Each swap is one an attacker makes with the rename(2) any process with write access to the
folder has: a symlink to the rules file, another file renamed over the name, another folder.
The reproductions of the issue are among them (write_file(big.log) while big.log becomes a
link to fsagent.toml; copy(a.txt -> big.bin) while a.txt becomes a link to private/secret.txt;
move and delete while another file is renamed over the name; delete(victim, recursive) while
victim/ is swapped for precious/).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp_session import PORTABLE_ENV, FilesystemServer, Result
from race_pause import paused_server
from tree_entries import entries

from mcp_servers.dirfd import TEMP_NAME

RULES = "# rules: nothing outside docs/**\n"
SECRET = "SECRET, never to be copied\n"
PORTABLE = os.environ.get(PORTABLE_ENV, "") not in ("", "0")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "private").mkdir(parents=True)
    (root / "fsagent.toml").write_text(RULES)
    (root / "big.log").write_text("log, version 1\n")
    (root / "notes.md").write_text("alpha\nbeta\n")
    (root / "a.txt").write_text("a, as previewed\n")
    (root / "big.bin").write_text("big.bin, as previewed\n")
    (root / "other.txt").write_text("another file, never to be touched\n")
    (root / "private" / "secret.txt").write_text(SECRET)
    for folder, text in (("victim", "an old draft\n"), ("precious", "my thesis\n")):
        (root / folder / "sub").mkdir(parents=True)
        (root / folder / "thesis.tex").write_text(text)
        (root / folder / "sub" / "notes.txt").write_text(text)
    return root


def plan(server: FilesystemServer, tool: str, **args: Any) -> list[dict[str, Any]]:
    return json.loads(server.ok("plan", tool=tool, args=args))["paths"]


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry below `folder`; the server's temp entries (`.fsagent-<hex>.tmp`, its file
    being written at a pause) aside."""
    return entries(folder, leaving_out=TEMP_NAME)


def temp_entries(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if TEMP_NAME.fullmatch(path.name)]


def assert_refused(result: Result, shown: str, what: str, previewed: bool = True) -> None:
    assert result.is_error and "\n" not in result.text, result.text
    if previewed:
        lead = f"precondition failed: '{shown}' changed since it was previewed ({what})"
    else:
        lead = f"refused: '{shown}' changed while this call ran ({what})"
    assert result.text.startswith(lead + "; nothing was changed"), result.text


def renamed_over(root: Path, name: str, keep_as: str) -> None:
    """Another file is renamed over `name`; what was there is kept as `keep_as`."""
    os.rename(root / name, root / keep_as)
    os.rename(root / "other.txt", root / name)


@pytest.mark.parametrize("mode", ["write", "append"])
def test_a_write_whose_file_became_a_link_to_the_rules_leaves_the_rules_alone(
    tmp_path: Path, root: Path, mode: str
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "write_file", path="big.log", content="x")
        call = pauses.start(
            server, "write_file", path="big.log", content="OVERWRITTEN\n", mode=mode, expect=expect
        )
        pauses.reached("write_file", "path")
        os.rename(root / "big.log", root / "big.log.was")
        os.symlink("fsagent.toml", root / "big.log")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "fsagent.toml").read_text() == RULES
    assert os.readlink(root / "big.log") == "fsagent.toml"  # the link is back, as it was
    assert snapshot(root) == before  # nothing else written, no temp file left behind
    assert_refused(result, "big.log", "a symlink is there now")


def test_a_patch_whose_file_was_replaced_leaves_the_new_file_alone(
    tmp_path: Path, root: Path
) -> None:
    edits = [{"old_text": "beta", "new_text": "BETA"}]
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "patch_file", path="notes.md", edits=edits)
        call = pauses.start(server, "patch_file", path="notes.md", edits=edits, expect=expect)
        pauses.reached("patch_file", "path")
        renamed_over(root, "notes.md", "notes.md.was")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "notes.md").read_text() == "another file, never to be touched\n"
    assert snapshot(root) == before
    assert_refused(result, "notes.md", "another file is there now")


def test_a_copy_whose_source_became_a_link_to_a_secret_copies_nothing(
    tmp_path: Path, root: Path
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "big.bin", "overwrite": True}
        expect = plan(server, "copy", **args)
        call = pauses.start(server, "copy", **args, expect=expect)
        pauses.reached("copy", "source")
        os.rename(root / "a.txt", root / "a.txt.was")
        os.symlink("private/secret.txt", root / "a.txt")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "big.bin").read_text() == "big.bin, as previewed\n"
    assert snapshot(root) == before
    assert SECRET.encode() not in (root / "big.bin").read_bytes()
    assert_refused(result, "a.txt", "a symlink is there now")


def test_a_copy_whose_source_was_removed_copies_nothing(tmp_path: Path, root: Path) -> None:
    """The entry checked is gone by the act: nothing is copied from the descriptor still open
    on it, so no file appears that no longer exists anywhere."""
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "fresh.txt"}
        expect = plan(server, "copy", **args)
        call = pauses.start(server, "copy", **args, expect=expect)
        pauses.reached("copy", "source")
        os.unlink(root / "a.txt")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert not (root / "fresh.txt").exists()
    assert snapshot(root) == before
    assert_refused(result, "a.txt", "it is gone")


def test_a_copy_over_a_destination_replaced_meanwhile_leaves_it_alone(
    tmp_path: Path, root: Path
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "big.bin", "overwrite": True}
        expect = plan(server, "copy", **args)
        call = pauses.start(server, "copy", **args, expect=expect)
        pauses.reached("copy", "destination")
        renamed_over(root, "big.bin", "big.bin.was")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "big.bin").read_text() == "another file, never to be touched\n"
    assert snapshot(root) == before
    assert_refused(result, "big.bin", "another file is there now")


def test_a_move_whose_source_was_replaced_moves_nothing(tmp_path: Path, root: Path) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "big.bin", "overwrite": True}
        expect = plan(server, "move", **args)
        call = pauses.start(server, "move", **args, expect=expect)
        pauses.reached("move", "source")
        renamed_over(root, "a.txt", "a.txt.was")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "a.txt").read_text() == "another file, never to be touched\n"
    assert (root / "big.bin").read_text() == "big.bin, as previewed\n"
    assert snapshot(root) == before
    assert_refused(result, "a.txt", "another file is there now")


def test_a_move_over_a_destination_replaced_meanwhile_moves_nothing(
    tmp_path: Path, root: Path
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "big.bin", "overwrite": True}
        expect = plan(server, "move", **args)
        call = pauses.start(server, "move", **args, expect=expect)
        pauses.reached("move", "destination")
        renamed_over(root, "big.bin", "big.bin.was")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "big.bin").read_text() == "another file, never to be touched\n"
    # The source was set aside at that pause; it is back.
    assert snapshot(root) == {**before, "a.txt": b"a, as previewed\n"}
    assert_refused(result, "big.bin", "another file is there now")


@pytest.mark.parametrize("previewed", [True, False])
def test_a_delete_whose_file_was_replaced_deletes_nothing(
    tmp_path: Path, root: Path, previewed: bool
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "delete", path="big.bin") if previewed else None
        call = pauses.start(server, "delete", path="big.bin", expect=expect)
        pauses.reached("delete", "path")
        renamed_over(root, "big.bin", "big.bin.was")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "big.bin").read_text() == "another file, never to be touched\n"
    assert snapshot(root) == before
    assert_refused(result, "big.bin", "another file is there now", previewed)


@pytest.mark.parametrize("previewed", [True, False])
def test_a_recursive_delete_whose_folder_was_swapped_keeps_the_thesis(
    tmp_path: Path, root: Path, previewed: bool
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "delete", path="victim", recursive=True) if previewed else None
        call = pauses.start(server, "delete", path="victim", recursive=True, expect=expect)
        pauses.reached("delete", "path")
        os.rename(root / "victim", root / "victim.was")
        os.rename(root / "precious", root / "victim")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "victim" / "thesis.tex").read_text() == "my thesis\n"
    assert snapshot(root) == before
    assert_refused(result, "victim", "another folder is there now", previewed)


def test_a_touch_whose_file_was_replaced_leaves_the_new_file_alone(
    tmp_path: Path, root: Path
) -> None:
    os.utime(root / "other.txt", ns=(1_000_000_000, 1_000_000_000))
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "touch", path="notes.md")
        call = pauses.start(server, "touch", path="notes.md", expect=expect)
        pauses.reached("touch", "path")
        renamed_over(root, "notes.md", "notes.md.was")
        result = pauses.finish(call)
    assert (root / "notes.md").stat().st_mtime_ns == 1_000_000_000  # its time untouched
    assert (root / "notes.md").read_text() == "another file, never to be touched\n"
    assert_refused(result, "notes.md", "another file is there now")


def test_a_new_file_where_a_link_appeared_meanwhile_is_not_written(
    tmp_path: Path, root: Path
) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "write_file", path="new/fresh.txt", content="x")
        call = pauses.start(
            server, "write_file", path="new/fresh.txt", content="OVERWRITTEN\n", expect=expect
        )
        pauses.reached("write_file", "path")
        # The pause comes before the server makes `new` (nothing is made before the check
        # that the folders on the way are still those checked): another process makes it.
        (root / "new").mkdir()
        os.symlink("../fsagent.toml", root / "new" / "fresh.txt")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert (root / "fsagent.toml").read_text() == RULES
    assert snapshot(root) == before
    assert_refused(result, "new/fresh.txt", "a symlink appeared there")


def test_a_move_to_a_name_taken_meanwhile_moves_nothing(tmp_path: Path, root: Path) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "move", source="a.txt", destination="fresh.txt")
        call = pauses.start(server, "move", source="a.txt", destination="fresh.txt", expect=expect)
        pauses.reached("move", "destination")
        os.rename(root / "other.txt", root / "fresh.txt")
        before = snapshot(root)
        result = pauses.finish(call)
    assert not temp_entries(root)
    assert snapshot(root) == {**before, "a.txt": b"a, as previewed\n"}  # the source is back
    assert_refused(result, "fresh.txt", "a file appeared there")


def test_a_folder_that_gained_an_entry_is_not_deleted_without_recursive(
    tmp_path: Path, root: Path
) -> None:
    (root / "empty").mkdir()
    with paused_server(tmp_path, root) as (server, pauses):
        call = pauses.start(server, "delete", path="empty")
        pauses.reached("delete", "path")
        (root / "empty" / "late.txt").write_text("written after the check\n")
        result = pauses.finish(call)
    assert result.is_error and "is not empty (1 entries inside)" in result.text, result.text
    assert (root / "empty" / "late.txt").read_text() == "written after the check\n"


def test_an_entry_whose_name_was_taken_again_is_kept_and_named(tmp_path: Path, root: Path) -> None:
    """Nothing is ever lost: the entry found under the name cannot go back when the name
    was taken once more meanwhile, so it is kept under a name of its own, which the refusal
    gives (and which no sweep at the next start removes)."""
    with paused_server(tmp_path, root) as (server, pauses):
        expect = plan(server, "delete", path="big.bin")
        call = pauses.start(server, "delete", path="big.bin", expect=expect)
        pauses.reached("delete", "path")
        renamed_over(root, "big.bin", "big.bin.was")
        pauses.go()
        pauses.reached("delete", "path put-back")
        (root / "big.bin").write_text("a third file\n")
        result = pauses.finish(call)
    assert result.is_error and "\n" not in result.text
    kept = result.text.rsplit("is kept as '", 1)[1].rstrip("'")
    assert kept.startswith(".fsagent-kept-")
    assert (root / kept).read_text() == "another file, never to be touched\n"
    assert (root / "big.bin").read_text() == "a third file\n"
    with FilesystemServer([root]) as server:  # a new start sweeps temp entries, not this one
        assert kept in server.ok("list_directory", path=".")
    assert (root / kept).exists()


def test_the_pauses_are_where_each_argument_is_acted_on(tmp_path: Path, root: Path) -> None:
    with paused_server(tmp_path, root) as (server, pauses):
        args = {"source": "a.txt", "destination": "fresh.txt"}
        call = pauses.start(server, "copy", **args)
        pauses.reached("copy", "source")
        assert not pauses.finish(call).is_error
    assert pauses.seen == ["paused copy source", "paused copy destination"]
    assert (root / "fresh.txt").read_text() == "a, as previewed\n"


def test_this_run_swaps_atomically_only_where_the_system_can() -> None:
    """renameat2 on Linux; the portable run (FSAGENT_PORTABLE_CALLS=1, as on a system with
    neither renameat2 nor renameatx_np) takes the fallback README describes."""
    from mcp_servers.platform_calls import RENAME_CALL_NAME

    assert (None if PORTABLE else "renameat2") == RENAME_CALL_NAME
