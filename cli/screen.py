"""The person's terminal as a session opens it: a TTY's or the plain one, its transcript file,
the roots' names in that transcript, and the `/` commands offered for completion.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import StartupError

if TYPE_CHECKING:
    pass


def open_terminal(
    screen: str,
    transcript: Any,
    redactions: list[tuple[str, str]],
    stdin: Any = None,
    imported: threading.Event | None = None,
) -> Any:
    """The person's terminal: a TTY's with line editing, a status line and Markdown, or the
    plain one (a pipe, --plain, TERM=dumb) that writes no escape code unless it colours a
    diff on a terminal. NO_COLOR takes the colour away from either, and nothing else."""
    if screen == "tty":
        from terminal.tty import TtyTerminal

        commands = SlashHelp(imported)
        return TtyTerminal(transcript=transcript, redactions=redactions, commands=commands)
    from terminal.console import Terminal, colour_wanted

    color = screen == "color" and colour_wanted()
    if stdin is not None:
        return Terminal(
            stdin=stdin, piped=True, transcript=transcript, redactions=redactions, color=color
        )
    return Terminal(transcript=transcript, redactions=redactions, color=color)


class SlashHelp(Mapping[str, str]):
    """`/name` -> its help, for completion at the prompt. The commands' modules import most
    of the agent: before an early prompt's imports are done (`ready` unset) there is nothing
    to complete yet, rather than an import that would hold the prompt's loop (and the model
    server's question, whose timeouts run on it) until the other thread's imports end."""

    def __init__(self, ready: threading.Event | None = None) -> None:
        self.ready = ready

    def _commands(self) -> Mapping[str, Any]:
        if self.ready is not None and not self.ready.is_set():
            return {}
        import terminal.undo  # noqa: F401  (imported, it registers /undo)
        from terminal.slash import COMMANDS

        return COMMANDS

    def __getitem__(self, name: str) -> str:
        return str(self._commands()[name].help)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._commands()))

    def __len__(self) -> int:
        return len(self._commands())


def open_transcript(path: Path | None) -> Any:
    if path is None:
        return nullcontext(None)
    try:
        return path.open("w", encoding="utf-8")
    except OSError as error:
        raise StartupError(f"--transcript {path}: {error.strerror}") from error


def root_redactions(roots: tuple[Path, ...]) -> list[tuple[str, str]]:
    """Temp folders differ from run to run; a transcript names them by role instead."""
    names = ["<root>"] + [f"<root{n}>" for n in range(2, len(roots) + 1)]
    pairs = [(os.path.realpath(root), name) for root, name in zip(roots, names, strict=True)]
    pairs += [(str(root), name) for root, name in zip(roots, names, strict=True)]
    return sorted(set(pairs), key=lambda pair: -len(pair[0]))
