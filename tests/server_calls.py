"""Any stdio MCP server, started with the MCP SDK's client: its tools listed, some calls made.

`call_server(argv, [(tool, arguments), ...])` starts the server (e.g. a third-party server, or
tests/servers/hostile_server.py under core/servers/confine.py), initializes, lists its tools,
makes the calls in order and returns what a client saw, with the server's stderr.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Answer:
    is_error: bool
    text: str


@dataclass(frozen=True)
class Session:
    tools: list[str]
    answers: list[Answer]
    stderr: str


async def session(
    parameters: StdioServerParameters, calls: Sequence[tuple[str, dict[str, Any]]], errlog: Any
) -> tuple[list[str], list[Answer]]:
    async with stdio_client(parameters, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            listed = await client.list_tools()
            answers = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                text = "".join(
                    block.text for block in result.content if isinstance(block, TextContent)
                )
                answers.append(Answer(bool(result.isError), text))
    return [tool.name for tool in listed.tools], answers


def call_server(
    argv: Sequence[str],
    calls: Sequence[tuple[str, dict[str, Any]]] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 60.0,
) -> Session:
    """Run the server `argv` with this process's environment and `env` over it."""
    parameters = StdioServerParameters(
        command=argv[0], args=list(argv[1:]), env={**os.environ, **(env or {})}, cwd=str(cwd)
    )
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            tools, answers = asyncio.run(
                asyncio.wait_for(session(parameters, calls, errlog), timeout)
            )
        except BaseException as error:
            errlog.seek(0)
            said = errlog.read()
            raise AssertionError(f"{argv[0]} failed ({error!r}); its stderr:\n{said}") from error
        errlog.seek(0)
        return Session(tools, answers, errlog.read())
