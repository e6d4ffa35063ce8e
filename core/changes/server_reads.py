"""Reading files and folders through our MCP server's read tools, for previews and undo.

The server is the only thing that touches files, so what a write is about to replace, and
what is there now, is asked of it: `get_file_info`, `read_file` (in pieces when it is cut),
`file_hash` and `list_directory_with_sizes`. Its answers are text made for models; the few
shapes parsed here are checked, and anything unexpected is a ReadError, never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from core.threads.messages import content_text
from core.tools.tools import call_tool

Tools = dict[str, Any]

# read_file's marker when an answer is cut at its cap, and its answers that are not content.
CUT_MARKER = re.compile(r"\n… \[cut: ([\d,]+) more bytes; read on with start_line=(\d+)\]\Z")
EMPTY_FILE = "(the file has 0 lines; start_line=1 is past the end)"
BINARY_REPORT = re.compile(r"\Abinary file: .* \([\d,]+ bytes, sha256 [0-9a-f]{64}\); not shown\Z")
LONG_LINE = re.compile(
    r"\A\(line [\d,]+ alone is [\d,]+ bytes, over the [\d,]+ byte answer limit\)\Z"
)


class ReadError(Exception):
    """The server could not answer (its one-line error), or answered in a shape we do not
    know."""


class NotReadable(ReadError):
    """A file whose content cannot be kept as text: binary, not UTF-8, or over a limit."""


class TooBig(NotReadable):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"it is {size:,} bytes, over the limit of {limit:,}")
        self.size = size


@dataclass(frozen=True)
class Entry:
    """One line of a folder listing: `kind` is dir, file, link or other."""

    kind: str
    name: str
    size: int


async def ask(tools: Tools, name: str, args: dict[str, Any]) -> str:
    """Call a read-only (or dry-run) tool; its error text becomes a ReadError."""
    if name not in tools:
        raise ReadError(f"the server offers no {name}")
    try:
        content, failed = await call_tool(tools[name], args, "read")
    except Exception as error:  # a read must never stop a review or a write
        raise ReadError(str(error)) from error
    text = content_text(content)
    if failed:
        raise ReadError(text)
    return text


def is_not_found(error: ReadError) -> bool:
    return "not found" in str(error) or "No such file" in str(error)


async def info(tools: Tools, path: str) -> dict[str, Any] | None:
    """get_file_info as a dict; None when nothing is there."""
    try:
        found: dict[str, Any] = json.loads(await ask(tools, "get_file_info", {"path": path}))
        return found
    except ReadError as error:
        if is_not_found(error):
            return None
        raise


async def file_sha(tools: Tools, path: str) -> str:
    return str(json.loads(await ask(tools, "file_hash", {"path": path}))["sha256"])


async def read_text(tools: Tools, path: str, limit: int) -> str:
    """A text file's whole content, exactly, read in as many answers as it takes.

    NotReadable for a binary file, a line longer than one answer, or more than `limit`
    bytes. The caller checks the result against a hash or a size the server gave: the
    answers are text for a model, and only that check makes the copy exact."""
    parts: list[str] = []
    used, start = 0, 1
    while True:
        args: dict[str, Any] = {"path": path}
        if start > 1:
            args["start_line"] = start
        answer = await ask(tools, "read_file", args)
        if start == 1 and answer == EMPTY_FILE:
            return ""
        if BINARY_REPORT.match(answer):
            raise NotReadable("it is a binary file")
        if LONG_LINE.match(answer):
            raise NotReadable("it has a line longer than one answer of the server")
        cut = CUT_MARKER.search(answer)
        body = answer[: cut.start()] if cut else answer
        used += len(body.encode("utf-8"))
        more = int(cut.group(1).replace(",", "")) if cut else 0
        if used + more > limit:
            raise TooBig(used + more, limit)
        parts.append(body)
        if cut is None:
            return "".join(parts)
        start = int(cut.group(2))


async def listing(tools: Tools, path: str) -> list[Entry]:
    """A folder's entries, from list_directory_with_sizes; ReadError when it was cut."""
    entries = []
    for line in (await ask(tools, "list_directory_with_sizes", {"path": path})).splitlines():
        if line.startswith("[DIR] "):
            entries.append(Entry("dir", line.removeprefix("[DIR] "), 0))
        elif line.startswith(("[FILE] ", "[LINK] ", "[OTHER] ")):
            label, _, rest = line.partition(" ")
            name, _, size = rest.rpartition("  ")
            kind = {"[FILE]": "file", "[LINK]": "link"}.get(label, "other")
            if kind == "link":
                name = name.split(" -> ")[0]
            entries.append(Entry(kind, name, int(size.split()[0].replace(",", ""))))
        elif line.startswith("(+"):
            raise ReadError(f"{path} holds more entries than one listing shows")
    return entries
