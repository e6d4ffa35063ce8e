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
- **Renames that swap or refuse to replace** (capture.py acts with them on exactly the entry a
  tool checked): Linux's `renameat2` with `RENAME_EXCHANGE` / `RENAME_NOREPLACE` (libc's
  symbol, else the raw syscall), macOS's `renameatx_np` with `RENAME_SWAP` / `RENAME_EXCL`.
  Where neither exists (or a file system refuses the flag), there is no swap, and a rename
  that must not replace checks that the name is free and then renames: an entry another
  process makes under that name in the moment between the two is replaced (a link replaced
  is the link itself; its target is never touched).
- **Files without a name** (`O_TMPFILE`, Linux): a file being written is made in its folder
  with no name, and given its temp name (`linkat` of `/proc/self/fd/N`) only once it is
  written and the folder checked again (replacing.py), so a folder moved out of the roots
  meanwhile takes nothing along. Where the system or the file system has no `O_TMPFILE` (or
  there is no `/proc`), the file is made under its temp name from the start, as before.

`FSAGENT_TEST_NO_TMPFILE=1` takes away `O_TMPFILE` alone (a file system without it).
`FSAGENT_PORTABLE_CALLS=1` makes this module behave as if `O_PATH`, `preadv`, `renameat2`
and `O_TMPFILE` did not exist, so the portable path is tested on Linux: `make test` runs the
server's whole suite that way a second time (Linux has no `renameatx_np` either, so that run is the
fallback's). The agent is never imported here: the server stands alone.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

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
# Test switch: a file system without O_TMPFILE, on a system with renameat2 (some network and
# FUSE file systems): what FSAGENT_PORTABLE_CALLS takes away, O_TMPFILE alone.
NO_TMPFILE_ENV = "FSAGENT_TEST_NO_TMPFILE"
_O_TMPFILE = None if os.environ.get(NO_TMPFILE_ENV) else linux_call("O_TMPFILE")
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


# -- renames that swap two entries, or refuse to replace one --------------------------------------

# Linux's renameat2 flags (linux/fs.h) and its syscall number where libc has no wrapper
# (glibc < 2.28, or a libc that never had one).
LINUX_NOREPLACE, LINUX_EXCHANGE = 1, 2
RENAMEAT2_SYSCALL = {"x86_64": 316, "aarch64": 276}
# macOS's renameatx_np flags (sys/stdio.h).
MACOS_SWAP, MACOS_EXCL = 0x2, 0x4
# A file system (or kernel) that lacks the call or the flag says one of these.
UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})

Rename = Callable[[int, bytes, int, bytes, int], int]  # (from_fd, from, to_fd, to, flags) -> 0/-1


