"""A tool slot is given back whatever ends its call (mcp_servers/tool_runner.py).

Issue 40: 200 grep calls each cancelled twice as it starts left every later call answered
`busy: ... all 4 tool slots are taken by earlier calls; 4 of them timed out or cancelled, still
stopping`, for good. A cancel that came after a call took its slot and before its thread began
the work ended the wait for a thread that never ran the work (anyio checks for cancellation
before it hands a function to a worker, and a worker skips a function whose caller is gone),
so nothing ever gave the slot back. The start pause (race_hook.py, FSAGENT_TEST_START_PAUSE)
holds a call at each point between its slot and its work, so each ordering is forced; the
count of slots taken is read from the server's --verbose log (`tool slots: N of 4 taken`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_session import RawServer, tool_text
from race_pause import Pauses
from server_log import SLOTS, Log

from mcp_servers.race_hook import RELEASE_PAUSE_ENV, START_PAUSE_ENV
from mcp_servers.tool_runner import MAX_RUNNING

CANCELLED = {"code": 0, "message": "Request cancelled"}


def verbose_server(root: Path, pauses: Pauses | None = None) -> tuple[RawServer, Log]:
    env = {START_PAUSE_ENV: str(pauses.folder)} if pauses else {}
    raw = RawServer([root], "--verbose", env=env, stderr=subprocess.PIPE)
    return raw, Log(raw.process)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "small.txt").write_text("hello\n")
    return folder


def read_small(raw: RawServer, pauses: Pauses) -> dict[str, Any]:
    """A read through both start pauses: it must run and answer the file."""
    call = raw.call("read_file", path="small.txt")
    assert pauses.next_line() == "paused slot read_file"
    pauses.go()
    assert pauses.next_line() == "paused thread read_file"
    pauses.go()
    return raw.answer(call)


def test_calls_cancelled_after_they_took_a_slot_and_before_a_thread_give_it_back(
    root: Path, tmp_path: Path
) -> None:
    # Each call is held on the loop with its slot taken, its thread not asked for yet, and
    # cancelled there: as many as there are slots. Before the fix the next call was busy.
    pauses = Pauses(tmp_path / "pause")
    raw, log = verbose_server(root, pauses)
    with raw:
        for _ in range(MAX_RUNNING):
            call = raw.call("grep", pattern="hello", path=".")
            assert pauses.next_line() == "paused slot grep"
            raw.cancel(call)  # no `go`: the pause is cancelled while it waits
            assert raw.answer(call)["error"] == CANCELLED
        assert tool_text(read_small(raw, pauses)) == ("hello\n", False)
        assert log.slots_after("read_file", "given back") == 0
    pauses.close()


def test_a_write_cancelled_before_its_thread_claims_the_slot_never_runs(
    root: Path, tmp_path: Path
) -> None:
    # The thread is held after anyio handed it the work and before it claims the slot; the
    # cancel ends the call there. The loop gives the slot back, and the thread, let go, finds
    # the slot given back and never writes (a write answered "cancelled" must not happen).
    pauses = Pauses(tmp_path / "pause")
    raw, log = verbose_server(root, pauses)
    with raw:
        for number in range(MAX_RUNNING):
            call = raw.call("write_file", path=f"never{number}.txt", content="written\n")
            assert pauses.next_line() == "paused slot write_file"
            pauses.go()
            assert pauses.next_line() == "paused thread write_file"
            raw.cancel(call)
            assert raw.answer(call)["error"] == CANCELLED
            pauses.go()
            log.until("tool write_file was not started: its call ended first")
        assert tool_text(read_small(raw, pauses)) == ("hello\n", False)
        assert log.slots_after("read_file", "given back") == 0
    pauses.close()
    assert sorted(path.name for path in root.iterdir()) == ["small.txt"]


def test_a_call_cancelled_while_its_work_runs_keeps_its_slot_until_the_work_stops(
    root: Path, tmp_path: Path
) -> None:
    # The other side: the thread runs the work when the cancel comes (held after it, before
    # it hands its slot back: FSAGENT_TEST_RELEASE_PAUSE), so the slot stays taken, counted as
    # stopping, until the thread returns; given back by the loop as well, it would be given
    # back twice and a fifth call could run beside four working ones.
    pauses = Pauses(tmp_path / "pause")
    env = {RELEASE_PAUSE_ENV: str(pauses.folder)}
    raw = RawServer([root], "--verbose", env=env, stderr=subprocess.PIPE)
    log = Log(raw.process)
    with raw:
        call = raw.call("grep", pattern="hello", path=".")
        assert pauses.next_line() == "paused release grep"
        raw.cancel(call)
        assert raw.answer(call)["error"] == CANCELLED
        assert log.until(SLOTS).group(1, 2, 3, 4) == ("1", "0", "grep", "taken")
        assert log.until(SLOTS).group(1, 2, 3, 4) == ("1", "1", "grep", "left to stop")
        pauses.go()
        assert log.until(SLOTS).group(1, 2, 3, 4) == ("0", "0", "grep", "given back")
        assert raw.process.stdin is not None
        raw.process.stdin.close()
        assert pauses.next_line() == "paused session over"
        pauses.go()
    pauses.close()


def test_after_a_storm_of_cancels_as_calls_start_every_slot_comes_back(tmp_path: Path) -> None:
    # The report's storm, by ordinary timing: 200 greps of a 200,000-line file, each cancelled
    # twice as it starts; it left every slot taken in 4 runs of 5. The tests above force the
    # orderings; this one checks that nothing else keeps a slot.
    (tmp_path / "big.txt").write_text("hello world\n" * 200_000)
    (tmp_path / "small.txt").write_text("hello\n")
    raw, log = verbose_server(tmp_path)
    with raw:
        asked = []
        for _ in range(200):
            asked.append(raw.call("grep", pattern="hello", path="big.txt"))
            raw.cancel(asked[-1])
            raw.cancel(asked[-1])
        last = raw.call("read_file", path="small.txt")
        answers = {raw.next_answer()["id"] for _ in range(len(asked) + 1)}
        assert answers == {*asked, last}
        # Every cancel was read before the last call: no later call takes a slot, so once
        # the last call's slot is back the count only falls, and must reach 0.
        assert log.slots_after("read_file", "given back") == 0
        after = raw.call("read_file", path="small.txt")
        assert tool_text(raw.answer(after)) == ("hello\n", False)
