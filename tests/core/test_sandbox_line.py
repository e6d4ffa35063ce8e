"""The sandbox line fsagent says of its MCP server (core/tools/tools.kernel_sandbox_of), from
what the server said at `initialize`: where sockets stay open (no seccomp: not Linux, no
libseccomp; or a server that does not say), the line says so (issue 40)."""

from __future__ import annotations

from typing import Any

from mcp.types import Implementation, InitializeResult, ServerCapabilities

from core.tools.tools import kernel_sandbox_of
from mcp_servers.tool_names import KERNEL_SANDBOX_CAPABILITY

HELD = {"holds": True, "kind": "landlock", "abi": 7, "kernel_abi": 7, "gaps": []}


def line_of(report: dict[str, Any]) -> str:
    capabilities = ServerCapabilities(experimental={KERNEL_SANDBOX_CAPABILITY: report})
    result = InitializeResult(
        protocolVersion="2025-06-18",
        capabilities=capabilities,
        serverInfo=Implementation(name="fsagent-filesystem", version="1"),
    )
    return kernel_sandbox_of(result).line


def test_sockets_denied_add_nothing_to_the_line() -> None:
    line = line_of({**HELD, "sockets": "denied"})
    assert line == "kernel sandbox: Landlock ABI 7 holds the MCP server to the roots"


def test_sockets_left_open_are_said_on_the_line() -> None:
    why = "open: libseccomp cannot be loaded (libseccomp.so.2: cannot open shared object file)"
    assert line_of({**HELD, "sockets": why}).endswith(f"; sockets stay open ({why})")
    no_landlock = {"holds": False, "reason": "not Linux", "sockets": "open: seccomp is Linux's"}
    assert line_of(no_landlock).endswith("; sockets stay open (open: seccomp is Linux's)")
    assert line_of(HELD).endswith("; sockets stay open (not said)")  # an older server
