"""A client's cancels never stop the server, and every call gets exactly one answer.

Through the real stdio transport, with raw JSON-RPC lines. Before the fix (mcp_servers/
cancels.py says what the MCP SDK did), 40 grep calls each followed by one cancel got 6-8
answers and the server died with anyio.BrokenResourceError; 200 calls with two cancels each,
19.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from held_opens import HeldOpens
from launcher import Launched
from mcp_session import REPO, RawServer, popen, tool_text
from race_pause import Pauses
from server_log import Log

from mcp_servers.cancels import Cancels
from mcp_servers.race_hook import ANSWER_PAUSE_ENV, RELEASE_PAUSE_ENV
from mcp_servers.tool_runner import MAX_RUNNING

CANCELLED = {"code": 0, "message": "Request cancelled"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cancels")
    for number in range(50):
        (folder / f"f{number}.txt").write_text("hello world\n" * 1000)
    (folder / "big.txt").write_bytes(b"x" * 200_000 + b"\n")
    return folder


def all_answers(raw: RawServer) -> list[dict[str, Any]]:
    """Every answer the server wrote, once it has ended (stdin closed, its stdout read out)."""
    raw.close()
    raw.reader.join(timeout=60)
    found = []
    while not raw.answers.empty():
        message = raw.answers.get()
        if "id" in message:
            found.append(message)
    return found


def is_one_answer(message: dict[str, Any]) -> bool:
    """A call's result (an error result too, e.g. busy:), or the cancelled error."""
    return "result" in message or message.get("error") == CANCELLED


@pytest.mark.parametrize(("calls", "cancels_each"), [(40, 1), (200, 2)])
def test_a_storm_of_cancels_leaves_the_server_answering_each_call_once(
    root: Path, calls: int, cancels_each: int
) -> None:
    with RawServer([root]) as raw:
        asked = []
        for _ in range(calls):
            asked.append(raw.call("grep", pattern="hello", path="."))
            for _ in range(cancels_each):
                raw.cancel(asked[-1])
        last = raw.call("grep", pattern="world", path="f1.txt")  # the server still works
        answers = {raw.next_answer()["id"] for _ in range(calls + 1)}
        assert answers == {*asked, last}
        after = raw.ask("ping")
        assert after["result"] == {}
        rest = all_answers(raw)
        exit_code = raw.process.returncode
    counted = Counter(message["id"] for message in rest)
    assert not counted, f"answers beyond one a call: {counted}"
    assert exit_code == 0


def test_each_call_gets_one_answer_and_a_cancelled_one_is_told_so(
    root: Path, tmp_path: Path
) -> None:
    # The grep is held in its thread, after its work and before it hands its slot back
    # (race_hook.py), so the cancels come while it runs, whatever the machine's speed: a grep
    # of the root left to race them finished first in 3 runs of 10.
    pauses = Pauses(tmp_path / "pause")
    with RawServer([root], env={RELEASE_PAUSE_ENV: str(pauses.folder)}) as raw:
        done = raw.call("read_file", path="f1.txt")
        assert pauses.next_line() == "paused release read_file"
        pauses.go()
        first = raw.answer(done)
        raw.cancel(done)  # a finished call
        raw.cancel(999_999)  # an unknown id
        slow = raw.call("grep", pattern="hello", path=".")
        assert pauses.next_line() == "paused release grep"
        raw.cancel(slow)
        raw.cancel(slow)  # twice
        cancelled = raw.answer(slow)
        pauses.go()
        later = raw.call("read_file", path="f2.txt")
        assert pauses.next_line() == "paused release read_file"
        pauses.go()
        answered = raw.answer(later)
        # The release hook pauses the session's end too: let it go, or the server waits
        # there until the close's 10 s run out and it is killed.
        assert raw.process.stdin is not None
        raw.process.stdin.close()
        assert pauses.next_line() == "paused session over"
        pauses.go()
        rest = all_answers(raw)
        exit_code = raw.process.returncode
    assert tool_text(first)[1] is False
    assert cancelled["error"] == CANCELLED
    assert tool_text(answered) == ("hello world\n" * 1000, False)
    assert rest == []
    assert exit_code == 0


