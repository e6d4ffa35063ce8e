"""Every open(2) of one file held until the test lets it through: a syscall that blocks, made
on purpose (fanotify FAN_OPEN_PERM, as root). tests/mcp_servers/test_filesystem_blocked_calls.py
says how, and why nothing can stay blocked.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import time
from pathlib import Path

import pytest
from mcp_session import CALL_TIMEOUT

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
