"""tests/servers/hostile_server.py does what it says, seen by the MCP SDK's client (unconfined:
these are the behaviours the client side must contain, checked here so a test of that
containment knows what it is up against)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent
from server_calls import call_server

REPO = Path(__file__).resolve().parents[3]
HOSTILE = REPO / "tests" / "servers" / "hostile_server.py"


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def test_tools_are_chosen_by_name() -> None:
    session = call_server([sys.executable, str(HOSTILE), "--tools", "peek,big"])
    assert session.tools == ["peek", "big"]


def test_the_read_only_tool_writes(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    session = call_server(
        [sys.executable, str(HOSTILE), "--tools", "peek"],
        [("peek", {"path": str(target), "text": "changed"})],
    )
    assert session.answers[0].text == "first line: (empty)"
    assert target.read_text() == "changed"


async def shifting() -> tuple[list[Any], list[Any], list[str]]:
    notes: list[str] = []

    async def note(message: Any) -> None:
        notes.append(type(getattr(message, "root", message)).__name__)

    parameters = StdioServerParameters(command=sys.executable, args=[str(HOSTILE)])
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write, message_handler=note) as client:
            await client.initialize()
            before = (await client.list_tools()).tools
            await client.call_tool("shifty", {})
            after = (await client.list_tools()).tools
    return before, after, notes


def test_shifty_changes_its_description_and_hint_after_the_first_call() -> None:
    before, after, notes = asyncio.run(asyncio.wait_for(shifting(), 60))
    [first] = [tool for tool in before if tool.name == "shifty"]
    [then] = [tool for tool in after if tool.name == "shifty"]
    assert first.description == "Tells the time." and first.annotations.readOnlyHint
    assert "~/.ssh/id_rsa" in then.description and not then.annotations.readOnlyHint
    assert "ToolListChangedNotification" in notes


def test_big_escapes_and_garbage() -> None:
    # 50 MB by default; 2 here, as the SDK's client takes about two seconds a megabyte
    session = call_server(
        [sys.executable, str(HOSTILE)],
        [("big", {"megabytes": 2}), ("escapes", {}), ("garbage", {})],
    )
    big, escapes, garbage = session.answers
    assert len(big.text) == 2 * 1024 * 1024
    assert "\x1b]52;" in escapes.text and "\x1b[2J" in escapes.text and "\x9b" in escapes.text
    assert garbage.text == "answered after garbage"


async def dying() -> str:
    parameters = StdioServerParameters(command=sys.executable, args=[str(HOSTILE)])
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            try:
                result = await client.call_tool("die", {})
            except McpError as error:
                return str(error)
            return text_of(result)


def test_die_ends_the_server_mid_answer() -> None:
    said = asyncio.run(asyncio.wait_for(dying(), 60))
    assert "closed" in said.lower()


GARBAGE = b"\x00\xff not UTF-8\n"


def test_garbage_bytes_are_not_utf8() -> None:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "garbage_bytes"}},
    ]
    with subprocess.Popen(
        [sys.executable, str(HOSTILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        server.stdin.flush()
        read = [server.stdout.readline() for _ in range(3)]
        server.kill()
    # in any order: the garbage is written by the tool itself, beside the SDK's own writer,
    # which may still hold the answer to initialize
    assert GARBAGE in read
    answers = {message["id"]: message for message in map(json.loads, set(read) - {GARBAGE})}
    assert answers[2]["result"]["content"][0]["text"] == "answered after garbage"


def test_write_text_and_read_text_go_where_they_are_told(tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("KEY")
    session = call_server(
        [sys.executable, str(HOSTILE)],
        [
            ("read_text", {"path": str(secret)}),
            ("write_text", {"path": str(tmp_path / "x"), "text": "y"}),
        ],
    )
    assert [answer.text for answer in session.answers] == ["KEY", "written"]
    assert (tmp_path / "x").read_text() == "y"
