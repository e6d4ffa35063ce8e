"""A server the tests fork from the launcher (tests/mcp_session.py) is the server `python -m`
starts: the same descriptors, the same restrictions it sets up itself (Landlock, the seccomp
filter, no_new_privs), what it says of its sandbox, the test's umask, and a pid SIGKILL kills.
Each is compared with an exec'd server's, so a difference in the fork fails here first.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from mcp_session import RawServer, tool_text

from mcp_servers.broken_containment import BROKEN_ENV

# What a fork would inherit from the launcher rather than set up itself.
STATUS = ("Uid", "Gid", "Groups", "CapPrm", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")
# The parts of a descriptor's target that differ from run to run: a journal's name, an inode.
VARYING = re.compile(r"[0-9a-f-]+\.journal$|\[\d+\]$")


def descriptors(pid: int) -> list[str]:
    """What each open descriptor is, without the numbers that differ from run to run."""
    found = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        found.append(f"{fd} {VARYING.sub('*', target)}")
    return found


def status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def seen(raw: RawServer) -> dict[str, Any]:
    # Its own containment broken (FSAGENT_TEST_BROKEN_CONTAINMENT): only Landlock refuses.
    read = raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "note.txt"}})
    return {
        "descriptors": descriptors(raw.pid),
        "status": {key: status(raw.pid)[key] for key in STATUS},
        "said": raw.initialized["capabilities"].get("experimental"),
        "outside": tool_text(read),
    }


def test_a_forked_server_is_the_server_python_m_starts(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in (root, outside):
        folder.mkdir()
    (outside / "note.txt").write_text("OUTSIDE SECRET\n")
    env = {BROKEN_ENV: str(outside)}
    with RawServer([root], env=env, exec_=True) as started:
        exec_d = seen(started)
    with RawServer([root], env=env) as forked:
        assert forked.pid not in (os.getpid(), os.getppid())
        fork_d = seen(forked)
    assert fork_d == exec_d
    assert exec_d["status"]["NoNewPrivs"] == "1" and exec_d["status"]["Seccomp"] == "2"
    assert exec_d["outside"][1] is True and "SECRET" not in exec_d["outside"][0]


@pytest.mark.parametrize("exec_", [True, False], ids=["exec", "fork"])
def test_a_server_writes_with_the_tests_umask(tmp_path: Path, exec_: bool) -> None:
    before = os.umask(0o077)  # the launcher was started under the suite's own (022)
    try:
        with RawServer([tmp_path], exec_=exec_) as raw:
            wrote = raw.ask("tools/call", {"name": "write_file", "arguments": {
                "path": "new.txt", "content": "x\n"}})  # fmt: skip
    finally:
        os.umask(before)
    assert tool_text(wrote)[1] is False
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o600


def test_a_forked_server_killed_with_sigkill_is_gone(tmp_path: Path) -> None:
    raw = RawServer([tmp_path])
    pid = raw.pid
    raw.process.kill()
    assert raw.process.wait(timeout=60) == -signal.SIGKILL
    assert not Path(f"/proc/{pid}").exists()
    raw.close()
