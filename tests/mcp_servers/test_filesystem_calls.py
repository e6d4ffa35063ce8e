"""No call can stall the server: each runs off the event loop within its budget, the server
answers pings and other calls meanwhile, and a cancelled call stops its work.

The slow call is real work on a real file: hashing a sparse file of 64 GiB (holes read as
zeros) takes far longer than any budget here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_session import REPO, FilesystemServer, RawServer, cpu_seconds, tool_text

HUGE = 64 * 1024**3
ANSWER_WITHIN = 15.0  # seconds, for a 1-2 s budget: generous, the machine is shared
FIRST_LINE = "first line of a huge sparse file\n"
HEAD = FIRST_LINE.encode() + b"text before the hole\n" * 1000  # over the 8 KiB binary probe


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    path = tmp_path / "huge.log"
    with path.open("wb") as handle:
        handle.write(HEAD)
        handle.truncate(HUGE)  # the rest is a hole: no disk used
    return path


def test_a_call_over_budget_is_a_clear_error_and_the_next_call_answers(huge: Path) -> None:
    with FilesystemServer([huge.parent], "--call-timeout", "1") as server:
        started = time.monotonic()
        result = server.call("file_hash", path=huge.name)
        assert time.monotonic() - started < ANSWER_WITHIN
        assert result.is_error
        assert result.text.startswith("timeout: file_hash stopped at its 1 s budget")
        assert server.ok("read_file", path=huge.name, end_line=1) == FIRST_LINE


def test_a_write_stopped_by_its_budget_changes_nothing(huge: Path) -> None:
    before = huge.stat()
    with FilesystemServer([huge.parent], "--call-timeout", "1") as server:
        result = server.call("write_file", path=huge.name, content="replaced\n")
        assert result.is_error and result.text.startswith("timeout: write_file stopped")
        copied = server.call("copy", source=huge.name, destination="copy.log")
        assert not copied.is_error  # a sparse copy is quick: only the data is copied
    after = huge.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert huge.open("rb").read(len(HEAD)) == HEAD
    assert sorted(path.name for path in huge.parent.iterdir()) == ["copy.log", "huge.log"]


def test_pings_and_other_calls_are_answered_while_a_call_runs_and_cancel_stops_it(
    huge: Path,
) -> None:
    (huge.parent / "small.txt").write_text("small\n")
    with RawServer([huge.parent]) as raw:
        slow = raw.call("file_hash", path=huge.name)
        ping = raw.request("ping")
        assert raw.next_answer() == {"jsonrpc": "2.0", "id": ping, "result": {}}
        read = raw.call("read_file", path="small.txt")
        assert tool_text(raw.answer(read)) == ("small\n", False)
        raw.cancel(slow)
        cancelled = raw.answer(slow, timeout=ANSWER_WITHIN)
        assert "error" in cancelled and "cancel" in cancelled["error"]["message"].lower()
        time.sleep(1.0)  # the worker notices at its next block
        spent = cpu_seconds(raw.pid)
        time.sleep(2.0)
        assert cpu_seconds(raw.pid) - spent < 0.5  # hashing 64 GiB would keep a core busy
        info = json.loads(tool_text(raw.answer(raw.call("get_file_info", path=huge.name)))[0])
        assert info["size"] == HUGE


def test_the_budget_flag_is_checked(tmp_path: Path) -> None:
    for bad in ("0", "soon"):
        done = subprocess.run(
            [sys.executable, "-m", "mcp_servers.filesystem", "--call-timeout", bad, str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2 and "--call-timeout" in done.stderr
