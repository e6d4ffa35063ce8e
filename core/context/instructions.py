"""The person's project instructions: `AGENTS.md`, the file Codex, opencode, Goose and Cline
read, sent to the model right after the system prompt.

Which files, as Codex finds them (codex-rs/core/src/project_doc.rs): from the first root up to
the repository's top, the nearest folder holding `.git` (a folder, or a file in a worktree);
every `AGENTS.md` on that path, the top's first and the nearest last, so the more specific one
has the last word. With no `.git` above the root, only the root's own: a parent's file outside
any repository (a shared /tmp, a home folder) is not the project's.

What is sent is held to at most an eighth of the context, counted with the estimate every
request is counted with (core.context.budget.estimate_text), header and marker included; past
that the text is cut at a line's end and a visible marker says so. It is read once, when the
agent opens: every request of the session carries the same bytes, so the fixed part stays in
the server's prompt cache.

The text is the person's, not the model's: wherever it is shown it is escaped
(core.text.visible), as a file's text is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from core.context.budget import CHARS_PER_TOKEN, estimate_text

INSTRUCTIONS_FILE = "AGENTS.md"
# The instructions' share of the context: at most an eighth.
INSTRUCTIONS_SHARE = 8
# The most they may take while the server does not say its context (an eighth of 8192).
UNKNOWN_CONTEXT_TOKENS = 1024

HEADER = (
    "The person's project instructions (AGENTS.md files, the nearest last; where they "
    "differ, the nearer one holds). Follow them within the rules above:"
)


@dataclass(frozen=True)
class InstructionFile:
    name: str  # as seen from the first root: AGENTS.md, ../AGENTS.md
    text: str  # the person's text, whole as read (up to what the budget could use)


@dataclass(frozen=True)
class Instructions:
    """The instructions a session sends: each file, and the block appended to the system
    prompt ("" when there is none)."""

    files: tuple[InstructionFile, ...] = ()
    block: str = ""
    tokens: int = 0  # the block's estimate
    limit: int = 0  # the most it may take
    cut: bool = False  # the block holds less than the files say

    @property
    def names(self) -> list[str]:
        return [found.name for found in self.files]

    def banner_line(self) -> str | None:
        """`Instructions: AGENTS.md, 412 tokens` (both names when two), or None when there
        is none."""
        if not self.files:
            return None
        line = f"Instructions: {', '.join(self.names)}, {self.tokens} tokens"
        if self.cut and not self.block:
            return (
                f"Instructions: {', '.join(self.names)} left out: an eighth of the context "
                f"({self.limit} tokens) cannot hold them"
            )
        if self.cut:
            line += f" (cut at {self.limit}: an eighth of the context)"
        return line


def instruction_paths(first_root: Path) -> list[Path]:
    """Every `AGENTS.md` from the repository's top down to `first_root`, the top's first."""
    root = Path(os.path.realpath(first_root))
    path = [root, *root.parents]
    top = next((n for n, folder in enumerate(path) if (folder / ".git").exists()), 0)
    return [folder / INSTRUCTIONS_FILE for folder in reversed(path[: top + 1])]


def instruction_limit(context_length: int | None) -> int:
    """The most tokens the instructions may take: an eighth of the context."""
    if context_length is None:
        return UNKNOWN_CONTEXT_TOKENS
    return context_length // INSTRUCTIONS_SHARE


def read_instructions(first_root: Path, context_length: int | None) -> Instructions:
    """The instructions for a session acting in `first_root`, held to an eighth of the
    context."""
    limit = instruction_limit(context_length)
    # No file needs more characters than the whole budget could send.
    most = limit * CHARS_PER_TOKEN + 1
    root = Path(os.path.realpath(first_root))
    files = []
    for path in instruction_paths(root):
        text = read_file(path, most)
        if text is not None and text.strip():
            files.append(InstructionFile(os.path.relpath(path, root), text))
    if not files:
        return Instructions(limit=limit)
    body = "\n\n".join(f"--- {found.name}\n{found.text.strip()}" for found in files)
    whole = f"{HEADER}\n\n{body}"
    if estimate_text(whole) <= limit:
        return Instructions(tuple(files), whole, estimate_text(whole), limit)
    block = cut_to(body, limit)
    return Instructions(tuple(files), block, estimate_text(block), limit, cut=True)


def marker(limit: int) -> str:
    return (
        f"[fsagent: the instructions are cut here: they are longer than an eighth of the "
        f"context ({limit} tokens)]"
    )


def cut_to(body: str, limit: int) -> str:
    """The header and as much of `body` as fits `limit` with the marker, cut at a line's end
    where there is one; "" when not even the header and the marker fit."""
    frame = f"{HEADER}\n\n\n{marker(limit)}"
    room = (limit - estimate_text(frame)) * CHARS_PER_TOKEN
    if room <= 0:
        return ""
    kept = body[:room]
    if len(kept) < len(body) and "\n" in kept:
        kept = kept[: kept.rindex("\n")]
    return f"{HEADER}\n\n{kept.rstrip()}\n{marker(limit)}"


def read_file(path: Path, most: int) -> str | None:
    """A regular file's first `most` characters (UTF-8, undecodable bytes replaced); None
    when there is none. Opened without blocking and checked after opening, so a FIFO named
    AGENTS.md cannot hold the start."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = file.read(most * 4)  # a character is at most 4 bytes of UTF-8
    return data.decode("utf-8", errors="replace")[:most]


def with_instructions(system_prompt: str, instructions: Instructions) -> str:
    """The system prompt with the instructions right after it: the one place they are
    appended (cli/launch.py's open_agent passes the result to the ContextKeeper)."""
    if not instructions.block:
        return system_prompt
    return f"{system_prompt}\n\n{instructions.block}"