def test_a_second_cancel_read_as_the_first_ones_call_ends_is_not_answered_again(
    root: Path, tmp_path: Path
) -> None:
    # The race of a second cancel with the end of its call, forced: the call's own answer is
    # held before it is dropped (race_hook.py, FSAGENT_TEST_ANSWER_PAUSE), the loop reading
    # on, and the second cancel is read there (the log says when). The request was answered
    # once, "cancelled"; the second cancel must change nothing.
    pauses = Pauses(tmp_path / "pause")
    released = Pauses(tmp_path / "release")
    env = {ANSWER_PAUSE_ENV: str(pauses.folder), RELEASE_PAUSE_ENV: str(released.folder)}
    raw = RawServer([root], "--verbose", env=env, stderr=subprocess.PIPE)
    log = Log(raw.process)
    with raw:
        slow = raw.call("grep", pattern="hello", path=".")
        # Held in its thread after its work, so the cancel comes while it runs whatever the
        # machine's speed: a grep left to race it finished first under load (CPU hogs).
        assert released.next_line() == "paused release grep"
        raw.cancel(slow)
        assert raw.answer(slow)["error"] == CANCELLED
        log.until(f"cancel of request {slow}: 1 answered as cancelled")
        released.go()
        assert pauses.next_line() == f"paused drop {slow}"
        raw.cancel(slow)
        log.until(f"cancel of request {slow}: ")  # read, and answered if it ever is
        pauses.go()
        ping = raw.request("ping")
        assert raw.next_answer() == {"jsonrpc": "2.0", "id": ping, "result": {}}
        # The release hook pauses the session's end too: let it go.
        assert raw.process.stdin is not None
        raw.process.stdin.close()
        assert released.next_line() == "paused session over"
        released.go()
        rest = all_answers(raw)
    pauses.close()
    released.close()
    assert rest == []


def test_a_write_cancelled_while_it_waits_for_a_slot_never_runs(tmp_path: Path) -> None:
    # Every slot is held by a read whose open(2) the test holds (fanotify, as root): the write
    # waits for a slot when its cancel comes. It is answered cancelled, and once the slots
    # free it does not run.
    (tmp_path / "held.txt").write_text("held\n")
    with RawServer([tmp_path]) as raw, HeldOpens(tmp_path / "held.txt") as held:
        reads = [raw.call("read_file", path="held.txt") for _ in range(MAX_RUNNING)]
        held.wait_for(MAX_RUNNING)
        write = raw.call("write_file", path="never.txt", content="written\n")
        raw.cancel(write)
        assert raw.answer(write)["error"] == CANCELLED
        held.release()
        assert {raw.next_answer()["id"] for _ in reads} == set(reads)
        assert raw.ask("ping")["result"] == {}
        rest = all_answers(raw)
    assert not (tmp_path / "never.txt").exists()
    assert rest == []


@pytest.mark.parametrize(
    "params",
    [None, {}, {"requestId": None}, {"requestId": True}, {"requestId": 1.5}, {"requestId": {}}],
    ids=["no-params", "empty", "null", "bool", "float", "object"],
)
def test_a_malformed_cancel_changes_nothing(root: Path, params: dict[str, Any] | None) -> None:
    with RawServer([root]) as raw:
        call = raw.call("read_file", path="f3.txt")
        raw.notify("notifications/cancelled", params)
        answered = raw.answer(call)
        assert raw.ask("ping")["result"] == {}
        rest = all_answers(raw)
    assert tool_text(answered)[1] is False
    assert rest == []


