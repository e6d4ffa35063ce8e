"""The person's lines at a terminal, read with prompt_toolkit: Emacs keys and arrows, a
history kept between sessions, `/` commands completed, and more than one line when wanted.

- History: `$XDG_STATE_HOME/fsagent/history` (default `~/.local/state/fsagent/history`),
  readable by its owner only: prompts can say private things. Only requests are kept;
  answers at an approval are not.
- A newline: Alt-Enter (Esc then Enter), or a backslash at the end of the line. A pasted
  block of lines arrives whole (bracketed paste), as one request; one of more than 20 lines
  or 4 KB shows as `[pasted N lines (M KB) #1]` while the line is edited, and is sent whole.
- Ctrl-C at `you>` clears what was typed; on an empty line it ends the session. Ctrl-C at any
  other question leaves it unanswered (KeyboardInterrupt); Ctrl-D on an empty line is the
  end of input (EOFError).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent, merge_key_bindings
from prompt_toolkit.keys import Keys

from terminal.console import pasted

ENDING_WORDS = frozenset({"quit", "exit", "/quit"})
PASTE_MARK = re.compile(r"\[pasted \d+ lines? \(\d+ KB\) #\d+\]")
MENU_ROWS = 7  # the six `/` commands (terminal.slash, terminal.undo) and a row


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the history is kept, as the XDG base directory spec says: an unset, empty or
    relative XDG_STATE_HOME means ~/.local/state."""
    environ = os.environ if environ is None else environ
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "fsagent" / "history"


class PromptHistory(FileHistory):
    """The person's requests, kept between sessions; not the words that end a session, so
    that Up in a new session brings back the last request rather than `/quit`."""

    def append_string(self, string: str) -> None:
        # A request with a paste's mark is not kept: recalled, the mark would be sent as it
        # reads, without the paste (Pastes holds it for this request only).
        if string.strip().lower() not in ENDING_WORDS and not PASTE_MARK.search(string):
            super().append_string(string)


def open_history(path: Path) -> tuple[History, str | None]:
    """The history file, created private; an in-memory one and why, if it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.close(descriptor)
    except OSError as error:
        return InMemoryHistory(), f"history is not kept: {path}: {error.strerror}"
    return PromptHistory(str(path)), None


class SlashCompleter(Completer):
    """Completes the `/` command at the start of a line, with each one's help beside it."""

    def __init__(self, commands: Mapping[str, str]) -> None:
        self.commands = commands  # name -> one line of help; read at each completion

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(space in typed for space in " \n\t"):
            return
        for name in sorted(self.commands):
            if name.startswith(typed):
                yield Completion(name, -len(typed), display_meta=self.commands[name])


def request_bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("c-c")
    def clear_or_quit(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @keys.add("escape", "enter")
    def newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("enter")
    def accept_or_continue(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        document = buffer.document
        if document.is_cursor_at_the_end and document.text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return keys


class Pastes:
    """Pastes too long to show (terminal.console.pasted: more than 20 lines or 4 KB), held
    while the request is edited: the line shows `[pasted N lines (M KB) #k]` in their place,
    and the request sent has each paste whose mark is still there, whole."""

    def __init__(self) -> None:
        self.held: dict[str, str] = {}

    def paste(self, data: str) -> str:
        """What the line shows for `data`: itself, or its mark."""
        data = data.replace("\r\n", "\n").replace("\r", "\n")
        size = pasted(data)
        if size is None:
            return data
        mark = f"[{size} #{len(self.held) + 1}]"
        self.held[mark] = data
        return mark

    def expand(self, line: str) -> str:
        for mark, data in self.held.items():
            line = line.replace(mark, data)
        self.held.clear()
        return line


def paste_bindings(pastes: Pastes) -> KeyBindings:
    keys = KeyBindings()

    @keys.add(Keys.BracketedPaste)
    def paste(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text(pastes.paste(event.data))

    return keys


class LineEditor:
    """Two prompts: requests (history, completion, several lines) and answers (plain)."""

    def __init__(self, commands: Mapping[str, str], history: History) -> None:
        self.pastes = Pastes()
        self.requests: PromptSession[str] = PromptSession(
            history=history,
            completer=SlashCompleter(commands),
            complete_while_typing=True,
            key_bindings=merge_key_bindings([request_bindings(), paste_bindings(self.pastes)]),
            prompt_continuation=lambda width, line, wrapped: "." * (width - 1) + " ",
            # Room below the prompt for the menu of commands: a row each and one more. Not
            # counted from `commands`, which may be read only when first wanted (cli/screen.py).
            reserve_space_for_menu=MENU_ROWS,
        )
        self.answers: PromptSession[str] = PromptSession(
            history=InMemoryHistory(), reserve_space_for_menu=0
        )

    def complete_again(self) -> None:
        """Offer the `/` commands for what is typed so far: they can be known only after the
        prompt came up (an early prompt, terminal.early_prompt)."""
        buffer = self.requests.default_buffer
        if self.requests.app.is_running and buffer.text.startswith("/"):
            buffer.start_completion(select_first=False)

    def drop_held(self) -> int:
        """The keys the last prompt read past the Enter that ended it (prompt_toolkit keeps
        them for the next prompt on the same terminal), dropped; how many a person typed."""
        return sum(typed_keys(key) for key in get_typeahead(self.answers.app.input))

    async def request(self, prompt: str, pre_run: Callable[[], None] | None = None) -> str:
        try:
            line = await self.requests.prompt_async(
                prompt, set_exception_handler=False, pre_run=pre_run
            )
        except BaseException:
            self.pastes.held.clear()  # Ctrl-C cleared the line, Ctrl-D ended: no paste is sent
            raise
        return self.pastes.expand(line)

    async def answer(self, prompt: str, pre_run: Callable[[], None] | None = None) -> str:
        """`pre_run` runs as the prompt starts, before it reads a key or is drawn."""
        return await self.answers.prompt_async(prompt, set_exception_handler=False, pre_run=pre_run)


def typed_keys(key: KeyPress) -> int:
    """A key a person typed counts one, a paste one per character; a terminal's own answer
    (a cursor position report) none."""
    if key.key == Keys.CPRResponse:
        return 0
    if key.key == Keys.BracketedPaste:
        return len(key.data)
    return 1
