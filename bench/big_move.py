"""A check with its figures: the 300,000-file move beside a second server, by ordinary timing
(issue 40). Before the journal of intent, moving a 300,000-file folder with its `expect` while
a second server started on the same root lost ~100,000 files: the second start swept the
first's set-aside folder. No hook here: server A sets the folder aside and fingerprints it
there (seconds for 300,000 files), server B starts on the root meanwhile (its recovery runs),
and every file must be under the destination afterwards, nothing under a temp name. A loss
fails the run (AssertionError); so does a move that ended before B had started, which
would have checked nothing.

In `make bench`, not the test suite: on this 2-core machine, shared, the tree alone took 21 s
to make in one run and 150 s in another (300 folders of 1,000 empty files, os calls in a
tight loop), the whole check 40 s and 179 s; the move itself 7 to 8 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from bench.common import Row, row, tests_module

FOLDERS, PER_FOLDER = 300, 1_000
FILES = FOLDERS * PER_FOLDER
SLOW_CALL = "600"  # seconds: a move that fingerprints 300,000 files on a loaded machine
WAITED = 600.0
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def make_tree(top: Path) -> None:
    top.mkdir()
    for number in range(FOLDERS):
        folder = top / f"f{number:03}"
        folder.mkdir()
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in range(PER_FOLDER):
                os.close(os.open(f"{name}.txt", FILE_FLAGS, 0o644, dir_fd=fd))
        finally:
            os.close(fd)


def count_files(top: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(top))


def set_aside(root: Path) -> list[str]:
    return [name for name in os.listdir(root) if name.startswith(".fsagent-")]


def measure() -> list[Row]:
    session = tests_module("mcp_session")
    with tempfile.TemporaryDirectory(prefix="fsagent-bench-move-") as temp:
        root, journals = Path(temp) / "root", Path(temp) / "journals"
        root.mkdir()
        env = {session.JOURNAL_ENV: str(journals)}
        started = time.monotonic()
        make_tree(root / "big")
        made = time.monotonic() - started
        with session.FilesystemServer([root], "--call-timeout", SLOW_CALL, env=env) as first:
            args = {"source": "big", "destination": "moved"}
            plan = first.run(first.session.call_tool("plan", {"tool": "move", "args": args}))
            expect = json.loads(session.as_result(plan).text)["paths"]
            moving = time.monotonic()
            call = asyncio.run_coroutine_threadsafe(
                first.session.call_tool("move", {**args, "expect": expect}), first.loop
            )
            # Waited for, not slept on: the folder is set aside once its temp name is there.
            while not set_aside(root) and not call.done():
                time.sleep(0.01)
            second_start = time.monotonic()
            with session.FilesystemServer([root], env=env) as second:  # its recovery runs
                second_started = time.monotonic() - second_start
                overlapped = not call.done()
                second.ok("list_allowed_roots")
            result = session.as_result(call.result(timeout=WAITED))
            moved = time.monotonic() - moving
        assert not result.is_error, result.text
        found = count_files(root / "moved")
        hidden = set_aside(root)
        assert found == FILES and not hidden and not (root / "big").exists(), (
            f"the 300,000-file move lost files: {found:,} of {FILES:,} arrived, set aside: {hidden}"
        )
        assert overlapped, "the move ended before the second server had started: nothing checked"
    goal = "nothing lost (was ~100,000)"
    return [
        row("300,000-file move beside a 2nd server: lost", FILES - found, None, "files", goal),
        row("  the move, with its expect", moved, None, "s", "-"),
        row("  the 2nd server's start, during it", second_started, None, "s", "-"),
        row("  making the 300,000-file tree", made, None, "s", "-"),
    ]
