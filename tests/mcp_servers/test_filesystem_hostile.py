"""A hostile tree and a hostile model, through the real stdio server: names that are not
UTF-8 or fake lines, FIFOs, sockets and devices, catastrophic regexes, bytes that are not
JSON, and answers of 4-byte characters against the byte caps."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_session import FilesystemServer, RawServer

CAP = 256 * 1024
ANSWER_WITHIN = 15.0  # seconds: generous, the machine is shared; a hang never answers

# -- names ---------------------------------------------------------------------------------------

LATIN1 = b"caf\xe9.txt"  # not UTF-8
FAKE_LINES = "note\n[FILE] injected.txt"  # a newline in a name must not make a listing line
BACKSLASH = "back\\slash.txt"
BIDI = "invoice\u202etxt.exe"  # right-to-left override: shows as 'invoiceexe.txt'


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names")
    (root / "sub").mkdir()
    os.chdir(root)  # bytes paths below are relative to it
    try:
        for raw, content in [
            (LATIN1, b"latin name\n"),
            (b"sub/" + LATIN1, b"nested latin name\n"),
            (FAKE_LINES.encode(), b"newline name\n"),
            (BACKSLASH.encode(), b"backslash name\n"),
            (BIDI.encode(), b"bidi name\n"),
            (b"to_delete_\xff", b"bye\n"),
            (b"to_move_\xfe", b"moving\n"),
        ]:
            with open(raw, "wb") as handle:
                handle.write(content)
    finally:
        os.chdir("/")
    return root


@pytest.fixture(scope="module")
def names_server(named: Path) -> Iterator[FilesystemServer]:
    with FilesystemServer([named]) as running:
        yield running


def test_names_are_listed_escaped_one_line_each(names_server: FilesystemServer) -> None:
    lines = names_server.ok("list_directory", path=".").splitlines()
    assert "[FILE] caf\\xe9.txt" in lines
    assert "[FILE] note\\x0a[FILE] injected.txt" in lines
    assert "[FILE] back\\\\slash.txt" in lines
    assert "[FILE] invoice\\xe2\\x80\\xaetxt.exe" in lines
    assert "[FILE] injected.txt" not in lines
    assert len(lines) == 7  # six files and a folder: no name made an extra line
    sized = names_server.ok("list_directory_with_sizes", path=".").splitlines()
    assert "[FILE] caf\\xe9.txt  11 bytes" in sized and len(sized) == 8


def test_names_are_escaped_in_trees_searches_and_grep(names_server: FilesystemServer) -> None:
    tree = names_server.ok("directory_tree", path=".").splitlines()
    assert "  caf\\xe9.txt" in tree and "    caf\\xe9.txt" in tree
    assert "  note\\x0a[FILE] injected.txt" in tree
    found = names_server.ok("search_files", path=".", pattern="caf*").splitlines()
    assert found == ["caf\\xe9.txt", "sub/caf\\xe9.txt"]
    by_escaped_glob = names_server.ok("search_files", path=".", pattern="*\\xe9.txt")
    assert by_escaped_glob.splitlines() == found
    grepped = names_server.ok("grep", pattern="latin name").splitlines()
    assert grepped == ["caf\\xe9.txt:1:latin name", "sub/caf\\xe9.txt:1:nested latin name"]
    newline = names_server.ok("grep", pattern="newline name")
    assert newline == "note\\x0a[FILE] injected.txt:1:newline name"


def test_escaped_names_read_back_to_the_same_file(names_server: FilesystemServer) -> None:
    assert names_server.ok("read_file", path="caf\\xe9.txt") == "latin name\n"
    assert names_server.ok("read_file", path="sub/caf\\xe9.txt") == "nested latin name\n"
    assert names_server.ok("read_file", path="note\\x0a[FILE] injected.txt") == "newline name\n"
    assert names_server.ok("read_file", path="back\\\\slash.txt") == "backslash name\n"
    assert names_server.ok("read_file", path="invoice\\xe2\\x80\\xaetxt.exe") == "bidi name\n"
    info = json.loads(names_server.ok("get_file_info", path="caf\\xe9.txt"))
    assert info["path"] == "caf\\xe9.txt" and info["size"] == 11
    digest = json.loads(names_server.ok("file_hash", path="caf\\xe9.txt"))
    assert digest["path"] == "caf\\xe9.txt"
    both = names_server.ok("read_multiple_files", paths=["caf\\xe9.txt", "missing\\xff"])
    assert "=== caf\\xe9.txt ===\nlatin name" in both
    assert "=== missing\\xff ===\nnot found: missing\\xff" in both


def test_escaped_names_can_be_moved_written_and_deleted(names_server, named: Path) -> None:
    moved = json.loads(names_server.ok("move", source="to_move_\\xfe", destination="moved.txt"))
    assert moved["source"] == "to_move_\\xfe" and moved["destination"] == "moved.txt"
    assert (named / "moved.txt").read_bytes() == b"moving\n"
    assert not os.path.lexists(os.fsencode(named) + b"/to_move_\xfe")
    written = json.loads(names_server.ok("write_file", path="new_\\xfa.txt", content="made\n"))
    assert written["path"] == "new_\\xfa.txt"
    with open(os.fsencode(named) + b"/new_\xfa.txt", "rb") as made:
        assert made.read() == b"made\n"
    gone = json.loads(names_server.ok("delete", path="to_delete_\\xff"))
    assert gone["path"] == "to_delete_\\xff"
    assert not os.path.lexists(os.fsencode(named) + b"/to_delete_\xff")


def test_errors_name_paths_escaped_on_one_line(names_server: FilesystemServer) -> None:
    result = names_server.call("read_file", path="sub/nothing\\x0a\\xff")
    assert result.is_error and result.text == "not found: sub/nothing\\x0a\\xff"
    refused = names_server.call("read_file", path="../\\xff")
    assert refused.is_error and refused.text.startswith("security_error: '../\\xff'")


# -- FIFOs, sockets and devices -----------------------------------------------------------------

SPECIAL_KINDS = {
    "fifo": "FIFO",
    "socket": "socket",
    "zero_device": "character device",
    "null_device": "character device",
    "random_device": "character device",
    "block_device": "block device",
}


@pytest.fixture(scope="module")
def specials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("specials")
    (root / "plain.txt").write_text("plain text\n")
    os.mkfifo(root / "fifo")
    listener = socket.socket(socket.AF_UNIX)
    # Bound by a name relative to the folder: a socket's path may not pass 107 bytes, and the
    # temp folder's length is the machine's, not the test's.
    cwd = os.getcwd()
    os.chdir(root)
    try:
        listener.bind("socket")
    finally:
        os.chdir(cwd)
    listener.listen()
    if os.geteuid() == 0:  # devices need root; /dev/zero's numbers make an endless reader
        os.mknod(root / "zero_device", stat.S_IFCHR | 0o666, os.makedev(1, 5))
        os.mknod(root / "null_device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(root / "random_device", stat.S_IFCHR | 0o666, os.makedev(1, 8))
        os.mknod(root / "block_device", stat.S_IFBLK | 0o666, os.makedev(7, 0))
    yield root
    listener.close()


@pytest.fixture(scope="module")
def specials_server(specials: Path) -> Iterator[FilesystemServer]:
    with FilesystemServer([specials], "--call-timeout", "5") as running:
        yield running


def special_names(folder: Path) -> list[str]:
    return [name for name in SPECIAL_KINDS if os.path.lexists(folder / name)]


def special_calls(name: str) -> list[tuple[str, dict[str, Any]]]:
    edit = [{"old_text": "a", "new_text": "b"}]
    return [
        ("read_file", {"path": name}),
        ("read_file", {"path": name, "start_line": 5}),
        ("read_multiple_files", {"paths": [name]}),
        ("file_hash", {"path": name}),
        ("diff_files", {"path_a": "plain.txt", "path_b": name}),
        ("diff_files", {"path_a": name, "path_b": "plain.txt"}),
        ("grep", {"pattern": "x", "path": name}),
        ("write_file", {"path": name, "content": "x"}),
        ("write_file", {"path": name, "content": "x", "mode": "append"}),
        ("write_file", {"path": name, "content": "x", "dry_run": True}),
        ("write_file", {"path": name, "content": "x", "mode": "append", "dry_run": True}),
        ("patch_file", {"path": name, "edits": edit}),
        ("patch_file", {"path": name, "edits": edit, "dry_run": True}),
        ("copy", {"source": name, "destination": f"copy_of_{name}"}),
        ("copy", {"source": "plain.txt", "destination": name, "overwrite": True}),
        ("move", {"source": "plain.txt", "destination": name, "overwrite": True}),
    ]


def test_special_files_are_refused_at_once_by_every_tool_that_reads_or_writes(
    specials_server: FilesystemServer, specials: Path
) -> None:
    names = special_names(specials)
    assert "fifo" in names and "socket" in names
    before = {name: specials.joinpath(name).lstat() for name in names}
    for name in names:
        kind = SPECIAL_KINDS[name]
        for tool, arguments in special_calls(name):
            started = time.monotonic()
            result = specials_server.call(tool, **arguments)
            assert time.monotonic() - started < ANSWER_WITHIN, (tool, name)
            assert result.is_error, f"{tool} {arguments} was not refused: {result.text[:200]}"
            assert f"is a {kind}, not a regular file" in result.text, (tool, result.text)
            assert "\n" not in result.text
    for name in names:  # still there, still what they were: nothing replaced them
        now = specials.joinpath(name).lstat()
        assert (now.st_ino, now.st_mode, now.st_rdev) == (
            before[name].st_ino,
            before[name].st_mode,
            before[name].st_rdev,
        )
    assert specials.joinpath("plain.txt").read_text() == "plain text\n"
    assert not [path.name for path in specials.iterdir() if path.name.startswith("copy_of")]
    assert not [path.name for path in specials.iterdir() if path.name.startswith(".fsagent-")]


def test_special_files_show_their_type_and_walks_pass_them_by(specials_server, specials) -> None:
    for name in special_names(specials):
        info = json.loads(specials_server.ok("get_file_info", path=name))
        assert info["type"] == SPECIAL_KINDS[name]
    listing = specials_server.ok("list_directory", path=".").splitlines()
    assert "[OTHER] fifo" in listing and "[FILE] plain.txt" in listing
    assert specials_server.ok("grep", pattern="text") == "plain.txt:1:plain text"
    assert specials_server.ok("search_files", path=".", pattern="*fifo*") == "fifo"


def test_a_folder_copy_skips_special_files(specials_server, specials: Path) -> None:
    (specials / "tree").mkdir()
    (specials / "tree" / "a.txt").write_text("a")
    os.mkfifo(specials / "tree" / "pipe")
    done = json.loads(specials_server.ok("copy", source="tree", destination="tree_copy"))
    assert done["files"] == 1 and done["skipped_other"] == ["tree/pipe"]
    assert sorted(path.name for path in (specials / "tree_copy").iterdir()) == ["a.txt"]


# -- catastrophic regexes -----------------------------------------------------------------------


@pytest.fixture
def regex_server(tmp_path: Path) -> Iterator[tuple[FilesystemServer, Path]]:
    (tmp_path / "evil.txt").write_text("a" * 40 + "!\n")
    (tmp_path / "many.txt").write_text(("a" * 60 + "!\n") * 20_000)
    with FilesystemServer([tmp_path], "--call-timeout", "2") as running:
        yield running, tmp_path


CATASTROPHIC = ["(a+)+$", "(a|aa)+$", "(a|a?)+$", "(.*a){20}$", "^(a+)+b", "(\\w+\\s?)+$"]


def test_catastrophic_regexes_answer_within_budget_and_the_next_call_at_once(
    regex_server: tuple[FilesystemServer, Path],
) -> None:
    server, _ = regex_server
    for pattern in CATASTROPHIC:
        started = time.monotonic()
        result = server.call("grep", pattern=pattern, path="evil.txt")
        assert time.monotonic() - started < ANSWER_WITHIN, pattern
        assert not result.is_error, result.text
        assert result.text.startswith(("No match", "evil.txt:1:")), result.text
        started = time.monotonic()
        assert server.ok("list_allowed_roots")
        assert time.monotonic() - started < ANSWER_WITHIN
    many = server.call("grep", pattern="(a+)+$", path=".", max_matches=10_000)
    assert not many.is_error and many.text.startswith("No match")


def test_regex_syntax_re2_cannot_run_is_one_clear_line(regex_server) -> None:
    server, _ = regex_server
    for pattern, said in [
        ("(a)\\1", "invalid escape sequence"),
        ("(?=a)b", "invalid perl operator"),
        ("(unclosed", "missing )"),
    ]:
        result = server.call("grep", pattern=pattern)
        assert result.is_error and result.text.startswith("invalid_argument: bad regular"), result
        assert said in result.text and "\n" not in result.text
    assert "RE2 syntax" in server.call("grep", pattern="(?<=a)b").text


def test_grep_lines_do_not_span_newlines(regex_server) -> None:
    server, root = regex_server
    (root / "two.txt").write_text("alpha\nbeta\n")
    assert server.ok("grep", pattern="alpha\\sbeta", path="two.txt").startswith("No match")
    assert server.ok("grep", pattern="alpha[^x]beta", path="two.txt").startswith("No match")
    assert server.ok("grep", pattern="^beta$", path="two.txt") == "two.txt:2:beta"


# -- bytes that are not JSON --------------------------------------------------------------------


def test_requests_that_cannot_be_decoded_get_a_json_rpc_error(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("fine\n")
    with RawServer([tmp_path]) as raw:
        lone_surrogate = (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call",'
            b'"params":{"name":"read_file","arguments":{"path":"\\ud800"}}}\n'
        )
        not_utf8 = (
            b'{"jsonrpc":"2.0","id":8,"method":"tools/call",'
            b'"params":{"name":"read_file","arguments":{"path":"\xff\xfe"}}}\n'
        )
        cut_off = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":\n'
        not_json_rpc = b'{"jsonrpc":"2.0","id":"ten","method":"tools/call","params":"x"}\n'
        no_id = b"[1, 2, 3]\n"
        for line, expected_id, code in [
            (lone_surrogate, 7, -32700),
            (not_utf8, 8, -32700),
            (cut_off, 9, -32700),
            (not_json_rpc, "ten", -32600),
            (no_id, None, -32600),
            (b"\x00\x01garbage\n", None, -32700),
        ]:
            raw.send_bytes(line)
            answer = raw.next_answer(timeout=ANSWER_WITHIN)
            assert answer["id"] == expected_id, (line, answer)
            assert answer["error"]["code"] == code, (line, answer)
        assert raw.ask("ping") == {"jsonrpc": "2.0", "id": raw.next_id, "result": {}}
        read = raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "f.txt"}})
        assert read["result"]["content"][0]["text"] == "fine\n"


# -- byte caps with 4-byte characters -----------------------------------------------------------

EMOJI = "\U0001f600"  # 4 bytes in UTF-8


@pytest.fixture(scope="module")
def emoji(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FilesystemServer, Path]]:
    root = tmp_path_factory.mktemp("emoji")
    line = EMOJI * 50 + "\n"  # 201 bytes, 51 characters
    (root / "a.txt").write_text(line * 5000)
    (root / "b.txt").write_text((EMOJI * 49 + "x\n") * 5000)
    (root / "names").mkdir()
    for number in range(1100):
        (root / "names" / f"{number:04}{EMOJI * 62}").touch()  # 252-byte names
    with FilesystemServer([root]) as running:
        yield running, root


def within_cap(text: str) -> None:
    assert len(text.encode("utf-8")) <= CAP, len(text.encode("utf-8"))


def test_answers_of_4_byte_characters_stay_within_the_byte_cap(emoji) -> None:
    server, _ = emoji
    read = server.ok("read_file", path="a.txt")
    within_cap(read)
    assert read.endswith("read on with start_line=" + str(read.count("\n")) + "]")
    within_cap(server.ok("read_multiple_files", paths=["a.txt", "b.txt", "a.txt"]))
    grepped = server.ok("grep", pattern=EMOJI, max_matches=10_000)
    within_cap(grepped)
    assert grepped.splitlines()[-1].startswith("(+more:")
    listing = server.ok("list_directory", path="names")
    within_cap(listing)
    assert listing.splitlines()[-1].startswith("(+")
    within_cap(server.ok("list_directory_with_sizes", path="names"))
    within_cap(server.ok("directory_tree", path="."))
    within_cap(server.ok("search_files", path=".", pattern="*"))
    within_cap(server.ok("diff_files", path_a="a.txt", path_b="b.txt"))
    dry = server.ok("write_file", path="a.txt", content=EMOJI + "\n", dry_run=True)
    within_cap(dry)
    assert json.loads(dry)["diff"][-1].startswith("… [cut:")


def test_a_line_longer_than_the_cap_is_cut_with_a_marker(emoji) -> None:
    server, root = emoji
    (root / "one_line.txt").write_text(EMOJI * 100_000 + "\nsecond\n")  # 400,000-byte line
    text = server.ok("read_file", path="one_line.txt")
    within_cap(text)
    head, marker = text.rsplit("\n", 1)
    assert set(head) == {EMOJI}
    shown = len(head.encode())
    assert marker == (
        f"… [line 1 cut: {400_001 - shown:,} more bytes of it not shown; read on with start_line=2]"
    )
    assert server.ok("read_file", path="one_line.txt", start_line=2) == "second\n"
