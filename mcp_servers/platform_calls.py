"""The few calls the server makes that not every Unix has, each chosen once by feature detection.

Linux has all of them; macOS lacks `O_PATH` (and `preadv` before macOS 11). Where one is
missing, a portable call does the same job, and the one difference a person can notice is
said here:

- **Folders** are held open with `O_PATH` where it exists: that reaches a folder you may enter
  but not list (mode `--x`). Without it a folder is opened `O_RDONLY | O_DIRECTORY`, which needs
  read permission too, so such a folder is refused ("permission denied") as if it were closed.
- **Reads at an offset** use `preadv` into a reused buffer; without it, `pread` and a copy.
- **Holes** (`SEEK_DATA` / `SEEK_HOLE`) exist on Linux and macOS alike; a system or file system
  without them has a sparse file read as data, zeros and all (slower, same bytes).

`FSAGENT_PORTABLE_CALLS=1` makes this module behave as if `O_PATH` and `preadv` did not exist,
so the portable path is tested on Linux: `make test` runs the server's whole suite that way a
second time. The agent is never imported here: the server stands alone.
"""

from __future__ import annotations

import errno
import os

PORTABLE_ENV = "FSAGENT_PORTABLE_CALLS"


def portable_forced() -> bool:
    """Whether the Linux-only calls are to be left unused, as on a system without them."""
    return os.environ.get(PORTABLE_ENV, "") not in ("", "0")


def linux_call(name: str) -> object | None:
    """`os.<name>`, or None where this system (or FSAGENT_PORTABLE_CALLS) has none."""
    if portable_forced():
        return None
    return getattr(os, name, None)


_O_PATH = linux_call("O_PATH")
_PREADV = linux_call("preadv")
_SEEK_DATA = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)

# A folder held for `*at` calls: `O_PATH` needs no read permission; O_RDONLY does.
FOLDER_FLAGS = (
    (_O_PATH if isinstance(_O_PATH, int) else os.O_RDONLY)
    | os.O_DIRECTORY
    | os.O_NOFOLLOW
    | os.O_CLOEXEC
)
FOLDERS_NEED_READ_PERMISSION = not isinstance(_O_PATH, int)


def read_at(fd: int, buffer: bytearray | memoryview, offset: int) -> int:
    """Read into `buffer` from `offset` without moving the file's position; bytes read."""
    if _PREADV is not None:
        return os.preadv(fd, [buffer], offset)
    data = os.pread(fd, len(buffer), offset)
    buffer[: len(data)] = data
    return len(data)


def next_data(fd: int, offset: int, size: int) -> int:
    """Where the next data from `offset` starts (`size` if only a hole is left)."""
    if _SEEK_DATA is None:
        return offset
    try:
        return min(os.lseek(fd, offset, _SEEK_DATA), size)
    except OSError as error:
        if error.errno == errno.ENXIO:  # only a hole from here to the end
            return size
        if error.errno == errno.EINVAL:  # a file system that does not say: all data
            return offset
        raise


def next_hole(fd: int, offset: int, size: int) -> int:
    """Where the data at `offset` ends (`size` when holes are not known here)."""
    if _SEEK_HOLE is None:
        return size
    try:
        return min(os.lseek(fd, offset, _SEEK_HOLE), size)
    except OSError as error:
        if error.errno == errno.EINVAL:
            return size
        raise
