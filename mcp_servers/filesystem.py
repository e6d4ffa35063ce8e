"""A sandboxed MCP filesystem server over stdio.

    python -m mcp_servers.filesystem [--read-only] [--verbose] [--call-timeout S]
                                     [--require-kernel-sandbox] [--protect PATH ...]
                                     ROOT [ROOT ...]

Every path goes through `mcp_servers.sandbox.Sandbox` (see there for the containment rules),
and tools then act on it through folder descriptors (`dirfd.py`), so a path swapped mid-call
fails the call instead of leading outside. Tools answer in plain text (reads, listings,
searches) or JSON (info, hashes and every write). Errors come back as MCP error results with
one line; a refused path starts `security_error:`.

Each tool runs in a worker thread within a time budget (`tool_runner.py`), so the server
keeps answering pings and other calls, and honours cancellation; a line on stdin it cannot
decode gets a JSON-RPC error (`stdio_transport.py`), and a client's cancels never stop the
server (`cancels.py`).

Under all of it the kernel holds the roots too (`kernel_sandbox.py`, Landlock on Linux): `main`
makes every start-up step, then restricts the process, then starts its threads and serves.

Symlinks: reads and writes follow a link only when its target is inside the roots. `delete` and
`move` act on a link itself, never on its target, and refuse a link that points outside.
Recursive walks (trees, searches, grep, folder copies) never descend into a link, and leave
out links that point outside (or dangle) without naming them.

Paths in answers are relative to the first root (relative tool paths start there); a path in
another root is given in full, so it can be passed back as it is. Listings, trees and searches
end with `(+N more)` when cut; grep stops at max_matches and says `(+more: ...)`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from mcp import types
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from mcp_servers import kernel_sandbox, preload, race_hook, staging
from mcp_servers.broken_containment import break_containment_if_asked
from mcp_servers.cancels import Cancels
from mcp_servers.errors import one_line
from mcp_servers.journal import JournalError, Recovery, journal_base, open_journals
from mcp_servers.protected import Protected
from mcp_servers.reading import ReadTools
from mcp_servers.sandbox import RootError, Sandbox, SandboxError, resolve_roots
from mcp_servers.searching import SearchTools
from mcp_servers.stdio_transport import stdio_streams
from mcp_servers.tool_names import (
    PLAN_TOOL_NAME,
    READ_TOOL_NAMES,
    RECOVERY_CAPABILITY,
    WRITE_TOOL_NAMES,
)
from mcp_servers.tool_runner import DEFAULT_CALL_TIMEOUT, WORKING, ToolRunner
from mcp_servers.writing import WriteTools

# The tools live by job: reading.py (listings, trees, reads, info, diffs), searching.py
# (search_files, grep), writing.py (writes, patches, copy/move/delete), on top of walking.py
# (folder walks), fileio.py (no-follow opens, hashes, binary detection) and sandbox.py (paths).


logger = logging.getLogger("fsagent.filesystem")


class FileTools(ReadTools, SearchTools, WriteTools):  # WriteTools brings plans.PlanTools
    """The tools; each public method is registered under its own name."""


# -- errors: one line each ----------------------------------------------------------------------


# FastMCP answers these even with nothing to offer, and so advertises the resources and
# prompts capabilities; an unknown resource or prompt then comes back with error code 0.
# Without the handlers the capabilities are not advertised, and a client asking anyway gets
# the JSON-RPC "Method not found" (-32601) the SDK answers for a method it does not serve.
NOT_OFFERED = (
    types.ListResourcesRequest,
    types.ListResourceTemplatesRequest,
    types.ReadResourceRequest,
    types.ListPromptsRequest,
    types.GetPromptRequest,
)


class SandboxedServer(FastMCP):
    """FastMCP, with every tool error reduced to the one line the tool meant to say, offering
    tools only.

    FastMCP wraps errors as 'Error executing tool X: ...' and pydantic errors span many
    lines; a refusal must start with 'security_error:' so clients can recognise it.
    """

    def __init__(self, name: str, cancels: Cancels, **settings: Any) -> None:
        super().__init__(name, **settings)
        for request in NOT_OFFERED:
            self._mcp_server.request_handlers.pop(request, None)
        self.cancels = cancels
        # What `initialize` answers, worked out now: the SDK reads its version from the
        # package's metadata, a file the kernel sandbox closes once the server is restricted.
        self._mcp_server.version = self._mcp_server.create_initialization_options().server_version
        self.kernel_sandbox = kernel_sandbox.Hold(holds=False, reason="not restricted yet")
        self.recovered = Recovery()  # what the start's recovery did (journal.py)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            cause = error.__cause__ if error.__cause__ is not None else error
            if not isinstance(cause, (SandboxError, ToolError, ValidationError, OSError)):
                logger.warning("tool %s failed", name, exc_info=cause)
            message = one_line(cause)
            logger.info("tool %s: %s", name, message)
            raise ToolError(message) from None

    async def run_stdio_async(self) -> None:
        """FastMCP's stdio run, on a transport that answers undecodable lines."""
        said: dict[str, dict[str, Any]] = {kernel_sandbox.CAPABILITY: self.kernel_sandbox.report()}
        if self.recovered.kept or self.recovered.put_back:  # a stopped server's acts put right
            said[RECOVERY_CAPABILITY] = recovery_report(self.recovered)
        options = self._mcp_server.create_initialization_options(experimental_capabilities=said)
        async with stdio_streams(cancels=self.cancels) as (read_stream, write_stream):
            await self._mcp_server.run(read_stream, write_stream, options)
        # A test's pause (race_hook.py; unset, nothing): the session is over, and the loop
        # runs nothing more until a call held before its hand-off has made it.
        race_hook.pause_at_session_end()


