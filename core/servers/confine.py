"""Start a person's own stdio MCP server inside the kernel sandbox.

    python -m core.servers.confine [--write DIR]... [--state DIR] [--read DIR]... [--network]
                                   [--allow-unconfined] [--verbose] -- COMMAND [ARG]...

The launcher restricts its own process, then `exec`s COMMAND: Landlock and seccomp filters
survive exec and hold the server's whole process tree (its children too), so the server's
code never runs unrestricted. What it may do:

- write (create, remove, rename, truncate; never run, never make devices) only in each
  `--write DIR` (the thread's roots) and `--state DIR` (its state folder, made if missing:
  sandbox_rules.state_folder says where);
- read and run the system (sandbox_rules.SYSTEM, ETC, DEVICES_*) and its own install (the
  venv, node_modules or folder of its program: sandbox_rules.install_folders); read each
  `--read DIR`; nothing else, so the rest of the home folder (~/.ssh) is closed;
- no network unless `--network`: no socket but the anonymous AF_UNIX stream pairs
  (no_sockets.py: a seccomp filter) and TCP closed by Landlock (ABI 4). With `--network`,
  TCP and UDP over IPv4 and IPv6, and still no UNIX socket (docker.sock, an ssh-agent socket),
  which neither Landlock nor a path rule closes;
- no signal to a process outside the sandbox, no abstract UNIX socket (ABI 6);
- its HOME is its state folder (or /nonexistent without one), TMPDIR a `tmp` folder in it,
  and the XDG_*_HOME and XDG_RUNTIME_DIR variables are dropped
  (sandbox_rules.server_environment): the person's home is closed to it anyway, and a
  program that finds a file there it may not read may stop (git does).

Where Landlock is missing (not Linux, an old kernel, off at boot) the server is refused in one
line, exit 2, unless `--allow-unconfined` (a setting of the person's that says to run it
anyway where the kernel cannot hold it): then it starts, with the socket filter if it could
be installed, and one line on stderr says it runs unconfined and why. An older ABI's gaps are
said in one line too (kernel_sandbox.GAPS).

Test switch: FSAGENT_TEST_SECCOMP=0 leaves the socket filter out, so a test sees what Landlock
alone holds (FSAGENT_LANDLOCK_ABI=0 does the same for Landlock). Never set outside tests.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from core.servers import sandbox_rules
from mcp_servers import kernel_sandbox, no_sockets
from mcp_servers.kernel_sandbox import EXECUTE, READ_RIGHTS, WRITE_RIGHTS, PathRule

SECCOMP_ENV = "FSAGENT_TEST_SECCOMP"
PROGRAM = "confine"
RUN_RIGHTS = READ_RIGHTS | EXECUTE


class Refused(Exception):
    """The server is not started: one line, exit 2."""


def parser() -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(
        prog=f"python -m core.servers.{PROGRAM}",
        description="Run an MCP stdio server in the kernel sandbox.",
    )
    parsed.add_argument("--write", action="append", default=[], metavar="DIR", type=Path)
    parsed.add_argument("--state", metavar="DIR", type=Path)
    parsed.add_argument("--read", action="append", default=[], metavar="DIR", type=Path)
    parsed.add_argument("--network", action="store_true")
    parsed.add_argument("--allow-unconfined", action="store_true")
    parsed.add_argument("--verbose", action="store_true")
    parsed.add_argument("command", nargs=argparse.REMAINDER)
    return parsed


def launcher_argv(
    command: Sequence[str],
    *,
    writes: Sequence[Path] = (),
    state: Path | None = None,
    reads: Sequence[Path] = (),
    network: bool = False,
    allow_unconfined: bool = False,
    python: str = sys.executable,
) -> list[str]:
    """The command line that starts `command` in the sandbox: what a caller runs instead of
    `command` (a server with no write right: its roots in `reads`, no `writes`, no `state`).
    `python` is fsagent's own interpreter, which imports this package from any folder."""
    flags = [f"--write={folder}" for folder in writes]
    flags += [f"--state={state}"] if state is not None else []
    flags += [f"--read={folder}" for folder in reads]
    flags += ["--network"] if network else []
    flags += ["--allow-unconfined"] if allow_unconfined else []
    return [python, "-m", f"core.servers.{PROGRAM}", *flags, "--", *command]