def test_a_cancel_read_while_answers_cannot_be_written_answers_once(root: Path) -> None:
    # The client does not read: the first answer (200 KB) fills the pipe, so the later calls'
    # answers wait to be written. The cancel of the last one is read meanwhile: it is answered
    # "cancelled" once, and its own answer, when it comes, is dropped.
    process = popen([root])
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        process.stdin.flush()

    send({"id": 0, "method": "initialize", "params": RawServer.hello()})
    assert json.loads(process.stdout.readline())["id"] == 0
    send({"method": "notifications/initialized"})
    for call in range(1, 6):
        arguments = {"name": "read_file", "arguments": {"path": "big.txt"}}
        send({"id": call, "method": "tools/call", "params": arguments})
    send({"method": "notifications/cancelled", "params": {"requestId": 5}})
    send({"id": 6, "method": "ping"})
    answers = [json.loads(process.stdout.readline()) for _ in range(6)]
    process.stdin.close()  # (at the end of stdin, a call still unanswered is abandoned)
    answers += [json.loads(line) for line in process.stdout]
    assert process.wait(timeout=60) == 0
    counted = Counter(answer["id"] for answer in answers)
    assert counted == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[5]["error"] == CANCELLED
    assert all(not by_id[call]["result"].get("isError") for call in range(1, 5))


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    (tmp_path / "huge.txt").write_bytes(b"abcdefgh " * 10_000_000)  # a grep of ~1.5 s
    return tmp_path


def started_server(
    root: Path, stderr: Any, path: str = "huge.txt", env: dict[str, str] | None = None
) -> subprocess.Popen[bytes] | Launched:
    """The server, initialized, with a grep of `path` asked (and not answered yet)."""
    process = popen([root], env=env, stderr=stderr)
    assert process.stdin is not None and process.stdout is not None
    for message in (
        {"id": 0, "method": "initialize", "params": RawServer.hello()},
        {"method": "notifications/initialized"},
        {"id": 1, "method": "tools/call", "params": {"name": "grep", "arguments": {
            "pattern": "zzz", "path": path}}},
    ):  # fmt: skip
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 0
    return process


def test_a_client_that_disconnects_mid_call_ends_the_server_cleanly(
    huge: Path, tmp_path: Path
) -> None:
    with (tmp_path / "stderr").open("w+b") as stderr:
        process = started_server(huge, stderr)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()  # the client is gone: both its ends of the pipes close
        process.stdout.close()
        assert process.wait(timeout=30) == 0
        stderr.seek(0)
        assert stderr.read() == b""


def test_a_call_handed_back_while_the_loop_runs_nothing_still_lets_the_server_end(
    tmp_path: Path,
) -> None:
    # The disconnect above without its timing (race_hook.py, FSAGENT_TEST_RELEASE_PAUSE): the
    # call's thread is held after its work, before it hands its slot back to the loop; the
    # client leaves, and the session ends, the loop held there, running nothing, until the
    # hand-off is done. A thread that waited for the loop to run its release
    # (anyio.from_thread.run_sync) waited there for good, as it did when the loop stopped for
    # good at a disconnect, and the server never ended: 1 run in 6 of the test above.
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "small.txt").write_text("hello\n")
    pauses = Pauses(tmp_path / "pause")
    with (tmp_path / "stderr").open("w+b") as stderr:
        env = {RELEASE_PAUSE_ENV: str(pauses.folder)}
        process = started_server(tmp_path / "root", stderr, path="small.txt", env=env)
        assert process.stdin is not None and process.stdout is not None
        try:
            assert pauses.next_line() == "paused release grep"  # its work is done
            process.stdin.close()  # the client is gone: both its ends of the pipes close
            process.stdout.close()
            assert pauses.next_line() == "paused session over"  # the loop is held
            pauses.go()  # the call hands its slot back...
            pauses.go()  # ...and only then is the loop let go
            exit_code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the server never ended: its call's thread waits for the loop")
        finally:
            process.kill()
            process.wait()
            pauses.close()
        assert exit_code == 0
        stderr.seek(0)
        assert stderr.read() == b""


