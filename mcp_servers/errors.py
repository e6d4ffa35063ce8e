"""How an error raised while a tool ran becomes the one line a client sees."""

from __future__ import annotations

from mcp.server.fastmcp.exceptions import ToolError
from pydantic import ValidationError

from mcp_servers.sandbox import SandboxError


def one_line(error: BaseException) -> str:
    """The one line a client sees for an error raised while a tool ran."""
    if isinstance(error, (SandboxError, ToolError)):
        return str(error).replace("\n", " ")
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return f"invalid_argument: {where}: {first['msg']}{more}"
    if isinstance(error, FileNotFoundError):
        return f"not found: {error.filename}"
    if isinstance(error, FileExistsError):
        return f"already exists: {error.filename}"
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename}" if error.filename else str(error)
    if isinstance(error, (ValueError, TypeError, RecursionError)):
        return f"invalid_argument: {error}"
    return f"internal error ({type(error).__name__}): {error}"
