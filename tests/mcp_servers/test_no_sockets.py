"""No socket at all (mcp_servers/no_sockets.py): a process restricted as the server restricts
itself reaches nothing over any socket, with Landlock or without.

Issue 40: under a simulated containment bug, Landlock (ABI 7) refused TCP, but a UDP send and
a connect to a named UNIX socket outside the roots (docker.sock, an ssh-agent socket) went
through. The bug is simulated as code of its own in the restricted process, as
test_kernel_sandbox.py does: whatever the server's code asks, the kernel refuses. Each
listener is the test's, outside the roots, and is checked to have received nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_session import RawServer

from mcp_servers.kernel_sandbox import ABI_ENV, CAPABILITY

REPO = Path(__file__).resolve().parents[2]
ATTEMPTS = ("udp", "tcp", "named unix", "abstract unix", "datagram pair")
HELD = ("new socket", "held tcp", "held udp", "held bind")  # a netlink socket needs no connect
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp: Linux")

PROGRAM = """
import json, os, socket, sys
from pathlib import Path
from mcp_servers import kernel_sandbox
root, udp_port, tcp_port, named, abstract, datagram = sys.argv[1:]
results = {}
# Sockets made before the restriction, as a socket the server inherited would be.
held_tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
held_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
held_unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
if RESTRICT:
    results["line"] = kernel_sandbox.restrict((Path(root),), read_only=False).line()
def attempt(name, action):
    try:
        action()
        results[name] = "ok"
    except OSError as error:
        results[name] = error.strerror
def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.sendto(b"out", ("127.0.0.1", int(udp_port)))
def connect(family, address):
    with socket.socket(family, socket.SOCK_STREAM) as client:
        client.connect(address)
        client.sendall(b"out")
attempt("udp", udp)
attempt("tcp", lambda: connect(socket.AF_INET, ("127.0.0.1", int(tcp_port))))
attempt("named unix", lambda: connect(socket.AF_UNIX, named))
attempt("abstract unix", lambda: connect(socket.AF_UNIX, "\\0" + abstract))
def datagram_pair():
    # A connected datagram pair still sends where sendmsg's address says (seccomp cannot
    # read it): to a named datagram socket outside (a journal's, a notify socket).
    first, second = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with first, second:
        first.sendmsg([b"out"], [], 0, datagram)
attempt("datagram pair", datagram_pair)
attempt("new socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
attempt("held tcp", lambda: held_tcp.connect(("127.0.0.1", int(tcp_port))))
attempt("held udp", lambda: held_udp.sendto(b"out", ("127.0.0.1", int(udp_port))))
attempt("held bind", lambda: held_unix.bind("\\0" + abstract + "-listen"))
attempt("pair", lambda: [end.close() for end in socket.socketpair()])
print(json.dumps(results))
"""


class Listeners:
    """A UDP, a TCP, a named and an abstract UNIX listener, outside the roots."""

    def __init__(self, outside: Path) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.named_path = str(outside / "agent.sock")
        self.named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.named.bind(self.named_path)
        self.named.listen()
        self.abstract_name = f"fsagent-test-{os.getpid()}-{id(self)}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        self.datagram_path = str(outside / "log.sock")
        self.datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.datagram.bind(self.datagram_path)
        for listener in self.all:
            listener.setblocking(False)

    @property
    def all(self) -> list[socket.socket]:
        return [self.udp, self.tcp, self.named, self.abstract, self.datagram]

    def arguments(self) -> list[str]:
        return [
            str(self.udp.getsockname()[1]),
            str(self.tcp.getsockname()[1]),
            self.named_path,
            self.abstract_name,
            self.datagram_path,
        ]

    def reached(self) -> dict[str, bool]:
        """Which listener got a datagram or a connection (never waited for: the program
        has ended, so anything it sent is there)."""
        found = {}
        for name, listener in zip(ATTEMPTS, self.all, strict=True):
            try:
                if listener.type == socket.SOCK_DGRAM:
                    listener.recv(16)
                else:
                    listener.accept()[0].close()
                found[name] = True
            except BlockingIOError:
                found[name] = False
        return found

    def close(self) -> None:
        for listener in self.all:
            listener.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    # The named socket's folder is a short one of its own, outside every root: a socket's
    # path may not pass 107 bytes, and pytest's temp folder is as long as the machine makes
    # it (the restricted program connects by the whole path, so it cannot be made relative).
    outside = Path(tempfile.mkdtemp(prefix="fsagent-sock-"))
    opened = Listeners(outside)
    try:
        yield opened
    finally:
        opened.close()
        shutil.rmtree(outside)


def run(root: Path, listeners: Listeners, restrict: bool, env: dict[str, str]) -> dict[str, Any]:
    code = textwrap.dedent(PROGRAM).replace("RESTRICT", str(restrict))
    done = subprocess.run(
        [sys.executable, "-c", code, str(root), *listeners.arguments()],
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("landlock", ["on", "off"])
def test_a_restricted_process_reaches_nothing_over_any_socket(
    tmp_path: Path, listeners: Listeners, landlock: str
) -> None:
    env = {ABI_ENV: "0"} if landlock == "off" else {}
    results = run(tmp_path, listeners, restrict=True, env=env)
    assert "sockets stay open" not in results["line"]
    assert {name: results[name] for name in ATTEMPTS + HELD} == dict.fromkeys(
        ATTEMPTS + HELD, "Permission denied"
    )
    assert listeners.reached() == dict.fromkeys(ATTEMPTS, False)
    assert results["pair"] == "ok"  # the event loop's own anonymous (stream) pair


def test_unrestricted_the_same_program_reaches_every_listener(
    tmp_path: Path, listeners: Listeners
) -> None:
    # The control: the attempts above are real, and the listeners see them.
    results = run(tmp_path, listeners, restrict=False, env={})
    assert {name: results[name] for name in ATTEMPTS + HELD} == dict.fromkeys(ATTEMPTS + HELD, "ok")
    assert listeners.reached() == dict.fromkeys(ATTEMPTS, True)


def test_the_server_says_sockets_are_denied(tmp_path: Path) -> None:
    with RawServer([tmp_path]) as raw:
        report = raw.initialized["capabilities"]["experimental"][CAPABILITY]
    assert report["sockets"] == "denied"
