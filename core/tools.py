"""The agent's hands: our MCP server's tools over one persistent session.

`MultiServerMCPClient.get_tools()` would start a new server process for every tool call; the
session held here makes a call one round trip on an open pipe.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession

from core.mcp_stdio import session_streams


@asynccontextmanager
async def open_tools(process: asyncio.subprocess.Process) -> AsyncIterator[list[BaseTool]]:
    """The tools of our MCP server, already started as `process` (see core.server_process),
    over one session kept open while the agent runs."""
    async with session_streams(process) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield await load_mcp_tools(session)
