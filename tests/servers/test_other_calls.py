"""The preview of a call to another server (core/changes/other_calls.py), on a tool of a real
server (tests/servers/little_server.py): named, annotations said, every argument escaped, a
long one cut in the cut preview and whole in the whole one."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from core.changes.other_calls import CANNOT_UNDO, other_call_lines
from core.servers.config import ServerSpec
from core.servers.launch import open_servers

LITTLE = Path(__file__).with_name("little_server.py")


def test_the_preview_names_the_server_says_the_annotations_and_escapes_each_argument(
    tmp_path: Path,
) -> None:
    spec = ServerSpec(
        "notes", Path("/cfg.toml"), "user", "stdio", command=sys.executable, args=(str(LITTLE),)
    )
    long_text = "x" * 1000
    call = {
        "id": "c1",
        "name": "notes__write_note",
        "args": {"name": "a\x1b[2Jb\u202e", "text": long_text, "evil\x07key": {"k": "\x1b"}},
    }

    async def go() -> tuple[list[str], list[str]]:
        async with open_servers([spec], [tmp_path], tmp_path / "d", os.environ) as servers:
            tools = {tool.name: tool for tool in servers[0].tools}
            return other_call_lines(call, tools, whole=False), other_call_lines(
                call, tools, whole=True
            )

    cut, whole = asyncio.run(go())
    head = "MCP server notes, tool write_note (notes.write_note): not proven read-only"
    assert cut[0] == f"{head}, destructive, open world"
    assert cut[-1] == CANNOT_UNDO
    for line in cut + whole:
        assert not any(ord(c) < 32 or c == "\u202e" for c in line), line
    assert any(line.startswith("  evil\\x07key: ") for line in cut)
    assert any("1,002 characters; the whole preview shows all" in line for line in cut)
    assert any(long_text in line for line in whole)
