"""The kernel holds the roots too: Landlock on Linux, under the server's own checks.

The server keeps every tool inside its roots with its own code (`sandbox.py`, `dirfd.py`). A
bug there would be a way out, since the process may otherwise open anything its user can. So
once the server has imported all it needs, opened its roots and made every other start-up
step, and before any thread starts, it restricts itself (`restrict`): from then on the kernel
refuses it every file outside the roots, whatever the server's code asks, and inside them
everything but the rights its tools need. Landlock holds the thread that restricts itself and
the threads it starts later, never threads already running, so `restrict` refuses to run with
a second thread alive (`filesystem.main` starts the leftover sweep, anyio's workers and the
stdin reader only after it).

What the kernel allows under each root, and nothing anywhere else:

- always: read files, list folders;
- with write tools: write, create files and folders, remove them, rename and move them
  (`REFER`, across folders), truncate, and create the links and FIFOs a move recreates or
  carries (a rename needs the right to make the kind of entry it moves). Never: execute,
  device nodes (a node in a root would reach a whole disk), `ioctl` on devices.
- Where the kernel offers them, TCP (ABI 4) and abstract UNIX sockets and signals to other
  processes (ABI 6) are closed too: the server needs none.
- Every socket, of any kind, by a seccomp filter installed here too (`no_sockets.py`), with
  Landlock or without: Landlock leaves UDP and named UNIX sockets open.

`landlock(rules, ...)` is the restriction itself, for any set of places and rights (`PathRule`):
`restrict` gives it the roots; core/servers/confine.py gives it the folders of a person's own
MCP server (core may import this package; this package imports nothing of the agent).

The highest ABI the kernel offers is used, up to the newest this module knows (KNOWN_ABI);
what an older one lacks is said in `gaps` (see GAPS). Without Landlock (not Linux, an old
kernel, Landlock off at boot, a seccomp filter or container that blocks the calls) the server
runs on its own checks and says so; `--require-kernel-sandbox` refuses to start then.

Test switch: FSAGENT_LANDLOCK_ABI=N uses at most ABI N of what the kernel offers (the
fallbacks are tested on a newer kernel); N=0 makes the server believe there is no Landlock.

The three calls go through libc's `syscall(2)` with ctypes: numbers 444-446 on every
architecture but alpha since Linux 5.13 (they sit in the range all architectures share).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_servers import no_sockets
from mcp_servers.tool_names import KERNEL_SANDBOX_CAPABILITY

ABI_ENV = "FSAGENT_LANDLOCK_ABI"
KNOWN_ABI = 7  # the newest ABI whose rights are listed here
CAPABILITY = KERNEL_SANDBOX_CAPABILITY  # the experimental capability of initialize (MCP)

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (linux/landlock.h), with the ABI that brought them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
REFER_ABI = 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
FS_RIGHTS = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ_RIGHTS = READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a file rule takes
WRITE_RIGHTS = (
    READ_RIGHTS
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | MAKE_FIFO
    | MAKE_SOCK
    | REFER
    | TRUNCATE
)

# What the kernel does not hold below an ABI, in words a person can act on.
GAPS = {
    2: (
        "no REFER right before Landlock ABI 2: the kernel refuses every move or link across "
        "folders (EXDEV), so the server moves a file, link or folder to another folder by "
        "copying it and removing the original (not atomic: a folder is copied whole first), "
        "and builds a folder copy (and, without O_TMPFILE, a file being written) in the "
        "destination's folder itself, where a move of that folder out of the roots meanwhile "
        "takes it along"
    ),
    3: "no TRUNCATE right before ABI 3: truncating a file by its path is not held by the kernel",
    4: "no network rights before ABI 4: the kernel does not close TCP to the server",
    5: "no IOCTL_DEV right before ABI 5: ioctl on a device the server opened is not held",
    6: "no scopes before ABI 6: abstract UNIX sockets and signals to other processes stay open",
}


class KernelSandboxError(Exception):
    """The restriction cannot be applied safely (a thread already runs): a bug of ours."""


class RulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr as of ABI 6; an older kernel takes it with the newer
    fields zero."""

    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Hold:
    """Whether the kernel holds the server to its roots, and how far."""

    holds: bool
    abi: int = 0  # the ABI used (0: none)
    kernel_abi: int = 0  # the ABI the kernel offers
    read_only: bool = False
    reason: str = ""  # why it does not hold
    gaps: tuple[str, ...] = field(default=())
    sockets: str = "not restricted yet"  # why sockets stay open ('' when seccomp denies them)

    def report(self) -> dict[str, Any]:
        """What the server tells its client (an experimental capability of initialize)."""
        sockets = {"sockets": "denied" if not self.sockets else f"open: {self.sockets}"}
        if not self.holds:
            return {"holds": False, "reason": self.reason, **sockets}
        return {
            "holds": True,
            "kind": "landlock",
            "abi": self.abi,
            "kernel_abi": self.kernel_abi,
            "rights": "read" if self.read_only else "read-write",
            "gaps": list(self.gaps),
            **sockets,
        }

    @property
    def renames_across_folders(self) -> bool:
        """Whether the kernel lets a rename cross folders (not under ABI 1: no REFER)."""
        return not self.holds or self.abi >= REFER_ABI

    def line(self) -> str:
        sockets = f"; sockets stay open: {self.sockets}" if self.sockets else ""
        if not self.holds:
            return (
                f"no kernel sandbox: {self.reason}; the server's own checks alone hold the "
                f"roots{sockets}"
            )
        return f"kernel sandbox: Landlock ABI {self.abi} holds the server to its roots{sockets}"


