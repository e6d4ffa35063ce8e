"""Writes never widen permissions, run as root against files owned by another uid: read-only
files are refused, not replaced; setuid files keep their owner or lose their set-id bits;
a hard link is replaced itself and its other links keep the old content."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as others")

OTHER = 12345  # a uid and gid that are not the server's
NO_CHOWN = ["setpriv", "--bounding-set", "-chown", "--inh-caps", "-chown"]


def owned(path: Path, content: str, mode: int, uid: int = OTHER, gid: int = OTHER) -> Path:
    path.write_text(content)
    os.chown(path, uid, gid)
    os.chmod(path, mode)  # after chown, which clears set-id bits
    return path


def state(path: Path) -> tuple[bytes, int, int, int, int]:
    info = path.lstat()
    return path.read_bytes(), info.st_ino, info.st_mode, info.st_uid, info.st_gid


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("perms")


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[FilesystemServer]:
    with FilesystemServer([root]) as running:
        yield running


def writes_to(name: str) -> list[tuple[str, dict]]:
    edit = [{"old_text": "read", "new_text": "written"}]
    return [
        ("write_file", {"path": name, "content": "replaced\n"}),
        ("write_file", {"path": name, "content": "replaced\n", "dry_run": True}),
        ("write_file", {"path": name, "content": "more\n", "mode": "append"}),
        ("patch_file", {"path": name, "edits": edit}),
        ("patch_file", {"path": name, "edits": edit, "dry_run": True}),
        ("touch", {"path": name}),
        ("copy", {"source": "source.txt", "destination": name, "overwrite": True}),
        ("move", {"source": "source.txt", "destination": name, "overwrite": True}),
    ]


@pytest.mark.parametrize(
    ("uid", "mode"),
    [(OTHER, 0o444), (0, 0o444), (OTHER, 0o4755), (OTHER, 0o644), (0, 0o500)],
    ids=["other_read_only", "own_read_only", "other_setuid", "other_no_write_bit", "own_r_x"],
)
def test_a_file_without_a_write_bit_for_the_server_is_refused(server, root, uid, mode) -> None:
    target = owned(root / f"locked_{uid}_{mode:o}.txt", "read only\n", mode, uid, uid)
    (root / "source.txt").write_text("source\n")
    before = state(target)
    for tool, arguments in writes_to(target.name):
        result = server.call(tool, **arguments)
        assert result.is_error, f"{tool} replaced a file it may not write: {result.text}"
        assert result.text.startswith("refused:") and "no write permission" in result.text
    assert state(target) == before
    assert (root / "source.txt").read_text() == "source\n"
    assert not [path for path in root.iterdir() if path.name.startswith(".fsagent-")]


def test_a_write_keeps_the_owner_and_mode_of_a_file_it_may_write(server, root: Path) -> None:
    target = owned(root / "shared_setuid", "#!/bin/sh\necho read\n", 0o6777)
    written = json.loads(server.ok("write_file", path=target.name, content="#!/bin/sh\n"))
    assert written["size"] == 10 and target.read_text() == "#!/bin/sh\n"
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (OTHER, OTHER, 0o6777)
    server.ok("write_file", path=target.name, content="echo more\n", mode="append")
    server.ok("patch_file", path=target.name, edits=[{"old_text": "more", "new_text": "less"}])
    assert target.read_text() == "#!/bin/sh\necho less\n"
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (OTHER, OTHER, 0o6777)
    group_owned = owned(root / "group_writable", "team\n", 0o2664, uid=OTHER, gid=0)
    server.ok("write_file", path=group_owned.name, content="team, edited\n")
    info = group_owned.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (OTHER, 0, 0o2664)


def test_when_the_owner_cannot_be_kept_setuid_and_setgid_are_cleared(tmp_path: Path) -> None:
    target = owned(tmp_path / "tool", "#!/bin/sh\necho old\n", 0o6777)
    with FilesystemServer([tmp_path], wrapper=NO_CHOWN) as server:  # root without CAP_CHOWN
        server.ok("write_file", path="tool", content="#!/bin/sh\necho model\n")
    info = target.stat()
    assert target.read_text() == "#!/bin/sh\necho model\n"
    assert info.st_uid == 0  # the owner could not be kept...
    assert stat.S_IMODE(info.st_mode) == 0o777  # ...so the set-id bits went


def test_a_copy_never_makes_a_setuid_file(server, root: Path) -> None:
    source = owned(root / "setuid_source", "#!/bin/sh\n", 0o4777)
    copied = json.loads(server.ok("copy", source=source.name, destination="setuid_copy"))
    assert copied["bytes"] == 10
    info = (root / "setuid_copy").stat()
    umask = os.umask(0o022)  # the server's, inherited from this process
    os.umask(umask)
    assert stat.S_IMODE(info.st_mode) == 0o777 & ~umask and info.st_uid == 0
    assert not info.st_mode & (stat.S_ISUID | stat.S_ISGID)


def test_a_hard_link_is_a_file_of_the_root_and_a_write_replaces_only_it(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    original = owned(outside / "original.txt", "shared content\nline two\n", 0o666)
    for name in ("write.txt", "append.txt", "patch.txt", "info.txt"):
        os.link(original, root / name)
    with FilesystemServer([root]) as server:
        assert server.ok("read_file", path="info.txt") == "shared content\nline two\n"
        assert json.loads(server.ok("get_file_info", path="info.txt"))["hard_links"] == 5
        server.ok("write_file", path="write.txt", content="written\n")
        server.ok("write_file", path="append.txt", content="appended\n", mode="append")
        server.ok("patch_file", path="patch.txt", edits=[{"old_text": "two", "new_text": "2"}])
    assert (root / "write.txt").read_text() == "written\n"
    assert (root / "append.txt").read_text() == "shared content\nline two\nappended\n"
    assert (root / "patch.txt").read_text() == "shared content\nline 2\n"
    assert original.read_text() == "shared content\nline two\n"  # the other links keep it
    assert original.stat().st_nlink == 2  # only info.txt still shares it
    for name in ("write.txt", "append.txt", "patch.txt"):
        info = (root / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode), info.st_nlink) == (OTHER, 0o666, 1)
