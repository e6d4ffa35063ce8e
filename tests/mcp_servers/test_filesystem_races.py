"""A race against the sandbox: another process swaps a folder inside the root for a link to an
outside folder, again and again, while every write tool and read_file run on paths through it.

The swap is `renameat2(RENAME_EXCHANGE)` (through ctypes), which exchanges the folder and the
link atomically, so at any moment the name is one or the other. A race may fail a call; it must
never read, write, create or remove anything outside.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_session import FilesystemServer

SECRET = "OUTSIDE SECRET, never to be read"
SWAP_SECONDS = 4.0
AT_FDCWD = -100
RENAME_EXCHANGE = 2

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def exchange(first: Path, second: Path) -> None:
    """Atomically swap two names (renameat2 with RENAME_EXCHANGE)."""
    done = libc.renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), 2)
    if done != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(first))


class Swapper(threading.Thread):
    """Keeps exchanging `folder` and `link` until stopped; counts the swaps."""

    def __init__(self, folder: Path, link: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.link = folder, link
        self.stop = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while not self.stop.is_set():
            exchange(self.folder, self.link)
            self.swaps += 1
            time.sleep(0.0005)  # let the server run between swaps, at many different points


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry below `folder`: kind, bytes or link target, mode."""
    seen: dict[str, Any] = {str(folder): folder.lstat().st_mode}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current, name)
            info = path.lstat()
            if path.is_symlink():
                seen[str(path)] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[str(path)] = ("dir", info.st_mode)
            else:
                seen[str(path)] = ("file", path.read_bytes(), info.st_mode)
    return seen


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in (root / "box" / "sub", outside / "sub"):
        folder.mkdir(parents=True)
    for folder, text in ((root / "box", "inside\n"), (outside, SECRET + "\n")):
        (folder / "victim.txt").write_text(text)
        (folder / "sub" / "deep.txt").write_text(text)
        (folder / "edit.txt").write_text(text + "alpha\n")
    os.symlink(outside, root / "swap")
    yield root, outside


def calls(round_number: int) -> list[tuple[str, dict[str, Any]]]:
    """Every write tool and read_file, on paths that go through the swapped name."""
    n = round_number
    edit = [{"old_text": "alpha", "new_text": f"alpha{n}"}]
    return [
        ("read_file", {"path": "box/victim.txt"}),
        ("read_file", {"path": "box/sub/deep.txt"}),
        ("read_file", {"path": "swap/victim.txt"}),
        ("write_file", {"path": "box/victim.txt", "content": f"round {n}\n"}),
        ("write_file", {"path": f"box/new{n}.txt", "content": "new\n"}),
        ("write_file", {"path": f"box/made{n}/deeper/new.txt", "content": "deep\n"}),
        ("write_file", {"path": "box/sub/deep.txt", "content": "x\n", "mode": "append"}),
        ("write_file", {"path": "swap/victim.txt", "content": "through swap\n"}),
        ("patch_file", {"path": "box/edit.txt", "edits": edit}),
        ("make_dir", {"path": f"box/dir{n}/inner"}),
        ("touch", {"path": f"box/touched{n}"}),
        ("touch", {"path": "box/victim.txt"}),
        ("copy", {"source": "box/victim.txt", "destination": f"box/copy{n}.txt"}),
        ("copy", {"source": "box/sub", "destination": f"box/subcopy{n}"}),
        ("move", {"source": f"box/new{n}.txt", "destination": f"box/moved{n}.txt"}),
        ("move", {"source": "box/edit.txt", "destination": "box/edit.txt.bak"}),
        ("move", {"source": "box/edit.txt.bak", "destination": "box/edit.txt"}),
        ("delete", {"path": f"box/touched{n}"}),
        ("delete", {"path": f"box/dir{n}", "recursive": True}),
        ("delete", {"path": f"box/subcopy{n}", "recursive": True}),
    ]


def test_a_folder_swapped_for_an_outside_link_never_lets_a_call_reach_outside(arena) -> None:
    root, outside = arena
    before = snapshot(outside)
    swapper = Swapper(root / "box", root / "swap")
    answered = failed = rounds = 0
    with FilesystemServer([root]) as server:
        swapper.start()
        deadline = time.monotonic() + SWAP_SECONDS
        try:
            while time.monotonic() < deadline:
                rounds += 1
                for tool, arguments in calls(rounds):
                    result = server.call(tool, **arguments)
                    assert SECRET not in result.text, f"{tool} {arguments}: {result.text}"
                    assert str(outside) not in result.text, f"{tool}: {result.text}"
                    answered += 1
                    failed += result.is_error
        finally:
            swapper.stop.set()
            swapper.join(timeout=10)
        assert server.ok("list_allowed_roots")  # still answering
    assert snapshot(outside) == before  # nothing outside read into, written, made or removed
    assert not list(outside.rglob(".fsagent-*"))
    assert swapper.swaps > 100 and rounds >= 2
    assert 0 < failed < answered  # the race was on: some calls failed, some got through
