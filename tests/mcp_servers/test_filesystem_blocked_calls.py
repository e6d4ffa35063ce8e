"""A call whose syscall blocks past its budget: it is answered at the budget, keeps its slot
until its work has really stopped, and while every slot is held so, new calls are answered
`busy:` at once instead of timing out (mcp_servers/tool_runner.py).

Every loop of the server checks its budget, and it opens nothing that can block (FIFOs are
refused, files are opened O_NONBLOCK), so only a blocking syscall can hold a call past its
budget. The test makes one: as root, it puts a fanotify FAN_OPEN_PERM mark on a file inside
the server's root, so the server's open(2) of that file waits until the test answers the
permission event (fanotify(7), "Monitoring filesystems for permission events"; constants
from <linux/fanotify.h>). O_NONBLOCK does not spare an open from a permission event: the
open waits for the listener's answer all the same (checked on this kernel before writing
this). Closing the fanotify descriptor allows every event still pending (fanotify(7): "the
kernel ... allows the access"), so the test can never leave a server blocked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from held_opens import HeldOpens
from mcp_session import CALL_TIMEOUT, RawServer, tool_text

from mcp_servers.tool_runner import MAX_RUNNING


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "held.txt").write_text("held\n")  # written before the mark: never held
    (tmp_path / "free.txt").write_text("free\n")
    yield tmp_path


def read_when_slots_free(raw: RawServer, path: str) -> tuple[str, bool]:
    """read_file `path`, again while the answer is `busy:` (the slots free when the stopped
    calls' threads have returned, a moment after their opens were let through)."""
    deadline = time.monotonic() + CALL_TIMEOUT  # a guard against a hang, not a measure
    while True:
        text, is_error = tool_text(
            raw.ask("tools/call", {"name": "read_file", "arguments": {"path": path}})
        )
        if not text.startswith("busy:") or time.monotonic() > deadline:
            return text, is_error
        time.sleep(0.05)


def test_a_call_blocked_past_its_budget_is_answered_at_the_budget(root: Path) -> None:
    with RawServer([root], "--call-timeout", "1") as raw, HeldOpens(root / "held.txt") as held:
        blocked = raw.call("read_file", path="held.txt")
        held.wait_for(1)
        # The answer comes while the open is still held: at the budget, not when the work ends.
        text, is_error = tool_text(raw.answer(blocked))
        assert is_error and text.startswith("timeout: read_file"), text
        assert "1 s budget" in text and "abandoned" in text
        assert len(held.held) == 1
        # Meanwhile the other slots serve calls as usual.
        free = raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "free.txt"}})
        assert tool_text(free) == ("free\n", False)
        held.release()
        assert read_when_slots_free(raw, "held.txt") == ("held\n", False)


def test_abandoned_calls_keep_their_slots_and_new_calls_are_answered_busy(root: Path) -> None:
    with RawServer([root], "--call-timeout", "1") as raw, HeldOpens(root / "held.txt") as held:
        blocked = [raw.call("read_file", path="held.txt") for _ in range(MAX_RUNNING)]
        held.wait_for(MAX_RUNNING)
        answers = {}
        while len(answers) < MAX_RUNNING:
            answer = raw.next_answer()
            answers[answer["id"]] = tool_text(answer)
        assert sorted(answers) == blocked
        for text, is_error in answers.values():
            assert is_error and text.startswith("timeout: read_file"), text
        # Their work has not stopped (every open is still held), so they keep their slots,
        # and a trivial call is refused at once with `busy:`, not left to time out.
        assert len(held.held) == MAX_RUNNING
        text, is_error = tool_text(
            raw.ask("tools/call", {"name": "list_directory", "arguments": {"path": "."}})
        )
        assert is_error and text.startswith("busy: list_directory was not started"), text
        assert f"all {MAX_RUNNING} tool slots" in text
        assert f"{MAX_RUNNING} of them timed out or cancelled, still stopping" in text
        assert raw.ask("ping")["result"] == {}  # the server itself still answers
        # Once the opens go through, the stopped calls return and free their slots.
        held.release()
        assert read_when_slots_free(raw, "held.txt") == ("held\n", False)
        listed, is_error = tool_text(
            raw.ask("tools/call", {"name": "list_directory", "arguments": {"path": "."}})
        )
        assert not is_error and "held.txt" in listed and "free.txt" in listed


def test_cancelled_calls_still_blocked_keep_their_slots_too(root: Path) -> None:
    # The budget (30 s by default) does not run out here: the client cancels. The transport
    # answers a cancelled request itself, with "Request cancelled" as the MCP SDK would
    # (mcp_servers/cancels.py), while the work goes on until its open returns.
    with RawServer([root]) as raw, HeldOpens(root / "held.txt") as held:
        blocked = [raw.call("read_file", path="held.txt") for _ in range(MAX_RUNNING)]
        held.wait_for(MAX_RUNNING)
        for request_id in blocked:
            raw.cancel(request_id)
        answers = {}
        while len(answers) < MAX_RUNNING:
            answer = raw.next_answer()
            answers[answer["id"]] = answer
        assert sorted(answers) == blocked
        assert all(answer["error"]["message"] == "Request cancelled" for answer in answers.values())
        assert len(held.held) == MAX_RUNNING
        text, is_error = tool_text(
            raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "free.txt"}})
        )
        assert is_error and text.startswith("busy: read_file was not started"), text
        assert f"{MAX_RUNNING} of them timed out or cancelled, still stopping" in text
        held.release()
        assert read_when_slots_free(raw, "free.txt") == ("free\n", False)
