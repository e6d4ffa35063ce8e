"""mcp_servers/kernel_sandbox.py in real processes: what Landlock holds at each ABI, and that
every thread of a restricted process is held (and that a process with a thread already
running is refused the restriction, since that thread would not be).

Each test runs a small Python program that restricts itself to one root and then tries
things inside and outside it; the ABI is capped with the module's test switch
(FSAGENT_LANDLOCK_ABI), so the fallbacks are tested on this kernel.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcp_servers.kernel_sandbox import ABI_ENV, KNOWN_ABI, kernel_abi

REPO = Path(__file__).resolve().parents[2]
KERNEL_ABI, _ = kernel_abi()
pytestmark = pytest.mark.skipif(KERNEL_ABI == 0, reason="this kernel offers no Landlock")

PRELUDE = """
import encodings.idna, json, os, socket, sys, threading
from pathlib import Path
from mcp_servers import kernel_sandbox
root, outside = Path(sys.argv[1]), Path(sys.argv[2])
results = {}
def attempt(name, action):
    try:
        action()
        results[name] = "ok"
    except OSError as error:
        results[name] = error.strerror
"""
RESTRICT = """
hold = kernel_sandbox.restrict((root,), read_only=READ_ONLY)
results["hold"] = hold.report()
"""


def run(
    program: str,
    root: Path,
    outside: Path,
    *,
    restrict: bool = True,
    abi: int | None = None,
    read_only: bool = False,
) -> dict:
    """Run `program` in a fresh Python after PRELUDE (and RESTRICT, unless not to): its
    `results`, printed as JSON."""
    first = RESTRICT.replace("READ_ONLY", str(read_only)) if restrict else ""
    code = PRELUDE + first + textwrap.dedent(program)
    code += "\nprint(json.dumps(results))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if abi is not None:
        env[ABI_ENV] = str(abi)
    done = subprocess.run(
        [sys.executable, "-c", code, str(root), str(outside)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in (root, outside):
        (folder / "a").mkdir(parents=True)
        (folder / "b").mkdir()
        (folder / "a" / "f.txt").write_text("text\n")
    return root, outside


def test_every_thread_started_after_the_restriction_is_held(places) -> None:
    root, outside = places
    results = run(
        """
        def in_a_thread(name, action):
            thread = threading.Thread(target=attempt, args=(name, action))
            thread.start()
            thread.join()
        attempt("main reads outside", lambda: (outside / "a" / "f.txt").read_text())
        in_a_thread("thread reads outside", lambda: (outside / "a" / "f.txt").read_text())
        in_a_thread("thread reads inside", lambda: (root / "a" / "f.txt").read_text())
        in_a_thread("thread writes outside", lambda: (outside / "new").write_text("x"))
        """,
        root,
        outside,
    )
    assert results["hold"]["holds"] and results["hold"]["abi"] == min(KERNEL_ABI, KNOWN_ABI)
    assert results["main reads outside"] == "Permission denied"
    assert results["thread reads outside"] == "Permission denied"
    assert results["thread writes outside"] == "Permission denied"
    assert results["thread reads inside"] == "ok"
    assert not (outside / "new").exists()


def test_a_thread_already_running_refuses_the_restriction(places) -> None:
    root, outside = places
    results = run(
        """
        started, stop = threading.Event(), threading.Event()
        threading.Thread(target=lambda: (started.set(), stop.wait())).start()
        started.wait()
        try:
            kernel_sandbox.restrict((root,), read_only=False)
            results["refused"] = None
        except kernel_sandbox.KernelSandboxError as error:
            results["refused"] = str(error)
        attempt("reads outside", lambda: (outside / "a" / "f.txt").read_text())
        stop.set()
        """,
        root,
        outside,
        restrict=False,
    )
    assert results["refused"] == (
        "the kernel sandbox must be applied while the server has one thread, and 2 run: a "
        "thread started before it would be left unrestricted"
    )
    assert results["reads outside"] == "ok"  # refused before anything was restricted


def test_inside_the_root_the_write_tools_rights_hold(places) -> None:
    root, outside = places
    results = run(
        """
        attempt("write", lambda: (root / "a" / "new.txt").write_text("x"))
        attempt("make folder", lambda: (root / "c").mkdir())
        attempt("move across folders", lambda: os.rename(root / "a" / "new.txt", root / "b" / "n"))
        attempt("truncate", lambda: os.truncate(root / "a" / "f.txt", 0))
        attempt("link", lambda: os.symlink("f.txt", root / "a" / "link"))
        attempt("remove", lambda: os.unlink(root / "b" / "n"))
        attempt("remove folder", lambda: os.rmdir(root / "c"))
        attempt("fifo", lambda: os.mkfifo(root / "a" / "fifo"))
        attempt("device", lambda: os.mknod(root / "a" / "null", 0o20600, os.makedev(1, 3)))
        attempt("execute", lambda: os.execv("/bin/true", ["true"]))
        """,
        root,
        outside,
    )
    for right in ("write", "make folder", "move across folders", "truncate", "link", "remove"):
        assert results[right] == "ok", right
    assert results["remove folder"] == results["fifo"] == "ok"
    assert results["device"] == "Permission denied"  # a device node would reach a whole disk
    assert results["execute"] == "Permission denied"


def test_a_read_only_restriction_allows_reading_and_listing_only(places) -> None:
    root, outside = places
    results = run(
        """
        attempt("read", lambda: (root / "a" / "f.txt").read_text())
        attempt("list", lambda: os.listdir(root / "a"))
        attempt("write", lambda: (root / "a" / "f.txt").write_text("x"))
        attempt("remove", lambda: os.unlink(root / "a" / "f.txt"))
        """,
        root,
        outside,
        read_only=True,
    )
    assert results["hold"]["rights"] == "read"
    assert results["read"] == results["list"] == "ok"
    assert results["write"] == results["remove"] == "Permission denied"
    assert (root / "a" / "f.txt").read_text() == "text\n"


@pytest.mark.parametrize("abi", range(1, min(KERNEL_ABI, KNOWN_ABI) + 1))
def test_each_abi_holds_what_it_can_and_says_what_it_cannot(places, abi: int) -> None:
    root, outside = places
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        results = run(
            f"""
            attempt("reads outside", lambda: (outside / "a" / "f.txt").read_text())
            attempt("move across", lambda: os.rename(root / "a" / "f.txt", root / "b" / "f.txt"))
            attempt("truncate outside", lambda: os.truncate(outside / "a" / "f.txt", 0))
            attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {port})).close())
            attempt("signal outside", lambda: os.kill(os.getppid(), 0))
            attempt("symlink outside", lambda: os.symlink("/etc", outside / "a" / "link"))
            attempt("symlink inside", lambda: os.symlink("f.txt", root / "a" / "link"))
            """,
            root,
            outside,
            abi=abi,
        )
    finally:
        listener.close()
    hold = results["hold"]
    gaps = " ".join(hold["gaps"])
    assert hold["holds"] and hold["abi"] == abi and hold["kernel_abi"] == KERNEL_ABI
    assert results["reads outside"] == "Permission denied"  # every ABI holds the roots
    # Making a link outside is held at every ABI (MAKE_SYM is handled): a link planted
    # outside could lead a later tool anywhere. Inside, a move recreates links: allowed.
    assert results["symlink outside"] == "Permission denied"
    assert not (outside / "a" / "link").is_symlink()
    assert results["symlink inside"] == "ok"
    if abi < 2:  # no REFER: never across folders, whatever the rules
        assert results["move across"] == "Invalid cross-device link"
        assert "REFER" in gaps
    else:
        assert results["move across"] == "ok"
        assert "REFER" not in gaps
    truncated = (outside / "a" / "f.txt").read_text() == ""
    assert truncated == (abi < 3) and (results["truncate outside"] == "ok") == (abi < 3)
    assert ("TRUNCATE" in gaps) == (abi < 3)
    # TCP is refused at every ABI: below 4 by the seccomp filter alone (test_no_sockets.py).
    assert results["tcp"] == "Permission denied" and ("network" in gaps) == (abi < 4)
    assert ("IOCTL_DEV" in gaps) == (abi < 5)
    assert (results["signal outside"] == "ok") == (abi < 6) and ("scopes" in gaps) == (abi < 6)


def test_abi_zero_is_a_kernel_without_landlock(places) -> None:
    root, outside = places
    results = run(
        'attempt("reads outside", lambda: (outside / "a" / "f.txt").read_text())',
        root,
        outside,
        abi=0,
    )
    assert results["hold"] == {
        "holds": False,
        "reason": f"{ABI_ENV}=0 says this kernel has no Landlock",
        "sockets": "denied",
    }
    assert results["reads outside"] == "ok"
