"""Opening, reading, hashing and copying regular files, in bounded memory and within budget.

Only regular files are read or written through. An entry is checked before it is opened, and
opened with `O_NONBLOCK | O_NOFOLLOW`, then checked again on the descriptor: a FIFO, socket or
device (or one swapped in after the check) is refused at once instead of blocking the call or
streaming without end, and a link swapped in fails the open.

Every loop here reads a block at a time and checks the call's budget per block.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.budget import check_budget
from mcp_servers.dirfd import changed, entry_stat
from mcp_servers.names import quoted
from mcp_servers.platform_calls import next_data, next_hole, read_at

BINARY_PROBE = 8 * 1024  # a NUL byte in this many leading bytes marks a file as binary
BLOCK = 1024 * 1024  # bytes read, hashed or copied at a time
EDIT_LIMIT = 8 * 1024 * 1024  # files larger than this are not read whole (edits, diffs)
HASH_ON_THE_WAY_UP_TO = 64 * 1024 * 1024  # copies and binary reports hash files up to this
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
ZEROS = bytes(BLOCK)

KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "folder",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def kind_of(mode: int) -> str:
    """The type of an entry, as answers name it."""
    return KINDS.get(stat.S_IFMT(mode), "unknown type")


def not_regular(shown: str, mode: int) -> ToolError:
    kind = kind_of(mode)
    if kind == "folder":
        return ToolError(f"{quoted(shown)} is a folder, not a file")
    article = "an" if kind[0] in "aeiou" else "a"
    return ToolError(
        f"{quoted(shown)} is {article} {kind}, not a regular file; only regular files are "
        "read, hashed, copied or written"
    )


def open_regular(folder: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """(descriptor, stat) of the regular file `name` in `folder`, opened for reading.

    `shown` (raw) names the file in errors.
    """
    found = entry_stat(folder, name)
    if not stat.S_ISREG(found.st_mode):
        raise not_regular(shown, found.st_mode)
    return open_checked(folder, name, shown)


def open_checked(folder: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """Open `name` without blocking or following a link; refuse it unless a regular file."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise changed(shown, name) from None
        if error.errno == errno.ENXIO:  # a socket (or a device without its driver)
            raise not_regular(shown, entry_stat(folder, name).st_mode) from None
        raise OSError(error.errno, error.strerror, shown) from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise not_regular(shown, found.st_mode)
    return fd, found


def sha256_of_fd(fd: int) -> str:
    """sha256 of the file from its start, streamed; the holes of a sparse file are hashed
    as the zeros they read as, without reading them."""
    digest = hashlib.sha256()
    view = memoryview(bytearray(BLOCK))
    size = os.fstat(fd).st_size
    offset = 0
    while True:
        check_budget()
        data_at = next_data(fd, offset, size)
        hash_zeros(digest, data_at - offset)
        offset = data_at
        count = read_at(fd, view, offset)
        if not count:
            return digest.hexdigest()
        digest.update(view[:count])
        offset += count


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def too_large(shown: str, size: int, job: str) -> ToolError:
    return ToolError(
        f"{quoted(shown)} is {size:,} bytes; {job} reads files whole, up to "
        f"{EDIT_LIMIT // (1024 * 1024)} MiB ({EDIT_LIMIT:,} bytes); nothing was done"
    )


def read_whole(fd: int, shown: str, job: str, limit: int = EDIT_LIMIT) -> bytes:
    """The whole file, refused when it is over `limit` (checked again as it is read)."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise too_large(shown, size, job)
    parts: list[bytes] = []
    total = 0
    offset = 0
    while True:
        check_budget()
        part = os.pread(fd, BLOCK, offset)
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > limit:  # grew while being read
            raise too_large(shown, total, job)
        parts.append(part)
        offset += len(part)


def read_head(fd: int, size: int = BINARY_PROBE) -> bytes:
    return os.pread(fd, size, 0)


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_PROBE]


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary (a NUL byte early on, or not UTF-8)."""
    if looks_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def copy_sparse(source: int, destination: int, hashed: bool = False) -> tuple[int, str | None]:
    """Copy a regular file's bytes, keeping its holes; return (size, sha256).

    Only the data segments are read and written (SEEK_DATA / SEEK_HOLE); holes are left as
    holes by a final truncate to the size, so a sparse multi-GiB file copies in moments and
    takes no more disk than it did. The sha256 of the bytes copied is worked out on the way
    for files up to HASH_ON_THE_WAY_UP_TO, or any size when `hashed` (None otherwise: hashing
    the holes would take longer than the copy).
    """
    size = os.fstat(source).st_size
    digest = hashlib.sha256() if hashed or size <= HASH_ON_THE_WAY_UP_TO else None
    buffer = memoryview(bytearray(BLOCK))
    offset = 0
    while offset < size:
        check_budget()
        data_at = next_data(source, offset, size)
        if digest is not None:
            hash_zeros(digest, data_at - offset)
        offset = data_at
        if offset >= size:
            break
        hole_at = next_hole(source, offset, size)
        while offset < hole_at:
            check_budget()
            count = read_at(source, buffer[: min(BLOCK, hole_at - offset)], offset)
            if not count:  # shrank meanwhile
                size = offset
                break
            write_all(destination, buffer[:count], offset)
            if digest is not None:
                digest.update(buffer[:count])
            offset += count
    os.ftruncate(destination, size)
    return size, None if digest is None else digest.hexdigest()


def hash_zeros(digest: hashlib._Hash, count: int) -> None:
    view = memoryview(ZEROS)
    while count > 0:
        check_budget()
        step = min(count, BLOCK)
        digest.update(view[:step])
        count -= step


def write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
