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

import ctypes
import errno
import os
import select
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import CALL_TIMEOUT, RawServer, tool_text

from mcp_servers.tool_runner import MAX_RUNNING

FAN_CLOEXEC = 0x1
FAN_NONBLOCK = 0x2
FAN_CLASS_CONTENT = 0x4  # permission events need a content (or pre-content) class
FAN_MARK_ADD = 0x1
FAN_OPEN_PERM = 0x00010000
FAN_ALLOW = 0x1
FANOTIFY_METADATA_VERSION = 3
AT_FDCWD = -100
# struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd, pid.
EVENT = struct.Struct("<IBBHQii")
# struct fanotify_response: fd, response.
RESPONSE = struct.Struct("<iI")


class HeldOpens:
    """Every open(2) of one file waits, held here, until `release`."""

    def __init__(self, path: Path) -> None:
        libc = load_fanotify()
        flags = FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK
        self.fd = libc.fanotify_init(flags, os.O_RDONLY | os.O_CLOEXEC | os.O_LARGEFILE)
        if self.fd < 0:
            skip_for("fanotify_init", ctypes.get_errno())
        self.held: list[int] = []  # event descriptors awaiting an answer
        marked = libc.fanotify_mark(
            self.fd, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, os.fsencode(path)
        )
        if marked < 0:
            code = ctypes.get_errno()
            os.close(self.fd)
            skip_for(f"fanotify_mark on {path}", code)

    def wait_for(self, count: int) -> None:
        """Wait until `count` opens are held (the calls have reached their open)."""
        deadline = time.monotonic() + CALL_TIMEOUT  # a guard against a hang, not a measure
        while len(self.held) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"only {len(self.held)} of {count} opens reached the file"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                self.take_events()

    def take_events(self) -> None:
        try:
            data = os.read(self.fd, 64 * EVENT.size)
        except BlockingIOError:
            return
        offset = 0
        while offset + EVENT.size <= len(data):
            length, version, _, _, mask, event_fd, _ = EVENT.unpack_from(data, offset)
            assert version == FANOTIFY_METADATA_VERSION, version
            if mask & FAN_OPEN_PERM and event_fd >= 0:
                self.held.append(event_fd)
            elif event_fd >= 0:
                os.close(event_fd)
            offset += length

    def release(self) -> None:
        """Let every held open go through, and hold no more (the mark goes with the group)."""
        if self.fd < 0:
            return
        try:
            self.take_events()
            while self.held:
                event_fd = self.held.pop()
                try:
                    os.write(self.fd, RESPONSE.pack(event_fd, FAN_ALLOW))
                finally:
                    os.close(event_fd)
        finally:
            os.close(self.fd)  # allows whatever is still pending: nothing stays blocked
            self.fd = -1

    def __enter__(self) -> HeldOpens:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def load_fanotify() -> ctypes.CDLL:
    if os.geteuid() != 0:
        pytest.skip("holding opens with fanotify permission events needs root")
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "fanotify_init"):
        pytest.skip("no fanotify on this platform (Linux only)")
    libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    libc.fanotify_mark.argtypes = [
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint64,
        ctypes.c_int,
        ctypes.c_char_p,
    ]
    return libc


def skip_for(what: str, code: int) -> None:
    # EPERM: no CAP_SYS_ADMIN (a container); ENOSYS/EINVAL: a kernel without permission
    # events; ENODEV/EXDEV/EOPNOTSUPP: a filesystem fanotify cannot mark.
    pytest.skip(
        f"{what} failed ({errno.errorcode.get(code, code)}: {os.strerror(code)}); holding an "
        "open needs fanotify permission events: CAP_SYS_ADMIN and a kernel built with "
        "CONFIG_FANOTIFY_ACCESS_PERMISSIONS"
    )


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
    # The budget (30 s by default) does not run out here: the client cancels. The MCP SDK
    # answers a cancelled request itself, with "Request cancelled" (mcp/shared/session.py,
    # RequestResponder.cancel), while the work goes on until its open returns.
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
