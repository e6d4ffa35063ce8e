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
- `socketpair(2)`: refused but for an AF_UNIX SOCK_STREAM pair, the anonymous connected pair
  asyncio's event loop (and Node's libuv) makes for itself: it reaches nothing, no name, no
  address. Not a datagram pair: a `sendmsg` on one with an address (which seccomp cannot read,
  it sits in a struct) reaches any named datagram socket, connected or not.

`deny(network=True)` is the filter for a server that may use the network
(core/servers/confine.py): sockets of AF_INET and AF_INET6 only, with their connect, bind
and the rest; still no UNIX socket (docker.sock, an ssh-agent socket), netlink or packet
socket, and the same pairs.

The filter is built with libseccomp (the system's libseccomp.so.2, which Debian, Fedora and
most container images carry), called through ctypes with its own functions, as its Python
module would. Not that module: Debian ships it for the system Python only, not for a venv, and
`pyseccomp` on PyPI (the same API over ctypes) finds the library with
`ctypes.util.find_library`, which runs `ldconfig -p`: 75-125 ms added to every server start,
measured here, against 0.3 ms for the filter. Where it cannot be installed (not Linux, no
libseccomp, a kernel without seccomp) `deny` says why, and the server's sandbox line says
sockets stay open.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import sys

LIBRARY = "libseccomp.so.2"
ALLOW = 0x7FFF0000  # SCMP_ACT_ALLOW
REFUSE = 0x00050000 | errno.EACCES  # SCMP_ACT_ERRNO(EACCES)
NOT_EQUAL, EQUAL, GREATER = 1, 4, 6  # SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_GT
MASKED_EQUAL = 7  # SCMP_CMP_MASKED_EQ: (argument & datum_a) == datum_b
# A socket type's low four bits are its kind (SOCK_STREAM is 1); the rest are flags
# (SOCK_CLOEXEC, SOCK_NONBLOCK). A kind with bit 1, 2 or 3 set, or kind 0, is not a stream.
NOT_A_STREAM = ((0b0010, 0b0010), (0b0100, 0b0100), (0b1000, 0b1000), (0b1111, 0))
# With the network: every family but these two is refused a socket.
NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)
DENIED = (
    "socket",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
)


class ArgCompare(ctypes.Structure):
    """struct scmp_arg_cmp: argument `arg` compared by `op` with `datum_a`."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def deny(*, network: bool = False) -> str:
    """Install the filter in this process: '' when it holds, else why it could not. With
    `network`, TCP and UDP over IPv4 and IPv6 stay open (and nothing else)."""
    if not sys.platform.startswith("linux"):
        return f"seccomp is Linux's; this is {sys.platform}"
    try:
        lib = ctypes.CDLL(LIBRARY, use_errno=True)
    except OSError as error:
        return f"libseccomp cannot be loaded ({error})"
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCompare),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    rules = lib.seccomp_init(ALLOW)
    if not rules:
        return "seccomp_init failed"
    try:
        if network:
            refuse_families_but(lib, rules, NETWORK_FAMILIES)
        else:
            for call in DENIED:
                refuse(lib, rules, call)
            refuse(lib, rules, "sendto", ArgCompare(4, NOT_EQUAL, 0, 0))  # with an address
        refuse(lib, rules, "socketpair", ArgCompare(0, NOT_EQUAL, socket.AF_UNIX, 0))
        for mask, kind in NOT_A_STREAM:
            refuse(lib, rules, "socketpair", ArgCompare(1, MASKED_EQUAL, mask, kind))
        check(lib.seccomp_load(rules), "seccomp_load")
    except OSError as error:
        return f"the seccomp filter was refused ({error})"
    finally:
        lib.seccomp_release(rules)
    return ""


def refuse_families_but(lib: ctypes.CDLL, rules: int, kept: tuple[int, ...]) -> None:
    """`socket(2)` refused for every address family but `kept`: each one below the highest
    kept by name, every one above it at once."""
    for family in range(max(kept)):
        if family not in kept:
            refuse(lib, rules, "socket", ArgCompare(0, EQUAL, family, 0))
    refuse(lib, rules, "socket", ArgCompare(0, GREATER, max(kept), 0))


def refuse(lib: ctypes.CDLL, rules: int, call: str, *compare: ArgCompare) -> None:
    number = lib.seccomp_syscall_resolve_name(call.encode())
    if number < 0:
        raise OSError(errno.ENOSYS, f"no system call {call} here")
    compared = (ArgCompare * len(compare))(*compare)
    check(lib.seccomp_rule_add_array(rules, REFUSE, number, len(compare), compared), call)


def check(result: int, what: str) -> None:
    """libseccomp answers a negative errno on failure."""
    if result < 0:
        raise OSError(-result, f"{what}: {os.strerror(-result)}")
