"""Links stay inside: a move that would leave a relative symlink pointing outside the roots is
refused and moves nothing; a move that keeps every link inside goes through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[FilesystemServer, Path, Path]]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "c").mkdir()
    (root / "deep" / "one" / "two").mkdir(parents=True)
    outside.mkdir()
    (root / "shared.txt").write_text("shared inside\n")
    (outside / "shared.txt").write_text("outside\n")
    os.symlink("../../shared.txt", root / "a" / "b" / "link")  # root/shared.txt
    os.symlink("../../../shared.txt", root / "deep" / "one" / "two" / "link")
    os.symlink("two/link", root / "deep" / "one" / "chain")  # a link through a moved link
    with FilesystemServer([root]) as server:
        yield server, root, outside


def test_a_relative_link_moved_to_another_depth_is_refused(layout) -> None:
    server, root, _ = layout
    result = server.call("move", source="a/b/link", destination="link_at_top")
    assert result.is_error and result.text.startswith("move refused: symlink 'a/b/link'")
    assert "-> '../../shared.txt'" in result.text and "nothing was moved" in result.text
    assert os.readlink(root / "a" / "b" / "link") == "../../shared.txt"
    assert not os.path.lexists(root / "link_at_top")


def test_a_folder_holding_relative_links_moved_up_is_refused(layout) -> None:
    server, root, _ = layout
    result = server.call("move", source="deep/one", destination="one")
    assert result.is_error and "would point outside the allowed roots" in result.text
    assert "(and 1 more)" in result.text  # the chain through the moved link leaves too
    assert (root / "deep" / "one" / "two" / "link").is_symlink()
    assert not os.path.lexists(root / "one")


def test_moves_that_keep_links_inside_go_through(layout) -> None:
    server, root, _ = layout
    server.ok("move", source="a/b/link", destination="a/c/link")  # the same depth
    assert (root / "a" / "c" / "link").read_text() == "shared inside\n"
    server.ok("move", source="deep/one", destination="a/b/one")  # one level deeper...
    moved = root / "a" / "b" / "one" / "two" / "link"
    assert os.readlink(moved) == "../../../shared.txt"  # ...points at root/a/shared.txt:
    assert not moved.exists()  # dangling, but inside the root
    server.ok("move", source="a/b/one", destination="deep/one")  # and back
    assert (root / "deep" / "one" / "chain").read_text() == "shared inside\n"


def test_a_copy_never_makes_a_link(layout) -> None:
    server, root, _ = layout
    done = server.ok("copy", source="deep", destination="a/deep_copy")
    assert '"deep/one/chain"' in done and '"deep/one/two/link"' in done  # skipped, listed
    assert not [path for path in (root / "a" / "deep_copy").rglob("*") if path.is_symlink()]
    assert server.ok("read_file", path="a/b/link") == "shared inside\n"
