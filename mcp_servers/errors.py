"""How an error raised while a tool ran becomes the one line a client sees."""

from __future__ import annotations

from mcp.server.fastmcp.exceptions import ToolError
from pydantic import ValidationError

from mcp_servers.names import show
from mcp_servers.sandbox import SandboxError


def one_line(error: BaseException) -> str:
    """The one line a client sees for an error raised while a tool ran."""
    return safe_line(describe(error))


def describe(error: BaseException) -> str:
    if isinstance(error, (SandboxError, ToolError)):
        return str(error)
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return f"invalid_argument: {where}: {first['msg']}{more}"
    # OSError file names are raw names (or paths) from the OS: shown the way answers show them.
    if isinstance(error, FileNotFoundError):
        return f"not found: {shown_name(error.filename)}"
    if isinstance(error, FileExistsError):
        return f"already exists: {shown_name(error.filename)}"
    if isinstance(error, OSError):
        if error.filename:
            return f"{error.strerror or error}: {shown_name(error.filename)}"
        return str(error)
    if isinstance(error, (ValueError, TypeError, RecursionError)):
        return f"invalid_argument: {error}"
    return f"internal error ({type(error).__name__}): {error}"


def shown_name(name: object) -> str:
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    return show(name) if isinstance(name, str) else str(name)


def safe_line(text: str) -> str:
    """One line of valid UTF-8, whatever slipped into `text`."""
    flat = text.replace("\r", " ").replace("\n", " ")
    return flat.encode("utf-8", "backslashreplace").decode("utf-8")
