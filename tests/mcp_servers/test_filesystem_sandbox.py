"""Every attack class against the sandbox, through the real stdio server.

Each attack must be refused with an error that starts `security_error:` and names the root,
and must leave everything outside the root byte-for-byte unchanged (paths, bytes, modes).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp_session import FilesystemServer

SECRET = "TOP SECRET outside content"
OUTSIDE_NAME = "outside_only_name.txt"


@dataclass(frozen=True)
class Layout:
    root: Path
    evil: Path  # a sibling whose name starts with the root's name
    outside: Path

    def fill(self, template: str) -> str:
        return template.format(root=self.root, evil=self.evil, outside=self.outside)

    @property
    def guarded(self) -> list[Path]:
        return [self.evil, self.outside]


def build_layout(base: Path) -> Layout:
    layout = Layout(root=base / "root", evil=base / "root_evil", outside=base / "outside")
    for folder in (layout.root, layout.evil, layout.outside / "sub"):
        folder.mkdir(parents=True)
    (layout.outside / "secret.txt").write_text(SECRET)
    (layout.outside / OUTSIDE_NAME).write_text(SECRET)
    (layout.outside / "sub" / "deep.txt").write_text(SECRET)
    (layout.outside / "victim.txt").write_text("do not touch\n")
    (layout.evil / "secret.txt").write_text(SECRET)
    root, outside = layout.root, layout.outside
    (root / "inside.txt").write_text("inside\n")
    (root / "folder").mkdir()
    (root / "folder" / "ok.txt").write_text("fine\n")
    links = {
        "link_file": outside / "secret.txt",
        "link_dir": outside,
        "rel_link": Path("..") / "outside" / "secret.txt",
        "link_victim": outside / "victim.txt",
        "chain1": root / "chain2",
        "chain2": root / "chain3",
        "chain3": outside / "secret.txt",
        "dangling": outside / "created_through_link.txt",
        "dangling_dir": outside / "missing_dir",
        "loop_a": root / "loop_b",
        "loop_b": root / "loop_a",
        "folder/escape": outside,
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    return layout


def snapshot(folder: Path) -> dict[str, tuple[Any, ...]]:
    """Every path below `folder` with its kind, content (or link target) and mode."""
    seen: dict[str, tuple[Any, ...]] = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                seen[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                seen[str(path)] = ("dir", info.st_mode)
            else:
                seen[str(path)] = ("file", path.read_bytes(), info.st_mode)
    return seen


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return build_layout(tmp_path_factory.mktemp("sandbox"))


@pytest.fixture(scope="module")
def server(layout: Layout) -> Iterator[FilesystemServer]:
    with FilesystemServer([layout.root]) as running:
        yield running


@pytest.fixture(autouse=True)
def outside_unchanged(layout: Layout) -> Iterator[None]:
    before = [snapshot(folder) for folder in layout.guarded]
    home_file = Path("~/fsagent_escape_test.txt").expanduser()
    yield
    assert [snapshot(folder) for folder in layout.guarded] == before
    assert not home_file.exists()


def assert_refused(server: FilesystemServer, layout: Layout, tool: str, **arguments: Any) -> None:
    result = server.call(tool, **arguments)
    assert result.is_error, f"{tool} {arguments} was not refused: {result.text}"
    assert result.text.startswith("security_error:"), result.text
    assert str(layout.root) in result.text  # names the allowed roots
    assert SECRET not in result.text and "\n" not in result.text


# Paths that leave the root, one per attack class.
OUTSIDE_FILES = {
    "dotdot": "../outside/secret.txt",
    "dotdot_deep": "folder/../../outside/secret.txt",
    "absolute": "{outside}/secret.txt",
    "prefix_sibling": "{evil}/secret.txt",
    "prefix_sibling_dotdot": "../root_evil/secret.txt",
    "home": "~/.bashrc",
    "link_to_file": "link_file",
    "relative_link": "rel_link",
    "link_chain": "chain1",
    "through_link_dir": "link_dir/secret.txt",
    "through_nested_link": "folder/escape/sub/deep.txt",
}
OUTSIDE_FOLDERS = {
    "dotdot": "..",
    "absolute": "{outside}",
    "prefix_sibling": "{evil}",
    "home": "~",
    "link_dir": "link_dir",
    "nested_link_dir": "folder/escape/sub",
}


@pytest.mark.parametrize("path", OUTSIDE_FILES.values(), ids=OUTSIDE_FILES.keys())
@pytest.mark.parametrize("tool", ["read_file", "get_file_info", "file_hash"])
def test_reading_outside_files_is_refused(server, layout: Layout, tool: str, path: str) -> None:
    assert_refused(server, layout, tool, path=layout.fill(path))


@pytest.mark.parametrize("path", OUTSIDE_FILES.values(), ids=OUTSIDE_FILES.keys())
def test_multi_read_and_diff_refuse_outside_files(server, layout: Layout, path: str) -> None:
    assert_refused(server, layout, "read_multiple_files", paths=[layout.fill(path)])
    mixed = server.ok("read_multiple_files", paths=["inside.txt", layout.fill(path)])
    assert "security_error:" in mixed and SECRET not in mixed
    assert_refused(server, layout, "diff_files", path_a="inside.txt", path_b=layout.fill(path))
    assert_refused(server, layout, "diff_files", path_a=layout.fill(path), path_b="inside.txt")


@pytest.mark.parametrize("path", OUTSIDE_FOLDERS.values(), ids=OUTSIDE_FOLDERS.keys())
@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("list_directory", {}),
        ("list_directory_with_sizes", {}),
        ("directory_tree", {}),
        ("search_files", {"pattern": "*"}),
        ("grep", {"pattern": "SECRET"}),
    ],
    ids=["list", "list_sizes", "tree", "search", "grep"],
)
def test_listing_outside_folders_is_refused(server, layout, tool: str, extra, path: str) -> None:
    assert_refused(server, layout, tool, path=layout.fill(path), **extra)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_directory", {"path": "."}),
        ("list_directory", {"path": "folder"}),
        ("list_directory_with_sizes", {"path": "."}),
        ("directory_tree", {"path": ".", "max_depth": 10}),
        ("search_files", {"path": ".", "pattern": "*"}),
        ("search_files", {"path": ".", "pattern": "*secret*"}),
        ("grep", {"pattern": "SECRET"}),
        ("grep", {"pattern": ".", "path": "folder"}),
    ],
)
def test_walks_never_show_what_links_point_at(server, layout, tool: str, arguments) -> None:
    text = server.ok(tool, **arguments)
    for leak in (SECRET, OUTSIDE_NAME, "secret.txt", "deep.txt", str(layout.outside)):
        assert leak not in text, f"{tool} showed {leak!r}: {text}"


WRITE_ATTACKS = {
    "write_dotdot": ("write_file", {"path": "../outside/new.txt", "content": "x"}),
    "write_absolute": ("write_file", {"path": "{outside}/victim.txt", "content": "x"}),
    "write_sibling": ("write_file", {"path": "{evil}/new.txt", "content": "x"}),
    "write_home": ("write_file", {"path": "~/fsagent_escape_test.txt", "content": "x"}),
    "write_link": ("write_file", {"path": "link_victim", "content": "x"}),
    "write_chain": ("write_file", {"path": "chain1", "content": "x"}),
    "write_dangling": ("write_file", {"path": "dangling", "content": "x"}),
    "write_dangling_dir": ("write_file", {"path": "dangling_dir/new.txt", "content": "x"}),
    "write_new_dotdot": ("write_file", {"path": "newdir/../../outside/x.txt", "content": "x"}),
    "write_through_dir": ("write_file", {"path": "link_dir/new.txt", "content": "x"}),
    "write_dry_run": ("write_file", {"path": "link_victim", "content": "x", "dry_run": True}),
    "append_link": ("write_file", {"path": "link_victim", "content": "x", "mode": "append"}),
    "patch_link": (
        "patch_file",
        {"path": "link_victim", "edits": [{"old_text": "do", "new_text": "x"}]},
    ),
    "patch_absolute": (
        "patch_file",
        {"path": "{outside}/victim.txt", "edits": [{"old_text": "do", "new_text": "x"}]},
    ),
    "touch_link": ("touch", {"path": "link_victim"}),
    "touch_dangling": ("touch", {"path": "dangling"}),
    "touch_outside": ("touch", {"path": "{outside}/touched.txt"}),
    "make_dir_dotdot": ("make_dir", {"path": "../outside/made"}),
    "make_dir_dangling": ("make_dir", {"path": "dangling_dir"}),
    "make_dir_through_link": ("make_dir", {"path": "link_dir/made"}),
    "copy_in_file": ("copy", {"source": "{outside}/secret.txt", "destination": "stolen.txt"}),
    "copy_in_link": ("copy", {"source": "link_file", "destination": "stolen.txt"}),
    "copy_in_dir": ("copy", {"source": "link_dir", "destination": "stolen_dir"}),
    "copy_out": ("copy", {"source": "inside.txt", "destination": "{outside}/copied.txt"}),
    "copy_out_link_dir": ("copy", {"source": "inside.txt", "destination": "link_dir/copied.txt"}),
    "copy_over_link": (
        "copy",
        {"source": "inside.txt", "destination": "link_victim", "overwrite": True},
    ),
    "copy_onto_dangling": ("copy", {"source": "inside.txt", "destination": "dangling"}),
    "move_in": ("move", {"source": "{outside}/victim.txt", "destination": "moved_in.txt"}),
    "move_in_through_link": ("move", {"source": "link_dir/victim.txt", "destination": "m.txt"}),
    "move_out": ("move", {"source": "inside.txt", "destination": "{outside}/moved.txt"}),
    "move_out_dotdot": ("move", {"source": "folder", "destination": "../outside/moved"}),
    "move_over_outside": (
        "move",
        {"source": "inside.txt", "destination": "{outside}/victim.txt", "overwrite": True},
    ),
    "move_link_out": ("move", {"source": "link_victim", "destination": "moved_link"}),
    "delete_absolute": ("delete", {"path": "{outside}/victim.txt"}),
    "delete_dotdot": ("delete", {"path": "../outside", "recursive": True}),
    "delete_sibling": ("delete", {"path": "{evil}/secret.txt"}),
    "delete_through_link": ("delete", {"path": "link_dir/victim.txt"}),
    "delete_outside_link": ("delete", {"path": "link_victim"}),
    "delete_root": ("delete", {"path": ".", "recursive": True}),
    "delete_root_absolute": ("delete", {"path": "{root}", "recursive": True}),
    "move_root": ("move", {"source": ".", "destination": "folder/root_moved"}),
    "copy_over_root": (
        "copy",
        {"source": "inside.txt", "destination": "{root}", "overwrite": True},
    ),
}


@pytest.mark.parametrize(("tool", "arguments"), WRITE_ATTACKS.values(), ids=WRITE_ATTACKS.keys())
def test_writes_across_the_boundary_are_refused(server, layout, tool: str, arguments) -> None:
    filled = {
        key: layout.fill(value) if isinstance(value, str) else value
        for key, value in arguments.items()
    }
    assert_refused(server, layout, tool, **filled)
    for name in ("stolen.txt", "stolen_dir", "moved_in.txt", "m.txt", "moved_link"):
        assert not os.path.lexists(layout.root / name)
    assert (layout.root / "inside.txt").read_text() == "inside\n"
    assert (layout.root / "folder" / "ok.txt").exists()


def test_copying_a_folder_with_outside_links_copies_no_outside_content(server, layout) -> None:
    done = server.ok("copy", source="folder", destination="folder_copy")
    # The link is listed by its own path, as every skipped link is; where it leads is not said.
    assert json.loads(done)["skipped_links"] == ["folder/escape"]
    assert str(layout.outside) not in done and SECRET not in done and "deep.txt" not in done
    copied = layout.root / "folder_copy"
    assert sorted(p.name for p in copied.iterdir()) == ["ok.txt"]
    server.ok("delete", path="folder_copy", recursive=True)


def test_deleting_a_folder_with_outside_links_removes_only_the_links(server, layout) -> None:
    victim = layout.root / "holder"
    victim.mkdir()
    os.symlink(layout.outside, victim / "to_outside")
    os.symlink(layout.outside / "victim.txt", victim / "to_victim")
    server.ok("delete", path="holder", recursive=True)
    assert not victim.exists()


def test_symlink_loops_are_clear_errors(server, layout: Layout) -> None:
    for tool, arguments in [
        ("read_file", {"path": "loop_a"}),
        ("write_file", {"path": "loop_a", "content": "x"}),
        ("list_directory", {"path": "loop_b"}),
        ("write_file", {"path": "loop_a/new.txt", "content": "x"}),
    ]:
        result = server.call(tool, **arguments)
        assert result.is_error and "symlink loop" in result.text, result.text
    assert server.ok("list_allowed_roots")


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("write_file", {"path": "nul\x00.txt", "content": "x"}, "path contains a NUL byte"),
        ("read_file", {"path": "../\x00outside/secret.txt"}, "path contains a NUL byte"),
        ("write_file", {"path": "x/" * 3000, "content": "x"}, "path is 6000 characters long"),
        ("write_file", {"path": "n" * 300, "content": "x"}, "'nnn"),
        ("copy", {"source": "inside.txt", "destination": "a" * 5000}, "path is 5000 characters"),
        ("delete", {"path": ""}, "path is empty"),
    ],
    ids=["nul_write", "nul_read", "long_path", "long_name", "long_destination", "empty"],
)
def test_malformed_paths_are_clear_errors(server, layout, tool, arguments, expected) -> None:
    result = server.call(tool, **arguments)
    assert result.is_error and result.text.startswith(expected), result.text
    assert "\n" not in result.text
    assert sorted(p.name for p in layout.root.iterdir() if p.name.startswith("n")) == []


def test_links_that_stay_inside_work(server, layout: Layout) -> None:
    os.symlink(layout.root / "inside.txt", layout.root / "inner_link")
    try:
        assert server.ok("read_file", path="inner_link") == "inside\n"
        assert "inner_link -> inside.txt" in server.ok("list_directory", path=".")
    finally:
        os.unlink(layout.root / "inner_link")
