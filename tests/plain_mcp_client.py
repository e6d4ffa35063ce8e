"""A second, unrelated MCP client: only the MCP SDK, none of fsagent's code.

    python tests/plain_mcp_client.py SERVER_COMMAND [ARG ...]

Starts the server over stdio, lists its tools, calls `read_file` on 'hello.txt' and prints
one JSON object: {"tools": [...], "read_file": {"is_error": ..., "text": ...}}.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent


async def exercise(command: str, args: list[str]) -> dict[str, object]:
    parameters = StdioServerParameters(command=command, args=args)
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool("read_file", {"path": "hello.txt"})
    text = "".join(block.text for block in result.content if isinstance(block, TextContent))
    return {
        "tools": sorted(tool.name for tool in tools.tools),
        "read_file": {"is_error": bool(result.isError), "text": text},
    }


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(exercise(sys.argv[1], sys.argv[2:]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
