"""The agent's hands: our MCP server's tools over one persistent session.

`MultiServerMCPClient.get_tools()` would start a new server process for every tool call; the
session held here makes a call one round trip on an open pipe.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession
from mcp.types import InitializeResult

from core.errors import StartupError
from core.tools.mcp_stdio import session_streams
from core.tools.recovery import recovery_line
from mcp_servers.tool_names import KERNEL_SANDBOX_CAPABILITY

PING_SECONDS = 5.0


async def call_tool(tool: BaseTool, args: dict[str, Any], call_id: str) -> tuple[Any, bool]:
    """A tool's answer (its content) and whether it is an error.

    An MCP tool is called by its own coroutine, which `ainvoke` calls after its callbacks and
    before it wraps a ToolMessage: 40% less of our CPU a call, and this runs for every write
    and for the reads before it. An error answer comes as a ToolException, which the tool's
    own handler turns into content, as `ainvoke` would.
    """
    coroutine = getattr(tool, "coroutine", None)
    if tool.response_format != "content_and_artifact" or coroutine is None:
        result = await tool.ainvoke(
            {"type": "tool_call", "name": tool.name, "args": args, "id": call_id}
        )
        return result.content, result.status == "error"
    try:
        content, _ = await coroutine(**args)
    except ToolException as error:
        handler = tool.handle_tool_error
        if not callable(handler):
            raise
        return handler(error), True
    return content, False


@dataclass(frozen=True)
class KernelSandbox:
    """Whether the kernel holds our MCP server to the roots (Landlock), as the server said at
    `initialize`, and the one line fsagent says of it."""

    holds: bool
    line: str
    reason: str = ""  # why it does not hold

    def refusal(self) -> str:
        """What --require-kernel-sandbox says when it does not hold."""
        return (
            f"--require-kernel-sandbox: the kernel does not hold the MCP server to the roots "
            f"({self.reason}); not started"
        )


def kernel_sandbox_of(initialized: InitializeResult) -> KernelSandbox:
    experimental = initialized.capabilities.experimental or {}
    report = experimental.get(KERNEL_SANDBOX_CAPABILITY)
    if not isinstance(report, dict):
        report = {"holds": False, "reason": "the MCP server does not say whether one holds"}
    sockets = report.get("sockets")
    # A server that denies itself sockets says "denied"; anything else (an older server says
    # nothing) is what is missing, on the same line.
    open_sockets = "" if sockets == "denied" else f"; sockets stay open ({sockets or 'not said'})"
    if report.get("holds") is True:
        gaps = report.get("gaps") or []
        short = f" (short of the newest: {'; '.join(map(str, gaps))})" if gaps else ""
        abi = report.get("abi")
        line = f"kernel sandbox: Landlock ABI {abi} holds the MCP server to the roots{short}"
        return KernelSandbox(True, line + open_sockets)
    reason = str(report.get("reason") or "no reason given")
    line = (
        f"no kernel sandbox ({reason}): only the MCP server's own checks keep the tools in "
        f"the roots; --require-kernel-sandbox refuses to start so{open_sockets}"
    )
    return KernelSandbox(False, line, reason)


@dataclass
class ToolServer:
    """Our MCP server as the agent holds it: its process, its session, its tools, whether
    the kernel holds it to the roots, and what its start's recovery put right."""

    process: asyncio.subprocess.Process
    session: ClientSession
    tools: list[BaseTool]
    kernel_sandbox: KernelSandbox
    recovery: str | None = None  # what its start's recovery put right (core.tools.recovery)

    async def problem(self) -> str | None:
        """Why the server cannot answer now (it exited, or does not answer a ping); None when
        it answers."""
        if self.process.returncode is not None:
            return f"the MCP server exited (code {self.process.returncode})"
        try:
            await asyncio.wait_for(self.session.send_ping(), PING_SECONDS)
        except TimeoutError:
            return f"the MCP server did not answer a ping within {PING_SECONDS:g}s"
        except Exception as error:  # a broken pipe, a closed session: it is not reachable
            return f"the MCP server does not answer: {type(error).__name__}: {error}"
        return None


@asynccontextmanager
async def open_tool_server(
    process: asyncio.subprocess.Process, *, require_kernel_sandbox: bool = False
) -> AsyncIterator[ToolServer]:
    """Our MCP server, already started as `process` (see core.tools.server_process), with one
    session kept open while the agent runs. With `require_kernel_sandbox`, a server the
    kernel does not hold is refused (StartupError) before any tool is called."""
    async with session_streams(process) as (read, write):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            sandbox = kernel_sandbox_of(initialized)
            if require_kernel_sandbox and not sandbox.holds:
                raise StartupError(sandbox.refusal())
            tools = await load_mcp_tools(session)
            yield ToolServer(process, session, tools, sandbox, recovery_line(initialized))


@asynccontextmanager
async def open_tools(
    process: asyncio.subprocess.Process, *, require_kernel_sandbox: bool = False
) -> AsyncIterator[list[BaseTool]]:
    """Only the tools of `open_tool_server`."""
    async with open_tool_server(process, require_kernel_sandbox=require_kernel_sandbox) as server:
        yield server.tools