def rename_call() -> tuple[str, Rename, int, int] | None:
    """(name, call, no-replace flag, swap flag) of this system's flagged rename, or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    arguments: list[Any] = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    if sys.platform.startswith("linux") and not portable_forced():
        symbol = getattr(libc, "renameat2", None)
        if symbol is not None:
            symbol.argtypes, symbol.restype = arguments, ctypes.c_int
            return "renameat2", symbol, LINUX_NOREPLACE, LINUX_EXCHANGE
        number = RENAMEAT2_SYSCALL.get(platform.machine())
        if number is not None:
            syscall = libc.syscall
            syscall.argtypes, syscall.restype = [ctypes.c_long, *arguments], ctypes.c_long
            return (
                "renameat2 (syscall)",
                lambda *args: int(syscall(number, *args)),
                LINUX_NOREPLACE,
                LINUX_EXCHANGE,
            )
    symbol = getattr(libc, "renameatx_np", None)
    if symbol is not None:  # macOS 10.12 and later
        symbol.argtypes, symbol.restype = arguments, ctypes.c_int
        return "renameatx_np", symbol, MACOS_EXCL, MACOS_SWAP
    return None


_RENAME = rename_call()
# Which call makes swaps and no-replace renames atomic here; None: the fallback (see above).
RENAME_CALL_NAME = _RENAME[0] if _RENAME else None


def flagged_rename(
    from_folder: int, from_name: str, to_folder: int, to_name: str, which: int
) -> bool:
    """The flagged rename; False where this system or file system does not have it."""
    assert _RENAME is not None
    _, call, _, _ = _RENAME
    done = call(from_folder, os.fsencode(from_name), to_folder, os.fsencode(to_name), which)
    if done == 0:
        return True
    error = ctypes.get_errno()
    if error in UNSUPPORTED:
        return False
    raise OSError(error, os.strerror(error), from_name, None, to_name)


def exchange(folder_a: int, name_a: str, folder_b: int, name_b: str) -> bool:
    """Swap two entries atomically; False (nothing done) where that cannot be done here."""
    if _RENAME is None:
        return False
    return flagged_rename(folder_a, name_a, folder_b, name_b, _RENAME[3])


def rename_no_replace(from_folder: int, from_name: str, to_folder: int, to_name: str) -> None:
    """Rename an entry (a link as itself) to a name that must be free: FileExistsError when
    it is taken. Atomic where the system has the call; else checked, then renamed."""
    if _RENAME is not None and flagged_rename(
        from_folder, from_name, to_folder, to_name, _RENAME[2]
    ):
        return
    try:
        os.stat(to_name, dir_fd=to_folder, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(from_name, to_name, src_dir_fd=from_folder, dst_dir_fd=to_folder)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), to_name)


# -- files made without a name ----------------------------------------------------------------

# An O_TMPFILE file is given a name by linking its /proc/self/fd link (AT_SYMLINK_FOLLOW): unlike
# AT_EMPTY_PATH, that needs no CAP_DAC_READ_SEARCH on kernels before 6.10. Landlock allows it
# into a folder below a root (the right to make a file there) and refuses it elsewhere.
UNNAMED_FILES = isinstance(_O_TMPFILE, int) and os.path.isdir("/proc/self/fd")


def open_unnamed(folder: int) -> int | None:
    """A new empty file in `folder` that has no name yet (write-only, mode 0o600), or None
    where this system or the folder's file system cannot make one."""
    if not isinstance(_O_TMPFILE, int) or not UNNAMED_FILES:
        return None
    try:
        return os.open(".", _O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=folder)
    except OSError as error:
        # A file system without it says one of these (EISDIR: a kernel that reads the flag as
        # O_DIRECTORY alone).
        if error.errno in UNSUPPORTED or error.errno == errno.EISDIR:
            return None
        raise


def link_unnamed(fd: int, folder: int, name: str) -> None:
    """Give the unnamed file `fd` the name `name` in `folder` (FileExistsError if taken)."""
    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=folder, follow_symlinks=True)


# -- which mount a folder is on -------------------------------------------------------------------

# statx(2) with STATX_MNT_ID (Linux 5.8): two folders of one device may still be on two mounts
# (a bind mount), and a rename between mounts fails (EXDEV). struct statx: stx_mask at 0,
# stx_mnt_id at 144, 256 bytes in all (linux/stat.h).
STATX_MNT_ID, AT_EMPTY_PATH, STATX_SIZE, STATX_MNT_ID_AT = 0x1000, 0x1000, 256, 144


def statx_call() -> Callable[..., int] | None:
    # Not one of the calls FSAGENT_PORTABLE_CALLS takes away: a system without it (macOS) has
    # no bind mounts either, and the portable pass runs on Linux, where a test mounts one.
    if not sys.platform.startswith("linux"):
        return None
    symbol = getattr(ctypes.CDLL(None, use_errno=True), "statx", None)
    if symbol is None:
        return None
    symbol.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    symbol.restype = ctypes.c_int
    return symbol  # type: ignore[no-any-return]


_STATX = statx_call()


def mount_id(fd: int) -> int | None:
    """The id of the mount the open entry `fd` is on, or None where this system cannot say."""
    if _STATX is None:
        return None
    buffer = ctypes.create_string_buffer(STATX_SIZE)
    if _STATX(fd, b"", AT_EMPTY_PATH, STATX_MNT_ID, buffer) != 0:
        return None
    mask = int.from_bytes(buffer.raw[0:4], sys.byteorder)
    if not mask & STATX_MNT_ID:
        return None
    return int.from_bytes(buffer.raw[STATX_MNT_ID_AT : STATX_MNT_ID_AT + 8], sys.byteorder)
