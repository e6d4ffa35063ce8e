"""Starting our MCP server's process, with the standard library only.

The MCP SDK's `stdio_client` can only start the server once the SDK itself is imported, and
the server then spends about as long importing the same SDK on the other core. Starting the
process here, before anything heavy is imported, lets both imports run side by side;
`core.tools.mcp_stdio` then speaks MCP over its pipes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

# Reads are capped at 256 KiB of text per answer, and JSON escaping can double that; a line
# limit well above it keeps a large answer from being cut mid-message.
LINE_LIMIT = 16 * 1024 * 1024
EXIT_GRACE_SECONDS = 2.0
PROJECT_DIR = Path(__file__).resolve().parents[2]  # the checkout (core/tools/ is two below)
# Tests only (docs/development.md): the socket of the test worker's launcher, which forks the
# real server from a process with the SDK imported. It does anything only in a checkout,
# where tests/server_stub.py sits next to the code; tests/conftest.py sets it for piped
# sessions alone. Unset, the server is `python -m mcp_servers.filesystem` as below.
TEST_LAUNCHER_ENV = "FSAGENT_TEST_SERVER_LAUNCHER"
TEST_STUB = PROJECT_DIR / "tests" / "server_stub.py"


def server_command(
    roots: list[Path], read_only: bool, protect: Sequence[Path] = ()
) -> tuple[str, list[str], dict[str, str]]:
    """The server's command line. `protect`: files no write, move or delete may change
    (nor a folder holding one), whatever was approved: the server refuses those itself."""
    args = ["-m", "mcp_servers.filesystem"]
    if read_only:
        args.append("--read-only")
    for path in protect:
        args += ["--protect", str(path)]
    args += [str(root) for root in roots]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_DIR), env.get("PYTHONPATH")]))
    launcher = env.get(TEST_LAUNCHER_ENV)
    if launcher and TEST_STUB.is_file():
        # -S: the stub needs only the standard library, not site's start-up.
        return sys.executable, ["-S", str(TEST_STUB), launcher, *args], env
    return sys.executable, args, env


async def start_server(
    roots: list[Path],
    *,
    read_only: bool = False,
    verbose: bool = False,
    protect: Sequence[Path] = (),
) -> asyncio.subprocess.Process:
    """Start `python -m mcp_servers.filesystem` on `roots`, with `protect` (see
    server_command). It logs to stderr, which the person sees only with --verbose."""
    command, args, env = server_command(roots, read_only, protect)
    errlog: IO[Any] | int | None = None if verbose else asyncio.subprocess.DEVNULL
    return await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=str(roots[0]),
        limit=LINE_LIMIT,
        # Its own process group: Ctrl-C at the person's terminal goes to the foreground group,
        # and would kill the server mid-session; fsagent decides what Ctrl-C does. The server
        # still ends with fsagent, when its stdin closes.
        process_group=0,
    )


async def stop_server(process: asyncio.subprocess.Process) -> None:
    """Close its stdin (MCP's shutdown signal); one that has not left after a grace period
    is terminated, then killed."""
    if process.returncode is not None:
        return
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for signal_it in (None, process.terminate, process.kill):
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError):
                signal_it()
        try:
            await asyncio.wait_for(process.wait(), EXIT_GRACE_SECONDS)
            return
        except TimeoutError:
            continue
