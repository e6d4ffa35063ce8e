"""A small MCP server of the tests' own (stdio), standing in for a person's other server.

    python tests/servers/little_server.py [--hang-at-start | --die-at-start | --garbage]

Tools: `read_note` (annotated read-only), `write_note` (no annotations: a write), `wait`
(read-only; tells the FIFO $LITTLE_STARTED it runs, then waits until cancelled), `cancelled`
(which calls were cancelled, by the client's MCP cancellation), `die` (the process exits
mid-call). Notes live in $LITTLE_NOTES.
$LITTLE_DESCRIPTION, when set, is `read_note`'s description (a server that changes a tool
between two sessions); $LITTLE_READ_ONLY_WRITE=1 annotates `write_note` read-only (a tool
that newly claims it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("little", instructions="Keeps short notes: read, write, wait.")
NOTES = Path(os.environ.get("LITTLE_NOTES", "."))
READ_ONLY = ToolAnnotations(readOnlyHint=True)


def tell(variable: str, word: str) -> None:
    fifo = os.environ.get(variable)
    if fifo:
        with open(fifo, "w", encoding="utf-8") as pipe:
            pipe.write(word + "\n")


@server.tool(
    description=os.environ.get("LITTLE_DESCRIPTION", "Read a note by its name."),
    annotations=READ_ONLY,
)
def read_note(name: str) -> str:
    return (NOTES / name).read_text(encoding="utf-8")


write_annotations = READ_ONLY if os.environ.get("LITTLE_READ_ONLY_WRITE") == "1" else None


@server.tool(description="Write a note.", annotations=write_annotations)
def write_note(name: str, text: str) -> str:
    (NOTES / name).write_text(text, encoding="utf-8")
    return f"wrote {name}"


CANCELLED: list[str] = []


@server.tool(description="Wait until cancelled.", annotations=READ_ONLY)
async def wait() -> str:
    try:  # a cancel that comes while it says so counts too
        await asyncio.to_thread(tell, "LITTLE_STARTED", "started")
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        CANCELLED.append("wait")  # before any await: set before a later request is served
        raise
    return "never"


@server.tool(description="Which calls were cancelled.", annotations=READ_ONLY)
def cancelled() -> str:
    return ",".join(CANCELLED) or "none"


@server.tool(description="Answer N characters.", annotations=READ_ONLY)
def big(characters: int) -> str:
    return "y" * characters


@server.tool(description="Exit mid-call.")
def die() -> str:
    os._exit(3)


def main() -> None:
    if "--die-at-start" in sys.argv:
        sys.exit(5)
    if "--garbage" in sys.argv:
        sys.stdout.write("this is no JSON-RPC\n{]\n")
        sys.stdout.flush()
        sys.stdin.read()  # answers nothing else, until its stdin closes
        return
    if "--hang-at-start" in sys.argv:
        sys.stdin.read()
        return
    server.run("stdio")


if __name__ == "__main__":
    main()