REPORTED_UP_TO = 100  # lines and paths of each list the capability holds


def recovery_report(found: Recovery) -> dict[str, Any]:
    """What the start's recovery did, for a client's banner: the lines of entries kept
    under another name, the paths put back under their own, and how many were left out."""
    more = max(0, len(found.kept) - REPORTED_UP_TO) + max(0, len(found.put_back) - REPORTED_UP_TO)
    return {
        "kept": found.kept[:REPORTED_UP_TO],
        "put_back": found.put_back[:REPORTED_UP_TO],
        "more": more,
    }


# -- registration and start ---------------------------------------------------------------------

READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)


def write_annotations(destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        readOnlyHint=False,
        destructiveHint=destructive,
        idempotentHint=idempotent,
        openWorldHint=False,
    )


WRITE_ANNOTATIONS: dict[str, ToolAnnotations] = {
    "write_file": write_annotations(destructive=True, idempotent=False),
    "patch_file": write_annotations(destructive=True, idempotent=False),
    "make_dir": write_annotations(destructive=False, idempotent=True),
    "touch": write_annotations(destructive=False, idempotent=True),
    "copy": write_annotations(destructive=True, idempotent=False),
    "move": write_annotations(destructive=True, idempotent=False),
    "delete": write_annotations(destructive=True, idempotent=False),
}


def build_server(
    roots: tuple[Path, ...],
    *,
    read_only: bool = False,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    protect: tuple[str, ...] = (),
) -> SandboxedServer:
    """The server with its tools registered; with read_only no write tool exists at all. No
    write tool changes a path in `protect` (protected.py). It starts no thread (`main`
    restricts the process first)."""
    cancels = Cancels()
    server = SandboxedServer("fsagent-filesystem", cancels, log_level="WARNING")
    sandbox = Sandbox(roots)
    if not read_only:  # the journals' folder is never a write tool's to change
        protect = (*protect, str(journal_base()))
    tools = FileTools(sandbox, Protected(sandbox, protect))
    if not read_only:
        # A stopped server's acts are finished or undone before anything is served, and
        # this server's journals opened: before the kernel sandbox, which closes that folder.
        tools.journals, recovery = open_journals(roots, tools.places.root_fds)
        server.recovered = recovery
    break_containment_if_asked(tools.places)
    runner = ToolRunner(call_timeout, cancels=cancels)
    writes = [] if read_only else sorted(WRITE_TOOL_NAMES | {PLAN_TOOL_NAME})
    names = sorted(READ_TOOL_NAMES) + writes
    for name in names:
        annotations = WRITE_ANNOTATIONS.get(name, READ_ONLY)
        server.add_tool(
            runner.wrap(name, getattr(tools, name)),
            name=name,
            annotations=annotations,
            structured_output=False,
        )
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_servers.filesystem",
        description="Sandboxed MCP filesystem server over stdio.",
    )
    parser.add_argument("--read-only", action="store_true", help="register no write tool")
    parser.add_argument("--verbose", action="store_true", help="log each call to stderr")
    parser.add_argument(
        "--call-timeout",
        type=positive_seconds,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="SECONDS",
        help=f"time budget of one tool call (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--require-kernel-sandbox",
        action="store_true",
        help="refuse to start unless the kernel holds the server to its roots (Landlock)",
    )
    parser.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="PATH",
        help="a file no write tool may change, move or delete (repeatable; ignored outside "
        "the roots): fsagent's rules file and its thread database",
    )
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="folders the tools may touch")
    return parser.parse_args(argv)