@pytest.mark.parametrize("closed", ["before its answer", "after its answer"])
def test_a_client_that_stops_reading_ends_the_server_cleanly(tmp_path: Path, closed: str) -> None:
    # It closes our stdout but keeps stdin open, and the thread blocked reading stdin must not
    # hold the process. The close and the call's answer race: this test once asked for a grep
    # of the huge file and closed at once, and the grep (0.1 s since must_contain.py) answered
    # first in one full run under load; the server, which learnt of the close only at an
    # answer it could not write, then waited on stdin for good. Both orders, forced: the call
    # is held before it hands its slot back (race_hook.py) while the client closes, or its
    # answer is read before the close.
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "small.txt").write_text("hello\n")
    pauses = Pauses(tmp_path / "pause")
    with (tmp_path / "stderr").open("w+b") as stderr:
        env = {RELEASE_PAUSE_ENV: str(pauses.folder)}
        process = started_server(tmp_path / "root", stderr, path="small.txt", env=env)
        assert process.stdin is not None and process.stdout is not None
        try:
            assert pauses.next_line() == "paused release grep"
            if closed == "after its answer":
                pauses.go()
                assert json.loads(process.stdout.readline())["id"] == 1
            process.stdout.close()
            if closed == "before its answer":
                pauses.go()
            assert pauses.next_line() == "paused session over", "the session never ended"
            pauses.go()
            exit_code = process.wait(timeout=30)
        finally:
            process.kill()
            process.wait()
            process.stdin.close()
            pauses.close()
        assert exit_code == 0
        stderr.seek(0)
        assert stderr.read() == b""


def test_an_error_in_the_transport_is_one_line_and_verbose_shows_the_traceback(
    tmp_path: Path,
) -> None:
    hello = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        **RawServer.hello()}}) + "\n"  # fmt: skip
    runs = {}
    for flags in ((), ("--verbose",)):
        with open("/dev/full", "wb") as full:  # every write fails: ENOSPC
            runs[flags] = subprocess.run(
                [sys.executable, "-m", "mcp_servers.filesystem", *flags, str(tmp_path)],
                cwd=REPO, input=hello.encode(), stdout=full, stderr=subprocess.PIPE, timeout=60,
            )  # fmt: skip
    quiet, verbose = runs[()], runs[("--verbose",)]
    line = b"mcp_servers.filesystem: stopped: [Errno 28] No space left on device\n"
    assert quiet.returncode == verbose.returncode == 1
    assert quiet.stderr == line
    assert b"Traceback (most recent call last)" in verbose.stderr
    assert verbose.stderr.endswith(line)


# -- Cancels itself: the two orders a cancel and its call's start can come in ------------------


def test_a_cancel_that_comes_before_its_call_starts_stops_it_as_it_starts() -> None:
    cancels = Cancels()

    async def call_after_its_cancel() -> tuple[bool, bool]:
        cancels.cancel(7)  # the transport read the cancel before the SDK started the call
        with cancels.watch(7) as scope:
            await anyio.sleep(60)
        with cancels.watch(7) as later:  # the cancel was for that call only
            await anyio.lowlevel.checkpoint()
        return scope.cancelled_caught, later.cancelled_caught

    assert anyio.run(call_after_its_cancel) == (True, False)


def test_a_cancel_of_a_request_whose_call_never_ran_is_forgotten_with_it() -> None:
    cancels = Cancels()

    async def id_used_again() -> bool:
        cancels.cancel(8)  # a ping, say: no call ever watches it
        cancels.forget(8)  # its answer went (dropped): the id may come again
        with cancels.watch(8) as scope:
            await anyio.lowlevel.checkpoint()
        return scope.cancelled_caught

    assert anyio.run(id_used_again) is False


def test_a_cancel_of_a_running_call_stops_it() -> None:
    cancels = Cancels()

    async def running_then_cancelled() -> bool:
        async with anyio.create_task_group() as tasks:
            caught: list[bool] = []

            async def call() -> None:
                with cancels.watch("id") as scope:
                    started.set()
                    await anyio.sleep(60)
                caught.append(scope.cancelled_caught)

            started = anyio.Event()
            tasks.start_soon(call)
            await started.wait()
            cancels.cancel("id")
        return caught == [True] and not cancels.running

    assert anyio.run(running_then_cancelled)