# -- the one platform difference: whether the calls exist ---------------------------------------


def libc_syscall() -> Any | None:
    """libc's `syscall`, where Landlock's numbers are the ones above; None elsewhere."""
    if not sys.platform.startswith("linux") or os.uname().machine == "alpha":
        return None
    call = ctypes.CDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    return call


SYSCALL = libc_syscall()
WHY_NOT = {
    errno.ENOSYS: "this kernel has no Landlock (Linux 5.13 or later built with it is needed)",
    errno.EOPNOTSUPP: "Landlock is built in but not enabled at boot (lsm= lacks landlock)",
    errno.EPERM: "a seccomp filter or container refuses the Landlock calls",
}


def syscall(number: int, *args: object) -> int:
    if SYSCALL is None:
        raise OSError(errno.ENOSYS, "no Landlock here")
    result = int(SYSCALL(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def kernel_abi() -> tuple[int, str]:
    """(the ABI the kernel offers, why none when 0)."""
    if SYSCALL is None:
        return 0, f"Landlock is Linux's; this is {sys.platform}"
    try:
        return syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION), ""
    except OSError as error:
        reason = WHY_NOT.get(error.errno or 0, f"landlock_create_ruleset: {error.strerror}")
        return 0, reason


def abi_cap() -> int | None:
    """The test switch: at most this ABI (0: as if there were no Landlock)."""
    text = os.environ.get(ABI_ENV, "").strip()
    return int(text) if text.isdigit() else None


# -- the restriction ----------------------------------------------------------------------------


def fs_rights(abi: int) -> int:
    return sum(rights for since, rights in FS_RIGHTS.items() if abi >= since)


def threads_running() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc mounted: the threads Python knows of
        return threading.active_count()


def restrict(roots: tuple[Path, ...], *, read_only: bool) -> Hold:
    """Restrict this process to `roots` with the highest ABI offered, and deny it every
    socket (no_sockets.py); say how it holds."""
    check_one_thread()
    sockets = no_sockets.deny()
    allowed = READ_RIGHTS if read_only else WRITE_RIGHTS
    used = landlock(tuple(PathRule(root, allowed) for root in roots), close_tcp=True)
    if not used.abi:
        return Hold(holds=False, read_only=read_only, reason=used.reason, sockets=sockets)
    return Hold(
        holds=True,
        abi=used.abi,
        kernel_abi=used.kernel_abi,
        read_only=read_only,
        gaps=used.gaps,
        sockets=sockets,
    )


@dataclass(frozen=True)
class PathRule:
    """What may be done beneath `path` (a folder), or to it (a file: only the file rights of
    `rights` are kept, as the kernel takes no others for a file)."""

    path: Path
    rights: int


@dataclass(frozen=True)
class Used:
    """The ABI a restriction used (0: none, and `reason` says why), and its gaps."""

    abi: int
    kernel_abi: int = 0
    reason: str = ""
    gaps: tuple[str, ...] = ()


def check_one_thread() -> None:
    running = threads_running()
    if running != 1:
        raise KernelSandboxError(
            f"the kernel sandbox must be applied while the server has one thread, and {running} "
            "run: a thread started before it would be left unrestricted"
        )


def landlock(rules: tuple[PathRule, ...], *, close_tcp: bool) -> Used:
    """Restrict this process to `rules` with the highest ABI offered: every right the ABI
    handles is refused but where a rule allows it. `close_tcp` closes TCP bind and connect
    (ABI 4); abstract UNIX sockets and signals to processes outside the sandbox are scoped
    (ABI 6). The caller checks there is one thread."""
    offered, reason = kernel_abi()
    cap = abi_cap()
    if cap == 0:
        offered, reason = 0, f"{ABI_ENV}=0 says this kernel has no Landlock"
    if offered == 0:
        return Used(abi=0, reason=reason)
    abi = min(offered, KNOWN_ABI, cap if cap is not None else KNOWN_ABI)
    handled = fs_rights(abi)
    attr = RulesetAttr(
        handled_access_fs=handled,
        handled_access_net=NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and close_tcp else 0,
        scoped=SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    try:
        ruleset = syscall(
            SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0
        )
        try:
            for rule in rules:
                allow_below(ruleset, rule.path, rule.rights & handled)
            no_new_privileges()
            syscall(SYS_RESTRICT_SELF, ruleset, 0)
        finally:
            os.close(ruleset)
    except OSError as error:
        return Used(abi=0, reason=f"Landlock refused the rules: {error}")
    gaps = tuple(gap for below, gap in GAPS.items() if abi < below)
    return Used(abi=abi, kernel_abi=offered, gaps=gaps)


def allow_below(ruleset: int, place: Path, allowed: int) -> None:
    fd = os.open(place, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            allowed &= FILE_RIGHTS  # a file takes no folder right (EINVAL)
        rule = PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
        syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def no_new_privileges() -> None:
    """Landlock asks for it of a process without CAP_SYS_ADMIN; the server needs no more
    privileges than it starts with either way."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
