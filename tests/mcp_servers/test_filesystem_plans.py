"""`plan` and `expect` on the real server over stdio, on real temp folders (issue 19).

`plan` says which path a write call would act on, as the server reads it (the shown form of
names.py decoded: `\\x2f` is `/`), and what is there now; `expect` refuses a write whose
target is no longer what the plan (the person's preview) showed, changing nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp_session import FilesystemServer

from mcp_servers.names import show


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("version 1\n")
    (tmp_path / "fsagent.toml").write_text("# rules\n")
    return tmp_path


def planned(server: FilesystemServer, tool: str, **args: object) -> list[dict]:
    return json.loads(server.ok("plan", tool=tool, args=args))["paths"]


def test_plan_decodes_an_escaped_slash_as_the_write_would(root: Path) -> None:
    with FilesystemServer([root]) as server:
        (entry,) = planned(server, "write_file", path="docs/..\\x2ffsagent.toml", content="x")
        assert entry["path"] == "fsagent.toml"
        assert entry["reads_as_shown"] is False
        assert entry["state"]["exists"] and entry["state"]["size"] == len("# rules\n")
        (plain,) = planned(server, "write_file", path="docs/a.md", content="x")
        assert plain["path"] == "docs/a.md" and plain["reads_as_shown"] is True
        assert (root / "fsagent.toml").read_text() == "# rules\n"  # plan changed nothing


def test_plan_of_a_delete_names_a_link_as_a_link_and_counts_a_folder_whole(root: Path) -> None:
    (root / "link.md").symlink_to("docs/a.md")
    many = root / "many"
    many.mkdir()
    for index in range(1500):
        (many / f"f{index}.txt").write_text("x")
    with FilesystemServer([root]) as server:
        (link,) = planned(server, "delete", path="link.md")
        assert link["state"] == {"exists": True, "type": "symlink", "link": "docs/a.md"}
        (folder,) = planned(server, "delete", path="many", recursive=True)
        assert folder["state"]["files"] == 1500


def test_a_write_whose_file_changed_since_its_plan_is_refused(root: Path) -> None:
    with FilesystemServer([root]) as server:
        expect = planned(server, "write_file", path="docs/a.md", content="version 2\n")
        (root / "docs" / "a.md").write_text("edited by the person\n")
        result = server.call("write_file", path="docs/a.md", content="version 2\n", expect=expect)
        assert result.is_error
        assert result.text.startswith("precondition failed: 'docs/a.md' changed since")
        assert (root / "docs" / "a.md").read_text() == "edited by the person\n"
        fresh = planned(server, "write_file", path="docs/a.md", content="version 2\n")
        server.ok("write_file", path="docs/a.md", content="version 2\n", expect=fresh)
        assert (root / "docs" / "a.md").read_text() == "version 2\n"


def test_a_delete_of_a_file_that_became_a_folder_is_refused(root: Path) -> None:
    (root / "old.log").write_text("11 bytes...")
    with FilesystemServer([root]) as server:
        expect = planned(server, "delete", path="old.log")
        (root / "old.log").unlink()
        (root / "old.log").mkdir()
        for index in range(50):
            (root / "old.log" / f"{index}.txt").write_text("keep")
        result = server.call("delete", path="old.log", recursive=True, expect=expect)
        assert result.is_error and "precondition failed" in result.text
        assert len(list((root / "old.log").iterdir())) == 50


def test_a_folder_delete_is_refused_when_a_file_below_changed(root: Path) -> None:
    with FilesystemServer([root]) as server:
        expect = planned(server, "delete", path="docs", recursive=True)
        (root / "docs" / "new.md").write_text("added after the preview")
        result = server.call("delete", path="docs", recursive=True, expect=expect)
        assert result.is_error and "precondition failed" in result.text
        assert (root / "docs" / "new.md").exists()


def test_a_move_over_a_replaced_destination_is_refused(root: Path) -> None:
    (root / "b.md").write_text("b")
    with FilesystemServer([root]) as server:
        expect = planned(server, "move", source="b.md", destination="docs/a.md", overwrite=True)
        (root / "docs" / "a.md").unlink()
        (root / "docs" / "a.md").symlink_to("../fsagent.toml")
        result = server.call(
            "move", source="b.md", destination="docs/a.md", overwrite=True, expect=expect
        )
        assert result.is_error and "precondition failed" in result.text
        assert (root / "b.md").exists() and (root / "docs" / "a.md").is_symlink()


def test_expect_naming_another_place_is_refused(root: Path) -> None:
    with FilesystemServer([root]) as server:
        expect = planned(server, "write_file", path="docs/a.md", content="x")
        result = server.call("write_file", path="fsagent.toml", content="x", expect=expect)
        assert result.is_error
        assert "is now 'fsagent.toml', the preview showed 'docs/a.md'" in result.text
        assert (root / "fsagent.toml").read_text() == "# rules\n"


def test_a_same_size_edit_is_caught_by_its_sha256(root: Path) -> None:
    with FilesystemServer([root]) as server:
        expect = planned(server, "patch_file", path="docs/a.md", edits=[])
        (root / "docs" / "a.md").write_text("version 9\n")  # same size, other bytes
        edits = [{"old_text": "version", "new_text": "v"}]
        result = server.call("patch_file", path="docs/a.md", edits=edits, expect=expect)
        assert result.is_error and "precondition failed" in result.text
        assert (root / "docs" / "a.md").read_text() == "version 9\n"


def test_plan_of_a_new_path_names_the_folders_a_write_would_create(root: Path) -> None:
    with FilesystemServer([root]) as server:
        (deep,) = planned(server, "write_file", path="new/er/file.txt", content="x")
        assert deep["state"] == {"exists": False} and deep["creates"] == ["new", "new/er"]
        (beside,) = planned(server, "touch", path="docs/b.md")
        assert beside["creates"] == []
        (made,) = planned(server, "make_dir", path="docs/..\\x2fnew")
        assert made["path"] == "new" and made["creates"] == []
        (there,) = planned(server, "write_file", path="docs/a.md", content="x")
        assert "creates" not in there  # it exists: nothing is made on the way
        source, destination = planned(server, "copy", source="docs/a.md", destination="x/y.md")
        assert "creates" not in source and destination["creates"] == ["x"]
    assert sorted(path.name for path in root.iterdir()) == ["docs", "fsagent.toml"]


# -- issue 28: raw paths, a link judged through, the tree compared ------------------------------

ODD_NAMES = [
    "👩\u200d💻 work",  # a ZWJ inside an emoji
    "bidi\u202eevil",  # a right-to-left override
    "back\\slash",
    "new\nline",
    os.fsdecode(b"caf\xe9"),  # Latin-1: not UTF-8
]


@pytest.mark.parametrize("odd", ODD_NAMES, ids=["zwj", "bidi", "backslash", "newline", "latin1"])
def test_the_plan_gives_root_and_relative_raw_through_the_real_transport(
    tmp_path: Path, odd: str
) -> None:
    root = tmp_path / odd
    (root / odd).mkdir(parents=True)
    (root / odd / odd).write_text("version 1\n")
    shown = f"{show(odd)}/{show(odd)}"
    with FilesystemServer([root]) as server:
        text = server.ok("plan", tool="write_file", args={"path": shown, "content": "x"})
        assert text.isprintable() or "\n" in text  # no raw control or surrogate on the wire
        (entry,) = json.loads(text)["paths"]
        assert entry["root"] == str(root) == os.fsdecode(os.fsencode(root))
        assert entry["relative"] == f"{odd}/{odd}" and entry["path"] == shown
        (top,) = planned(server, "touch", path=".")
        assert top["relative"] == "." and top["root"] == str(root)
        expect = [{key: entry[key] for key in ("argument", "path", "state")}]
        server.ok("write_file", path=shown, content="version 2\n", expect=expect)
        elsewhere = [{**expect[0], "path": show(odd)}]  # the folder, not the file in it
        result = server.call("write_file", path=shown, content="version 3\n", expect=elsewhere)
        assert result.is_error and "precondition failed: path is now" in result.text
        server.stderr.seek(0)
        assert "not UTF-8" not in server.stderr.read()  # escaped by the plan itself
    assert (root / odd / odd).read_text() == "version 2\n"


def test_expect_in_raw_form_is_compared_raw(root: Path) -> None:
    with FilesystemServer([root]) as server:
        (entry,) = planned(server, "write_file", path="docs/a.md", content="x")
        raw = [{k: entry[k] for k in ("argument", "root", "relative", "state")}]
        server.ok("write_file", path="docs/a.md", content="version 2\n", expect=raw)
        (now,) = planned(server, "write_file", path="docs/a.md", content="x")
        other = [{**{k: now[k] for k in ("argument", "root", "state")}, "relative": "docs/b.md"}]
        result = server.call("write_file", path="docs/a.md", content="version 3\n", expect=other)
        assert result.is_error and "the preview showed 'docs/b.md'" in result.text
    assert (root / "docs" / "a.md").read_text() == "version 2\n"


def test_the_plan_of_a_write_through_a_link_names_and_protects_what_it_writes(
    root: Path,
) -> None:
    """The plan judges a link the way the write goes: through it. An allow rule on docs/**
    must not let write_file(docs/link) rewrite the rules through docs/link -> ../fsagent.toml."""
    (root / "docs" / "link").symlink_to("../fsagent.toml")
    with FilesystemServer([root], "--protect", str(root / "fsagent.toml")) as server:
        (entry,) = planned(server, "write_file", path="docs/link", content="x")
        assert entry["path"] == "fsagent.toml" and entry["relative"] == "fsagent.toml"
        assert entry["protected"] is True and entry["state"]["type"] == "file"
        (as_link,) = planned(server, "delete", path="docs/link")  # delete takes the link
        assert as_link["path"] == "docs/link" and as_link["protected"] is False
    assert (root / "fsagent.toml").read_text() == "# rules\n"


def test_a_folder_delete_is_refused_after_a_same_size_rewrite_inside(root: Path) -> None:
    """Only the fingerprint ("tree") tells: the count, the sizes and the bytes are the same."""
    (root / "docs" / "b.md").write_text("draft b\n")
    with FilesystemServer([root]) as server:
        expect = planned(server, "delete", path="docs", recursive=True)
        inside = root / "docs" / "a.md"
        before = inside.stat()
        inside.write_text("VERSION 1\n")  # same size
        os.utime(inside, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        result = server.call("delete", path="docs", recursive=True, expect=expect)
        assert result.is_error and "precondition failed: 'docs' changed since" in result.text
    assert inside.read_text() == "VERSION 1\n" and (root / "docs" / "b.md").exists()


def test_a_folder_on_the_way_that_became_a_link_is_refused(root: Path) -> None:
    (root / "elsewhere").mkdir()
    with FilesystemServer([root]) as server:
        expect = planned(server, "write_file", path="docs/a.md", content="x")
        (root / "docs").rename(root / "docs.was")
        (root / "docs").symlink_to("elsewhere")
        result = server.call("write_file", path="docs/a.md", content="x", expect=expect)
        assert result.is_error
        assert "precondition failed: path is now 'elsewhere/a.md'" in result.text
    assert list((root / "elsewhere").iterdir()) == []
    assert (root / "docs.was" / "a.md").read_text() == "version 1\n"


def test_a_copy_whose_source_was_rewritten_in_place_copies_nothing(root: Path) -> None:
    """The bytes copied are hashed as they are copied, from the descriptor checked, and
    compared with the preview: a rewrite of the same file (same inode, same size) is caught,
    and the folders the copy would have made are gone again."""
    args = {"source": "docs/a.md", "destination": "new/deeper/a.md"}
    with FilesystemServer([root]) as server:
        expect = planned(server, "copy", **args)
        with (root / "docs" / "a.md").open("r+") as same_file:
            same_file.write("VERSION 1\n")
        result = server.call("copy", **args, expect=expect)
        assert result.is_error and "precondition failed: 'docs/a.md' changed" in result.text
    assert not (root / "new").exists()
