"""Normal behaviour of every filesystem tool, through the real stdio server."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("fs")
    first, second = base / "root", base / "second"
    first.mkdir()
    second.mkdir()
    return first, second


@pytest.fixture(scope="module")
def server(roots: tuple[Path, Path]) -> Iterator[FilesystemServer]:
    with FilesystemServer(roots) as running:
        yield running


@pytest.fixture
def work(roots: tuple[Path, Path], request: pytest.FixtureRequest) -> Path:
    """A fresh folder inside the first root for one test; tools see it as `work.name`."""
    folder = roots[0] / request.node.name.replace("[", "_").replace("]", "")
    folder.mkdir()
    return folder


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def as_json(text: str) -> dict:
    return json.loads(text)


# -- read tools ---------------------------------------------------------------------------------


def test_list_allowed_roots_names_every_root(server: FilesystemServer, roots) -> None:
    text = server.ok("list_allowed_roots")
    assert str(roots[0]) in text and str(roots[1]) in text


def test_list_directory_marks_kinds(server: FilesystemServer, work: Path) -> None:
    (work / "a.txt").write_text("a")
    (work / "sub").mkdir()
    os.symlink(work / "a.txt", work / "link")
    text = server.ok("list_directory", path=work.name)
    assert text.splitlines() == ["[FILE] a.txt", f"[LINK] link -> {work.name}/a.txt", "[DIR] sub"]


def test_list_directory_caps_long_listings(server: FilesystemServer, work: Path) -> None:
    for number in range(1005):
        (work / f"f{number:04}").touch()
    lines = server.ok("list_directory", path=work.name).splitlines()
    assert len(lines) == 1001 and lines[-1] == "(+5 more)"


def test_list_directory_with_sizes_sorts_by_size(server: FilesystemServer, work: Path) -> None:
    (work / "small").write_bytes(b"x")
    (work / "big").write_bytes(b"x" * 2000)
    (work / "dir").mkdir()
    text = server.ok("list_directory_with_sizes", path=work.name, sort_by="size")
    lines = text.splitlines()
    assert lines[0] == "[FILE] big  2,000 bytes"
    assert lines[1] == "[FILE] small  1 byte"
    assert lines[-1] == "Total: 2 files, 1 folder, 2,001 bytes"
    by_name = server.ok("list_directory_with_sizes", path=work.name).splitlines()
    assert by_name[:3] == ["[FILE] big  2,000 bytes", "[DIR] dir", "[FILE] small  1 byte"]


def test_list_directory_with_sizes_rejects_unknown_sort(server: FilesystemServer, work) -> None:
    result = server.call("list_directory_with_sizes", path=work.name, sort_by="age")
    assert result.is_error and result.text.startswith("invalid_argument: sort_by")


def test_directory_tree_depth_and_exclude(server: FilesystemServer, work: Path) -> None:
    (work / "a" / "b" / "c").mkdir(parents=True)
    (work / "a" / "b" / "c" / "deep.txt").touch()
    (work / "a" / "top.txt").touch()
    (work / "node_modules").mkdir()
    (work / "node_modules" / "x.js").touch()
    text = server.ok("directory_tree", path=work.name, max_depth=2, exclude=["node_modules"])
    assert text.splitlines() == [f"{work.name}/", "  a/", "    b/", "    top.txt"]


def test_read_file_whole_and_by_lines(server: FilesystemServer, work: Path) -> None:
    (work / "lines.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    assert server.ok("read_file", path=f"{work.name}/lines.txt").startswith("line 1\nline 2\n")
    part = server.ok("read_file", path=f"{work.name}/lines.txt", start_line=3, end_line=4)
    assert part == "line 3\nline 4\n"
    past = server.ok("read_file", path=f"{work.name}/lines.txt", start_line=50)
    assert "has 10 lines" in past


def test_read_file_keeps_crlf(server: FilesystemServer, work: Path) -> None:
    (work / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    assert server.ok("read_file", path=f"{work.name}/dos.txt") == "one\r\ntwo\r\n"


def test_read_file_caps_big_files_and_says_how_to_read_on(server, work: Path) -> None:
    line = "x" * 99 + "\n"
    (work / "big.txt").write_text(line * 5000)  # 500,000 bytes
    text = server.ok("read_file", path=f"{work.name}/big.txt")
    assert len(text.encode()) <= 256 * 1024  # the cap counts the marker too
    kept_lines = text.count(line)
    assert kept_lines > 2500 and text.startswith(line * kept_lines)
    cut = 500_000 - kept_lines * 100
    assert text.endswith(f"… [cut: {cut:,} more bytes; read on with start_line={kept_lines + 1}]")
    rest = server.ok("read_file", path=f"{work.name}/big.txt", start_line=kept_lines + 1)
    assert rest == line * (5000 - kept_lines)


def test_binary_files_are_reported_not_dumped(server: FilesystemServer, work: Path) -> None:
    data = b"\x89PNG\x00\x01\x02" * 10
    (work / "image.png").write_bytes(data)
    (work / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    text = server.ok("read_file", path=f"{work.name}/image.png")
    assert text == f"binary file: {work.name}/image.png (70 bytes, sha256 {sha(data)}); not shown"
    assert server.ok("read_file", path=f"{work.name}/latin1.txt").startswith("binary file:")


def test_read_multiple_files_reports_errors_inline(server: FilesystemServer, work: Path) -> None:
    (work / "a.txt").write_text("alpha")
    (work / "b.txt").write_text("beta")
    text = server.ok(
        "read_multiple_files",
        paths=[f"{work.name}/a.txt", f"{work.name}/missing.txt", f"{work.name}/b.txt"],
    )
    assert f"=== {work.name}/a.txt ===\nalpha" in text
    assert f"=== {work.name}/missing.txt ===\nnot found: {work.name}/missing.txt" in text
    assert f"=== {work.name}/b.txt ===\nbeta" in text
    only_missing = server.call("read_multiple_files", paths=[f"{work.name}/missing.txt"])
    assert only_missing.is_error


def test_get_file_info_and_file_hash(server: FilesystemServer, work: Path) -> None:
    (work / "f.txt").write_bytes(b"hello")
    (work / "f.txt").chmod(0o640)
    info = as_json(server.ok("get_file_info", path=f"{work.name}/f.txt"))
    assert info["type"] == "file" and info["size"] == 5 and info["mode"] == "0o640"
    digest = as_json(server.ok("file_hash", path=f"{work.name}/f.txt"))
    assert digest == {"path": f"{work.name}/f.txt", "sha256": sha(b"hello"), "size": 5}
    assert server.call("file_hash", path=work.name).text == f"{work.name!r} is a folder, not a file"


def test_search_files_matches_names_with_exclude(server: FilesystemServer, work: Path) -> None:
    (work / "src" / "pkg").mkdir(parents=True)
    (work / "src" / "pkg" / "mod.py").touch()
    (work / "src" / "main.py").touch()
    (work / "build").mkdir()
    (work / "build" / "gen.py").touch()
    text = server.ok("search_files", path=work.name, pattern="*.py", exclude=["build"])
    assert text.splitlines() == [f"{work.name}/src/main.py", f"{work.name}/src/pkg/mod.py"]
    by_path = server.ok("search_files", path=work.name, pattern="src/*/*.py")
    assert by_path == f"{work.name}/src/pkg/mod.py"
    assert server.ok("search_files", path=work.name, pattern="*.rs").startswith("No match")


def test_grep_finds_lines_with_numbers_and_context(server: FilesystemServer, work: Path) -> None:
    (work / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (work / "b.txt").write_text("nothing here\nOS in capitals\n")
    (work / "blob.bin").write_bytes(b"os\x00os")
    text = server.ok("grep", pattern=r"\bos\b", path=work.name)
    assert text.splitlines() == [
        f"{work.name}/a.py:1:import os",
        f"{work.name}/a.py:4:    return os.getcwd()",
        "(1 binary files skipped)",
    ]
    folded = server.ok("grep", pattern="^os", path=work.name, ignore_case=True, glob="*.txt")
    assert folded == f"{work.name}/b.txt:2:OS in capitals"
    around = server.ok("grep", pattern="def main", path=f"{work.name}/a.py", context=1)
    assert around.splitlines() == [
        f"{work.name}/a.py-2-",
        f"{work.name}/a.py:3:def main():",
        f"{work.name}/a.py-4-    return os.getcwd()",
    ]


def test_grep_stops_at_max_matches_and_says_so(server: FilesystemServer, work: Path) -> None:
    (work / "many.txt").write_text("hit\n" * 50)
    lines = server.ok("grep", pattern="hit", path=work.name, max_matches=10).splitlines()
    assert len(lines) == 11 and lines[-1].startswith("(+more: stopped after 10 matching lines")


def test_grep_rejects_a_bad_regex(server: FilesystemServer, work: Path) -> None:
    result = server.call("grep", pattern="(unclosed", path=work.name)
    assert result.is_error and result.text.startswith("invalid_argument: bad regular expression")


def test_diff_files_gives_a_unified_diff(server: FilesystemServer, work: Path) -> None:
    (work / "old.txt").write_text("a\nb\nc\n")
    (work / "new.txt").write_text("a\nB\nc\n")
    text = server.ok("diff_files", path_a=f"{work.name}/old.txt", path_b=f"{work.name}/new.txt")
    assert "-b\n+B\n" in text and text.startswith(f"--- {work.name}/old.txt")
    same = server.ok("diff_files", path_a=f"{work.name}/old.txt", path_b=f"{work.name}/old.txt")
    assert same == "Files are identical"


def test_second_root_is_reachable_by_absolute_path(server: FilesystemServer, roots) -> None:
    (roots[1] / "other.txt").write_text("second root")
    assert server.ok("read_file", path=str(roots[1] / "other.txt")) == "second root"


# -- write tools --------------------------------------------------------------------------------


def test_write_file_creates_and_reports_hashes(server: FilesystemServer, work: Path) -> None:
    result = as_json(server.ok("write_file", path=f"{work.name}/new/notes.md", content="hi\n"))
    assert result == {
        "path": f"{work.name}/new/notes.md",
        "size": 3,
        "old_sha256": None,
        "new_sha256": sha(b"hi\n"),
    }
    assert (work / "new" / "notes.md").read_bytes() == b"hi\n"


def test_write_file_append_keeps_mode(server: FilesystemServer, work: Path) -> None:
    target = work / "log.txt"
    target.write_text("one\n")
    target.chmod(0o600)
    result = as_json(
        server.ok("write_file", path=f"{work.name}/log.txt", content="two\n", mode="append")
    )
    assert target.read_text() == "one\ntwo\n"
    assert result["old_sha256"] == sha(b"one\n") and result["new_sha256"] == sha(b"one\ntwo\n")
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in work.iterdir()] == ["log.txt"]  # no temp file left behind


def test_write_file_dry_run_changes_nothing(server: FilesystemServer, work: Path) -> None:
    target = work / "f.txt"
    target.write_text("old line\n")
    result = as_json(
        server.ok("write_file", path=f"{work.name}/f.txt", content="new line\n", dry_run=True)
    )
    assert target.read_text() == "old line\n"
    assert result["dry_run"] is True and result["old_sha256"] == sha(b"old line\n")
    assert "-old line" in result["diff"] and "+new line" in result["diff"]


def test_a_dry_run_diffs_line_endings_and_line_breaks_as_changes(
    server: FilesystemServer, work: Path
) -> None:
    # Issue 41: split with str.splitlines, CRLF -> LF and a newline -> a form feed diffed as
    # "(no change)". Lines are split at "\n" only; a CRLF line keeps its "\r".
    target = work / "f.txt"
    cases = [
        (b"one\r\ntwo\r\n", "one\ntwo\n", ["-one\r", "-two\r", "+one", "+two"]),
        (b"one\ntwo\n", "one\x0ctwo\n", ["-one", "-two", "+one\x0ctwo"]),
        (b"one\ntwo", "one\ntwo\n", [" one", "-two", "\\ No newline at end of file", "+two"]),
    ]
    for old, new, diff in cases:
        target.write_bytes(old)
        result = as_json(
            server.ok("write_file", path=f"{work.name}/f.txt", content=new, dry_run=True)
        )
        assert result["diff"][3:] == diff


def test_write_file_refuses_a_folder(server: FilesystemServer, work: Path) -> None:
    result = server.call("write_file", path=work.name, content="x")
    assert result.is_error and "is a folder" in result.text


def test_patch_file_applies_edits_in_order(server: FilesystemServer, work: Path) -> None:
    target = work / "code.py"
    target.write_text("a = 1\nb = 2\nc = 3\n")
    edits = [
        {"old_text": "a = 1", "new_text": "a = 10"},
        {"old_text": "a = 10\nb", "new_text": "x"},
    ]
    result = as_json(server.ok("patch_file", path=f"{work.name}/code.py", edits=edits))
    assert target.read_text() == "x = 2\nc = 3\n"
    assert result["new_sha256"] == sha(b"x = 2\nc = 3\n")


def test_patch_file_keeps_crlf_and_final_newline(server: FilesystemServer, work: Path) -> None:
    target = work / "dos.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edits = [
        {"old_text": "one\ntwo\n", "new_text": "ONE\nTWO\n"},
        {"old_text": "three\n", "new_text": "3"},
    ]
    server.ok("patch_file", path=f"{work.name}/dos.txt", edits=edits)
    assert target.read_bytes() == b"ONE\r\nTWO\r\n3\r\n"


def test_patch_file_needs_exactly_one_occurrence(server: FilesystemServer, work: Path) -> None:
    target = work / "twice.txt"
    target.write_text("same\nsame\n")
    twice = server.call(
        "patch_file", path=f"{work.name}/twice.txt", edits=[{"old_text": "same", "new_text": "x"}]
    )
    assert twice.is_error and "occurs 2 times" in twice.text
    never = server.call(
        "patch_file", path=f"{work.name}/twice.txt", edits=[{"old_text": "other", "new_text": "x"}]
    )
    assert never.is_error and "not found" in never.text
    assert target.read_text() == "same\nsame\n"


def test_patch_file_is_all_or_nothing(server: FilesystemServer, work: Path) -> None:
    target = work / "f.txt"
    target.write_text("alpha\nbeta\n")
    edits = [{"old_text": "alpha", "new_text": "A"}, {"old_text": "gamma", "new_text": "G"}]
    result = server.call("patch_file", path=f"{work.name}/f.txt", edits=edits)
    assert result.is_error and result.text.startswith("edit 2:")
    assert target.read_text() == "alpha\nbeta\n"


def test_patch_file_refuses_a_stale_hash(server: FilesystemServer, work: Path) -> None:
    target = work / "f.txt"
    target.write_text("v1\n")
    seen = sha(b"v1\n")
    target.write_text("v2 written meanwhile\n")
    result = server.call(
        "patch_file",
        path=f"{work.name}/f.txt",
        expected_sha256=seen,
        edits=[{"old_text": "v2", "new_text": "v3"}],
    )
    assert result.is_error and result.text.startswith("patch refused:")
    assert target.read_text() == "v2 written meanwhile\n"
    current = sha(b"v2 written meanwhile\n")
    server.ok(
        "patch_file",
        path=f"{work.name}/f.txt",
        expected_sha256=current,
        edits=[{"old_text": "v2", "new_text": "v3"}],
    )
    assert target.read_text() == "v3 written meanwhile\n"


def test_patch_file_dry_run_shows_diff(server: FilesystemServer, work: Path) -> None:
    target = work / "f.txt"
    target.write_text("keep\nchange me\n")
    result = as_json(
        server.ok(
            "patch_file",
            path=f"{work.name}/f.txt",
            dry_run=True,
            edits=[{"old_text": "change me", "new_text": "changed"}],
        )
    )
    assert "-change me" in result["diff"] and "+changed" in result["diff"]
    assert target.read_text() == "keep\nchange me\n"


def test_patch_file_rejects_malformed_edits(server: FilesystemServer, work: Path) -> None:
    (work / "f.txt").write_text("x\n")
    result = server.call("patch_file", path=f"{work.name}/f.txt", edits=[{"old": "x"}])
    assert result.is_error and result.text.startswith("invalid_argument: edits.0")


def test_make_dir_and_touch(server: FilesystemServer, work: Path) -> None:
    made = as_json(server.ok("make_dir", path=f"{work.name}/a/b"))
    assert made == {"path": f"{work.name}/a/b", "created": True}
    assert as_json(server.ok("make_dir", path=f"{work.name}/a/b"))["created"] is False
    touched = as_json(server.ok("touch", path=f"{work.name}/a/b/empty.txt"))
    assert touched == {"path": f"{work.name}/a/b/empty.txt", "created": True, "size": 0}
    assert as_json(server.ok("touch", path=f"{work.name}/a/b/empty.txt"))["created"] is False


def test_copy_file_refuses_to_overwrite_without_flag(server: FilesystemServer, work: Path) -> None:
    (work / "src.txt").write_text("source")
    (work / "dst.txt").write_text("destination")
    refused = server.call("copy", source=f"{work.name}/src.txt", destination=f"{work.name}/dst.txt")
    assert refused.is_error and "overwrite=True" in refused.text
    assert (work / "dst.txt").read_text() == "destination"
    done = as_json(
        server.ok(
            "copy",
            source=f"{work.name}/src.txt",
            destination=f"{work.name}/dst.txt",
            overwrite=True,
        )
    )
    assert done["replaced"] is True and (work / "dst.txt").read_text() == "source"


def test_copy_folder_skips_links(server: FilesystemServer, work: Path) -> None:
    (work / "tree" / "sub").mkdir(parents=True)
    (work / "tree" / "sub" / "f.txt").write_text("12345")
    os.symlink(work / "tree" / "sub" / "f.txt", work / "tree" / "link")
    done = as_json(server.ok("copy", source=f"{work.name}/tree", destination=f"{work.name}/copy"))
    assert (done["files"], done["folders"], done["bytes"]) == (1, 1, 5)
    assert done["skipped_links"] == [f"{work.name}/tree/link"]
    assert (work / "copy" / "sub" / "f.txt").read_text() == "12345"
    assert not os.path.lexists(work / "copy" / "link")


def test_move_renames_and_refuses_overwrite(server: FilesystemServer, work: Path) -> None:
    (work / "a.txt").write_text("a")
    (work / "b.txt").write_text("b")
    refused = server.call("move", source=f"{work.name}/a.txt", destination=f"{work.name}/b.txt")
    assert refused.is_error and (work / "b.txt").read_text() == "b"
    done = as_json(
        server.ok("move", source=f"{work.name}/a.txt", destination=f"{work.name}/dir/c.txt")
    )
    assert done == {
        "source": f"{work.name}/a.txt",
        "destination": f"{work.name}/dir/c.txt",
        "type": "file",
        "replaced": False,
    }
    assert (work / "dir" / "c.txt").read_text() == "a" and not (work / "a.txt").exists()


def test_move_acts_on_a_link_not_its_target(server: FilesystemServer, work: Path) -> None:
    (work / "target.txt").write_text("t")
    os.symlink("target.txt", work / "link")
    server.ok("move", source=f"{work.name}/link", destination=f"{work.name}/renamed")
    assert os.readlink(work / "renamed") == "target.txt"
    assert (work / "target.txt").read_text() == "t"


def test_delete_file_link_and_folders(server: FilesystemServer, work: Path) -> None:
    (work / "f.txt").write_text("abc")
    (work / "target.txt").write_text("t")
    os.symlink(work / "target.txt", work / "link")
    (work / "empty").mkdir()
    (work / "full" / "sub").mkdir(parents=True)
    (work / "full" / "sub" / "x").write_text("1234")
    gone = as_json(server.ok("delete", path=f"{work.name}/f.txt"))
    assert gone == {"path": f"{work.name}/f.txt", "type": "file", "files": 1, "bytes": 3}
    assert as_json(server.ok("delete", path=f"{work.name}/link"))["type"] == "symlink"
    assert (work / "target.txt").read_text() == "t"
    assert as_json(server.ok("delete", path=f"{work.name}/empty"))["type"] == "folder"
    refused = server.call("delete", path=f"{work.name}/full")
    assert refused.is_error and "recursive=True" in refused.text and (work / "full").exists()
    gone = as_json(server.ok("delete", path=f"{work.name}/full", recursive=True))
    assert (gone["files"], gone["folders"], gone["bytes"]) == (1, 1, 4)
    assert not (work / "full").exists()


def test_bad_arguments_are_one_line_errors(server: FilesystemServer, work: Path) -> None:
    cases = [
        ("read_file", {"path": 5}, "invalid_argument: path"),
        ("read_file", {}, "invalid_argument: path: Field required"),
        ("read_file", {"path": "a\x00b"}, "path contains a NUL byte"),
        ("read_file", {"path": "a" * 5000}, "path is 5000 characters long"),
        ("read_file", {"path": f"{work.name}/missing"}, "not found"),
        ("read_file", {"path": work.name, "start_line": 0}, "invalid_argument: start_line"),
        ("directory_tree", {"path": ".", "max_depth": 99}, "invalid_argument: max_depth"),
        ("no_such_tool", {}, "Unknown tool"),
    ]
    for name, arguments, expected in cases:
        result = server.call(name, **arguments)
        assert result.is_error, name
        assert result.text.startswith(expected), result.text
        assert "\n" not in result.text
    assert server.ok("list_allowed_roots")  # the server is still up


def test_grep_ignore_case_literal_and_glob_on_paths(server: FilesystemServer, work: Path) -> None:
    (work / "src").mkdir()
    (work / "src" / "a.py").write_text("def Main():\n    pass\n")
    (work / "notes.txt").write_text("MAIN street\n")
    text = server.ok("grep", pattern="main", path=work.name, ignore_case=True)
    assert text.splitlines() == [
        f"{work.name}/notes.txt:1:MAIN street",
        f"{work.name}/src/a.py:1:def Main():",
    ]
    only_src = server.ok("grep", pattern="main", path=work.name, ignore_case=True, glob="src/*")
    assert only_src == f"{work.name}/src/a.py:1:def Main():"
    assert server.ok("grep", pattern="main", path=work.name).startswith("No match")