def rules(
    argv: Sequence[str], writes: Sequence[Path], reads: Sequence[Path], path: str | None
) -> tuple[PathRule, ...]:
    """Every place the server may reach, and how."""
    run = [*sandbox_rules.system_places(), *sandbox_rules.install_folders(argv, path)]
    devices_read = sandbox_rules.existing(sandbox_rules.DEVICES_READ)
    devices_write = sandbox_rules.existing(sandbox_rules.DEVICES_WRITE)
    return (
        *(PathRule(place, RUN_RIGHTS) for place in run),
        *(PathRule(place, READ_RIGHTS) for place in [*reads, *devices_read]),
        *(PathRule(place, READ_RIGHTS | kernel_sandbox.WRITE_FILE) for place in devices_write),
        *(PathRule(place, WRITE_RIGHTS) for place in writes),
    )


def folders(given: Sequence[Path], flag: str) -> list[Path]:
    """Each folder as a real path; one that is missing is refused (a root mistyped is not
    made)."""
    real = []
    for folder in given:
        if not folder.is_dir():
            raise Refused(f"{flag} {folder}: no such folder; give an existing folder")
        real.append(Path(os.path.realpath(folder)))
    return real


def made_state(state: Path | None) -> Path | None:
    """The state folder and its tmp folder, made if missing (only the person may enter)."""
    if state is None:
        return None
    try:
        (state / "tmp").mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise Refused(f"--state {state}: cannot be made ({error.strerror})") from error
    return folders([state], "--state")[0]


def confine(arguments: argparse.Namespace) -> tuple[Path, list[str], dict[str, str]]:
    """Restrict this process as `arguments` say; the program, argv and environment to exec,
    or Refused."""
    argv = list(arguments.command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise Refused("no server command: give it after --")
    path = os.environ.get("PATH")
    program = sandbox_rules.resolve_command(argv[0], path)
    if program is None:
        raise Refused(f"{argv[0]}: no such program on PATH; give its full path")
    state = made_state(arguments.state)
    writes = folders(arguments.write, "--write") + ([state] if state else [])
    reads = folders(arguments.read, "--read")
    places = rules(argv, writes, reads, path)
    kernel_sandbox.check_one_thread()
    sockets = "off by FSAGENT_TEST_SECCOMP=0 (tests only)"
    if os.environ.get(SECCOMP_ENV) != "0":
        sockets = no_sockets.deny(network=arguments.network)
    used = kernel_sandbox.landlock(places, close_tcp=not arguments.network)
    say(held_line(argv[0], used, sockets, network=arguments.network), arguments, used)
    if not used.abi and not arguments.allow_unconfined:
        raise Refused(
            f"{argv[0]} not started: no kernel sandbox ({used.reason}); set sandbox = false "
            "for this server to run it unconfined"
        )
    return program, argv, sandbox_rules.server_environment(os.environ, state)


def held_line(name: str, used: kernel_sandbox.Used, sockets: str, *, network: bool) -> str:
    net = "network allowed" if network else "no network"
    if sockets:
        net += f" (sockets stay open: {sockets})"
    if not used.abi:
        return f"{name} runs unconfined: {used.reason}; {net}"
    gaps = f"; gaps: {'; '.join(used.gaps)}" if used.gaps else ""
    return f"{name} held by Landlock ABI {used.abi}; {net}{gaps}"


def say(line: str, arguments: argparse.Namespace, used: kernel_sandbox.Used) -> None:
    """The line goes to stderr (the server's log) when something is missing, or asked for."""
    missing = not used.abi or used.gaps or "sockets stay open" in line
    if arguments.verbose or (missing and (used.abi or arguments.allow_unconfined)):
        print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True)


def main(args: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(args)
    try:
        program, argv, env = confine(arguments)
    except (Refused, kernel_sandbox.KernelSandboxError) as refused:
        print(f"{PROGRAM}: {refused}", file=sys.stderr)
        return 2
    try:
        os.execve(program, argv, env)
    except OSError as error:
        print(f"{PROGRAM}: cannot start {program}: {error.strerror}", file=sys.stderr)
        return 126
    return 0  # not reached: exec replaced the process


if __name__ == "__main__":
    sys.exit(main())
