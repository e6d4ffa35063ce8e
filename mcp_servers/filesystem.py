"""A sandboxed MCP filesystem server over stdio.

    python -m mcp_servers.filesystem [--read-only] [--verbose] ROOT [ROOT ...]

Every path goes through `mcp_servers.sandbox.Sandbox` (see there for the containment rules).
Tools answer in plain text (reads, listings, searches) or JSON (info, hashes and every write).
Errors come back as MCP error results with one line; a refused path starts `security_error:`.

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
import logging
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from mcp_servers.errors import one_line
from mcp_servers.reading import ReadTools
from mcp_servers.sandbox import RootError, Sandbox, SandboxError, resolve_roots
from mcp_servers.searching import SearchTools
from mcp_servers.tool_names import READ_TOOL_NAMES, WRITE_TOOL_NAMES
from mcp_servers.writing import WriteTools

# The tools live by job: reading.py (listings, trees, reads, info, diffs), searching.py
# (search_files, grep), writing.py (writes, patches, copy/move/delete), on top of walking.py
# (folder walks), fileio.py (no-follow opens, hashes, binary detection) and sandbox.py (paths).


logger = logging.getLogger("fsagent.filesystem")


class FileTools(ReadTools, SearchTools, WriteTools):
    """The tools; each public method is registered under its own name."""


# -- errors: one line each ----------------------------------------------------------------------


class SandboxedServer(FastMCP):
    """FastMCP, with every tool error reduced to the one line the tool meant to say.

    FastMCP wraps errors as 'Error executing tool X: ...' and pydantic errors span many
    lines; a refusal must start with 'security_error:' so clients can recognise it.
    """

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


def build_server(roots: tuple[Path, ...], *, read_only: bool = False) -> FastMCP:
    """The server with its tools registered; with read_only no write tool exists at all."""
    server = SandboxedServer("fsagent-filesystem", log_level="WARNING")
    tools = FileTools(Sandbox(roots))
    for name in sorted(READ_TOOL_NAMES):
        server.add_tool(
            getattr(tools, name), name=name, annotations=READ_ONLY, structured_output=False
        )
    if not read_only:
        for name in sorted(WRITE_TOOL_NAMES):
            annotations = WRITE_ANNOTATIONS[name]
            server.add_tool(
                getattr(tools, name), name=name, annotations=annotations, structured_output=False
            )
    return server


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_servers.filesystem",
        description="Sandboxed MCP filesystem server over stdio.",
    )
    parser.add_argument("--read-only", action="store_true", help="register no write tool")
    parser.add_argument("--verbose", action="store_true", help="log each call to stderr")
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="folders the tools may touch")
    return parser.parse_args(argv)


def configure_logging(verbose: bool) -> None:
    # stdout carries the protocol: logs go to stderr only.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.verbose)
    try:
        roots = resolve_roots(args.roots)
    except RootError as error:
        print(f"mcp_servers.filesystem: {error}", file=sys.stderr)
        return 2
    logger.info("serving %s%s", ", ".join(map(str, roots)), " (read-only)" * args.read_only)
    try:
        build_server(roots, read_only=args.read_only).run("stdio")
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
