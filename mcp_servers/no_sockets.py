"""No socket at all: the kernel refuses the server every network and UNIX-socket connection.

The filesystem server speaks over its stdin and stdout and needs no socket. Landlock (up to
ABI 7) closes TCP (ABI 4) and abstract UNIX sockets (ABI 6) but not a UDP send nor a connect
to a named UNIX socket outside the roots (docker.sock, an ssh-agent socket), so a bug in the
server's own checks could still reach those. A seccomp filter closes them all, for the whole
process and every thread it starts later, whatever the kernel's Landlock ABI:

- `socket(2)`, `connect`, `bind`, `listen`, `accept`, `accept4`: refused (EACCES), any family;
  an inherited socket cannot be turned into a way out either;
- `sendto` with an address: refused (a send on stdout, if the client gave us a socket, has
  none);
- `socketpair(2)`: refused but for AF_UNIX, the anonymous connected pair asyncio's event loop
  makes for itself (it reaches nothing: no name, no address).

The filter is built with libseccomp through `pyseccomp` (its ctypes binding, the API of
libseccomp's own Python module, which Debian ships only for the system Python, not a venv).
Where it cannot be installed (not Linux, no libseccomp, a kernel without seccomp) `deny`
says why, and the server's sandbox line says sockets stay open.
"""

from __future__ import annotations

import errno
import socket
import sys

DENIED = (
    "socket",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
)


def deny() -> str:
    """Install the filter in this process: '' when it holds, else why it could not."""
    if not sys.platform.startswith("linux"):
        return f"seccomp is Linux's; this is {sys.platform}"
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]  # noqa: PLC0415
    except (ImportError, OSError, RuntimeError) as error:  # RuntimeError: no libseccomp
        return f"libseccomp cannot be loaded ({error})"
    try:
        refused = seccomp.ERRNO(errno.EACCES)
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        for call in DENIED:
            rules.add_rule(refused, call)
        rules.add_rule(refused, "sendto", seccomp.Arg(4, seccomp.NE, 0))
        rules.add_rule(refused, "socketpair", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
        rules.load()
    except OSError as error:
        return f"the seccomp filter was refused ({error})"
    return ""
