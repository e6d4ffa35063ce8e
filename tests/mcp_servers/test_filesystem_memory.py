"""Memory bounded by the caps, not by the files: every tool touches sparse multi-GiB files (and
a folder of many thousand entries) and the server's peak resident memory, VmHWM in
/proc/PID/status, stays within a small fixed budget.

Sparse files cost no disk: their holes read as zeros. A file whose text head is followed by a
hole is a text file with one line of gigabytes, the case that once took the server to 4 GB.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer, status_kib

GIB = 1024**3
PEAK_BUDGET_KIB = 150 * 1024  # the whole server process: interpreter, libraries and all
LONG_HEAD = b"a" * (3 * 1024 * 1024)  # a 3 MiB first line, then the hole goes on without "\n"
MANY = 20_001  # entries in one folder: more than the walker sorts in memory
TEXT_LINES = 1024 * 1024  # lines of 64 bytes


def sparse(path: Path, head: bytes, size: int) -> Path:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sparse")
    sparse(root / "zeros.bin", b"", 3 * GIB)
    sparse(root / "long_line.txt", LONG_HEAD, 3 * GIB)
    sparse(root / "lines.txt", b"short line\n" * 1000, 2 * GIB)
    (root / "small.txt").write_text("small\n")
    with (root / "text.log").open("w") as handle:  # 64 MiB of real text: grep streams it
        for first in range(0, TEXT_LINES, 65536):
            numbers = range(first, first + 65536)
            handle.write("".join(f"log line {number:08} {'x' * 47}\n" for number in numbers))
    many = root / "many"
    many.mkdir()
    for number in range(MANY):
        os.close(os.open(many / f"f{number:05}", os.O_CREAT | os.O_WRONLY, 0o644))
    return root


@pytest.fixture(scope="module")
def server(tree: Path) -> Iterator[FilesystemServer]:
    # Exec'd: a forked server's peak would count the launcher's pages (tests/mcp_session.py).
    with FilesystemServer([tree], "--call-timeout", "60", exec_=True) as running:
        yield running


def peak_kib(server: FilesystemServer) -> int:
    return status_kib(server.pid, "VmHWM")


def test_reads_of_multi_gib_files_stream(server: FilesystemServer, tree: Path) -> None:
    assert server.ok("read_file", path="zeros.bin").startswith("binary file: zeros.bin")
    long_line = server.ok("read_file", path="long_line.txt")
    assert len(long_line.encode()) <= 256 * 1024
    assert "… [line 1 cut: " in long_line and long_line.startswith("a" * 1000)
    assert server.ok("read_file", path="lines.txt", start_line=1000, end_line=1000) == (
        "short line\n"
    )
    last = server.ok("read_file", path="text.log", start_line=TEXT_LINES)
    assert last == f"log line {TEXT_LINES - 1:08} " + "x" * 47 + "\n"
    many = server.ok("read_multiple_files", paths=["long_line.txt", "zeros.bin", "small.txt"])
    assert len(many.encode()) <= 256 * 1024
    info = json.loads(server.ok("get_file_info", path="long_line.txt"))
    assert info["size"] == 3 * GIB and info["type"] == "file"
    digest = json.loads(server.ok("file_hash", path="lines.txt"))
    assert digest["size"] == 2 * GIB
    assert peak_kib(server) < PEAK_BUDGET_KIB


def test_searches_and_listings_stay_small(server: FilesystemServer) -> None:
    grepped = server.ok("grep", pattern="a+b", path=".")
    assert grepped.startswith("No match") and "binary files skipped" in grepped
    last = f"log line {TEXT_LINES - 1:08}"
    assert server.ok("grep", pattern=last + " x+$").startswith(f"text.log:{TEXT_LINES}:{last}")
    around = server.ok("grep", pattern="x{47}", path="text.log", context=2).splitlines()
    assert len(around) == 203 and around[-2].startswith("text.log-202-log line 00000201")
    listing = server.ok("list_directory", path="many").splitlines()
    assert listing[0] == "[FILE] f00000" and listing[999] == "[FILE] f00999"
    assert listing[-1] == f"(+{MANY - 1000:,} more)"
    sized = server.ok("list_directory_with_sizes", path=".", sort_by="size").splitlines()
    assert sized[0] == f"[FILE] long_line.txt  {3 * GIB:,} bytes"
    assert server.ok("search_files", path=".", pattern="f2000?") == "many/f20000"
    assert server.ok("directory_tree", path=".").splitlines()[-1].startswith("(+")
    assert peak_kib(server) < PEAK_BUDGET_KIB


def test_whole_file_edits_refuse_files_over_the_limit(server: FilesystemServer) -> None:
    edit = [{"old_text": "a", "new_text": "b"}]
    for tool, arguments in [
        ("diff_files", {"path_a": "lines.txt", "path_b": "small.txt"}),
        ("write_file", {"path": "lines.txt", "content": "x", "mode": "append"}),
        ("write_file", {"path": "lines.txt", "content": "x", "mode": "append", "dry_run": True}),
        ("patch_file", {"path": "long_line.txt", "edits": edit}),
        ("patch_file", {"path": "long_line.txt", "edits": edit, "dry_run": True}),
    ]:
        result = server.call(tool, **arguments)
        assert result.is_error, tool
        assert "reads files whole, up to 8 MiB (8,388,608 bytes)" in result.text, result.text
    preview = json.loads(server.ok("write_file", path="lines.txt", content="x\n", dry_run=True))
    assert preview["diff"][0].startswith(f"(the file is {2 * GIB:,} bytes, too large to diff")
    assert peak_kib(server) < PEAK_BUDGET_KIB


def test_copy_keeps_holes_and_writes_stay_small(server: FilesystemServer, tree: Path) -> None:
    copied = json.loads(server.ok("copy", source="long_line.txt", destination="copy.txt"))
    assert copied["bytes"] == 3 * GIB
    copy = tree / "copy.txt"
    assert copy.stat().st_size == 3 * GIB
    assert copy.stat().st_blocks * 512 < 64 * 1024 * 1024  # the hole is still a hole
    with copy.open("rb") as handle:
        assert handle.read(len(LONG_HEAD) + 8) == LONG_HEAD + bytes(8)
    server.ok("touch", path="copy.txt")
    server.ok("make_dir", path="made")
    server.ok("move", source="copy.txt", destination="made/moved.txt")
    server.ok("move", source="made/moved.txt", destination="moved.txt")
    written = json.loads(server.ok("write_file", path="moved.txt", content="now small\n"))
    assert written["old_sha256"] is not None and (tree / "moved.txt").read_text() == "now small\n"
    server.ok("delete", path="moved.txt")
    assert peak_kib(server) < PEAK_BUDGET_KIB


def test_grep_streams_blocks_with_the_right_line_numbers(server: FilesystemServer, tree) -> None:
    lines = [f"line {number} " + "y" * 90 for number in range(40_000)]  # ~4 MiB: four blocks
    lines[11_000] = "needle! at a block boundary, near 1 MiB"
    lines[30_000] = "z" * (3 * 1024 * 1024) + " needle! at the end of a 3 MiB line"
    lines[39_999] = "needle! on the last line, with no newline after it"
    (tree / "blocks.txt").write_text("\n".join(lines))
    found = server.ok("grep", pattern="(\\w+ ?)+! ", path="blocks.txt").splitlines()
    assert [line.split(":")[1] for line in found] == ["11001", "30001", "40000"]
    assert found[0] == "blocks.txt:11001:needle! at a block boundary, near 1 MiB"
    assert found[1] == "blocks.txt:30001:" + "z" * 400 + "… [a line over 1 MiB, cut]"
    around = server.ok("grep", pattern="needle! on", path="blocks.txt", context=1).splitlines()
    assert around == [
        "blocks.txt-39999-line 39998 " + "y" * 90,
        "blocks.txt:40000:needle! on the last line, with no newline after it",
    ]
    (tree / "blocks.txt").unlink()


def test_diffs_of_a_million_lines_show_the_change_in_bounded_memory(server, tree) -> None:
    numbers = "".join(f"{number:07}\n" for number in range(1_000_000))  # 8,000,000 bytes
    (tree / "million_a.txt").write_text(numbers)
    (tree / "million_b.txt").write_text(numbers.replace("0500000\n", "half way\n"))
    (tree / "million_c.txt").write_text(numbers.replace("0", "o"))
    diff = server.ok("diff_files", path_a="million_a.txt", path_b="million_b.txt")
    assert diff.splitlines() == [
        "--- million_a.txt",
        "+++ million_b.txt",
        "@@ -499998,7 +499998,7 @@",
        " 0499997",
        " 0499998",
        " 0499999",
        "-0500000",
        "+half way",
        " 0500001",
        " 0500002",
        " 0500003",
    ]
    edit = [{"old_text": "0999999\n", "new_text": "last\n"}]
    preview = server.ok("patch_file", path="million_a.txt", edits=edit, dry_run=True)
    assert json.loads(preview)["diff"][2:] == [
        "@@ -999997,4 +999997,4 @@",
        " 0999996",
        " 0999997",
        " 0999998",
        "-0999999",
        "+last",
    ]
    everything = server.ok("diff_files", path_a="million_a.txt", path_b="million_c.txt")
    assert everything == (
        "Files million_a.txt and million_c.txt differ: lines 1.. differ: 1,000,000 lines "
        "would become 1,000,000, too many to diff (over 50,000)"
    )
    assert peak_kib(server) < PEAK_BUDGET_KIB
    for name in ("million_a.txt", "million_b.txt", "million_c.txt"):
        (tree / name).unlink()