def positive_seconds(text: str) -> float:
    value = float(text)
    if not 0 < value <= 24 * 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds, got {text}")
    return value


def configure_logging(verbose: bool) -> None:
    # stdout carries the protocol: logs go to stderr only.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def main(argv: list[str] | None = None) -> int:
    race_hook.open_from_environment()  # a test's pause, opened before anything is served
    args = parse_args(argv)
    configure_logging(args.verbose)
    try:
        roots = resolve_roots(args.roots)
    except RootError as error:
        return refuse(str(error))
    logger.info("serving %s%s", ", ".join(map(str, roots)), " (read-only)" * args.read_only)
    try:
        server = build_server(
            roots,
            read_only=args.read_only,
            call_timeout=args.call_timeout,
            protect=tuple(args.protect),
        )
    except JournalError as error:
        return refuse(f"not started: {error}")
    # Every start-up step is done (imports, roots, tools, test hooks): now the kernel sandbox,
    # before the first thread (anyio's workers, the stdin reader) starts.
    preload.import_what_serving_needs()
    try:
        hold = kernel_sandbox.restrict(roots, read_only=args.read_only)
    except kernel_sandbox.KernelSandboxError as error:
        return refuse(f"not started: {error}")
    if not hold.holds and args.require_kernel_sandbox:
        return refuse(f"--require-kernel-sandbox: {hold.line()}; not started")
    logger.info("%s", hold.line())
    server.kernel_sandbox = hold
    # Landlock ABI 1 refuses every rename across folders: what is built is built in place.
    staging.allow_across_folders(hold.renames_across_folders)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 (the one line a server error gets)
        return stopped_by(error, args.verbose)
    return 0


def refuse(message: str) -> int:
    print(f"mcp_servers.filesystem: {message}", file=sys.stderr)
    return 2


def stopped_by(error: BaseException, verbose: bool) -> int:
    """An unexpected error that ended the server, as one line (with --verbose, the traceback
    too): anyio wraps it in exception groups, which say nothing a person can act on."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if verbose:
        logger.error("the server stopped", exc_info=error)
    print(f"mcp_servers.filesystem: stopped: {one_line(error)}", file=sys.stderr)
    return 1


def exit_without_teardown(code: int) -> NoReturn:
    """End as the interpreter ends, less its teardown of the modules: 0.1-0.25 s of freeing
    the SDK's and pydantic's objects after the last answer, which the client waits for at
    every stop (core/tools/server_process.py's stop_server: each exit of fsagent). What the
    interpreter does first is kept: a call still running on a worker thread (anyio's are
    not daemons) is waited for, so a write is never cut by the server's own exit; the log
    and the standard streams are flushed."""
    if WORKING.count:
        # Why a server whose client left has not ended yet (and the tests' sign that the
        # session is over while a call still works). Counted by the calls themselves: an
        # idle worker of anyio's, ending with the loop, is no call to wait for.
        logger.info("the session is over; waiting for %d call(s) still working", WORKING.count)
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a client gone: nothing to tell
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
