"""A small write's temp file: made with no name (O_TMPFILE) and named by `linkat` once it is
written (mcp_servers/replacing.py, so a folder moved out of the roots meanwhile takes nothing
along), against a file made under its temp name from the start (the portable path's, and
before). Each round makes the temp file, writes 100 bytes, names it if it has no name, and
renames it over the same file, in a folder of /var/tmp (a real disk, where /tmp may be a
tmpfs); with and without the fsync of the file a real write makes. Interleaved rounds, in
process: the server's own calls, nothing else.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable

from bench.common import Row, median, row

ROUNDS = 5
WRITES = 400
DATA = b"x" * 100
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def named(folder: int, synced: bool) -> None:
    temp = f".fsagent-{os.urandom(8).hex()}.tmp"
    fd = os.open(temp, NEW, 0o600, dir_fd=folder)
    try:
        os.write(fd, DATA)
        if synced:
            os.fsync(fd)
        os.rename(temp, "target", src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(fd)


def unnamed(folder: int, synced: bool) -> None:
    temp = f".fsagent-{os.urandom(8).hex()}.tmp"
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=folder)
    try:
        os.write(fd, DATA)
        if synced:
            os.fsync(fd)
        os.link(f"/proc/self/fd/{fd}", temp, dst_dir_fd=folder, follow_symlinks=True)
        os.rename(temp, "target", src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(fd)


def per_write(how: Callable[[int, bool], None], folder: int, synced: bool) -> float:
    """µs per write of one round."""
    count = WRITES // 10 if synced else WRITES
    started = time.perf_counter()
    for _ in range(count):
        how(folder, synced)
    return (time.perf_counter() - started) / count * 1e6


def measure() -> list[Row]:
    if not hasattr(os, "O_TMPFILE"):  # not Linux: the server names its temp files there
        return []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir="/var/tmp") as place:
        folder = os.open(place, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for synced in (False, True):
                ours: list[float] = []
                before: list[float] = []
                for _ in range(ROUNDS):
                    ours.append(per_write(unnamed, folder, synced))
                    before.append(per_write(named, folder, synced))
                what = "with fsync" if synced else "no fsync"
                rows.append(
                    row(
                        f"a 100-byte write's temp file, O_TMPFILE + linkat vs named ({what})",
                        median(ours),
                        median(before),
                        "µs",
                        "the unnamed file costs a few µs at most",
                    )
                )
        finally:
            os.close(folder)
    return rows


if __name__ == "__main__":
    for line in measure():
        print(line)
