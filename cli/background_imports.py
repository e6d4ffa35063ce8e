"""When a chat's heavy imports happen: on a thread while the person already types at an early
prompt, or while the MCP server's handshake is waited for.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


# Set once import_heavy is done: the prompt's completion of `/` commands waits for it.
HEAVY_IMPORTED = threading.Event()


def import_heavy() -> None:
    """What a chat imports after its prompt is up: on a thread, so that the prompt's own loop
    still echoes what the person types (imports hold the interpreter's lock, but it passes
    between threads every few milliseconds)."""
    import agent_graph  # noqa: F401
    import core.context.chat_model  # noqa: F401
    import core.opening  # noqa: F401
    import core.tools.tools  # noqa: F401
    import display  # noqa: F401
    import store.sqlite  # noqa: F401

    HEAVY_IMPORTED.set()


def import_while_waiting(screen: str) -> None:
    """On a terminal, import what comes next on a thread while this one waits for the MCP
    server's handshake. Started earlier, a thread would only slow the imports before it:
    imports hold the interpreter's lock, and only a wait lets two run side by side."""
    if sys.stdin.isatty():
        # The model's client, for the first prompt: a person reads the banner and types; a
        # pipe's first line is there at once, and a `quit` would only wait for the import.
        import_in_background("core.context.chat_model")
    if screen == "tty":
        # Line editing, the status line and Markdown. A pipe or --help never imports them.
        import_in_background("terminal.tty")


def import_in_background(module: str) -> None:
    """Import a module on a thread; a later import of it waits for this one to finish."""
    threading.Thread(target=importlib.import_module, args=(module,), daemon=True).start()
