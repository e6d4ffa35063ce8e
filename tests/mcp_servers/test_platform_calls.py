"""The calls not every Unix has (mcp_servers/platform_calls.py), as this run of the suite uses
them: `make test` runs tests/mcp_servers twice, once as Linux allows and once with
FSAGENT_PORTABLE_CALLS=1, as on macOS, where there is no O_PATH.

What the server holds is read from the kernel (/proc/PID/fdinfo: the flags of the descriptor
it keeps for its root), so a run that claims the portable path is seen to be on it; the one
difference a person can notice, a folder you may enter but not list, is checked as root
without the capabilities that let root read anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_session import PORTABLE_ENV, FilesystemServer, RawServer

PORTABLE = os.environ.get(PORTABLE_ENV, "") not in ("", "0")
O_PATH = 0o10000000  # Linux's value (asm-generic/fcntl.h); os.O_PATH is the same here
# Root as any user is: permission bits hold (no reading or searching every folder).
NO_DAC = [
    "setpriv",
    "--bounding-set",
    "-dac_override,-dac_read_search",
    "--inh-caps",
    "-dac_override,-dac_read_search",
]


def descriptor_flags(pid: int, target: Path) -> int:
    """The open flags of the descriptor process `pid` holds on `target`."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != str(target):
                continue
        except FileNotFoundError:
            continue
        info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        flags = next(line for line in info.splitlines() if line.startswith("flags:"))
        return int(flags.split()[1], 8)
    raise AssertionError(f"process {pid} holds no descriptor on {target}")


def test_the_root_is_held_as_this_run_says(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    with RawServer([root]) as raw:
        flags = descriptor_flags(raw.pid, root)
    assert getattr(os, "O_PATH", O_PATH) == O_PATH
    if PORTABLE:
        assert not flags & O_PATH and flags & os.O_ACCMODE == os.O_RDONLY
    else:
        assert flags & O_PATH


def test_a_folder_you_may_enter_but_not_list(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "note.txt").write_text("hello\n")
    inner.chmod(0o111)
    try:
        with FilesystemServer([tmp_path], wrapper=NO_DAC) as server:
            result = server.call("read_file", path="inner/note.txt")
            listing = server.call("list_directory", path="inner")
    finally:
        inner.chmod(0o755)
    assert listing.is_error  # listing needs read permission on either path
    if PORTABLE:  # opened O_RDONLY to be reached: refused like a closed folder
        assert result.is_error and "permission denied" in result.text.lower(), result.text
    else:  # O_PATH reaches it with search permission alone
        assert not result.is_error and result.text == "hello\n"
