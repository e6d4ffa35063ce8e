"""core/context/instructions.py on real folders: what is sent never passes an eighth of the
context, whatever the files hold, and instructions that cannot fit at all are left out and
said so (the CLI's behaviour is in tests/terminal/test_instructions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.context.budget import estimate_text
from core.context.instructions import read_instructions, with_instructions


@pytest.mark.parametrize("context", [1024, 2048, 4096, 8192, 32768, None])
@pytest.mark.parametrize("size", [10, 400, 3_000, 50_000])
def test_what_is_sent_never_passes_an_eighth_of_the_context(
    tmp_path: Path, context: int | None, size: int
):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text(("word " * 9 + "\n") * (size // 50 + 1))
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "AGENTS.md").write_text("x" * size)  # one long line: no line's end
    found = read_instructions(tmp_path / "root", context)
    limit = context // 8 if context is not None else 1024
    assert found.limit == limit
    assert found.tokens == estimate_text(found.block) <= limit
    assert found.names == ["../AGENTS.md", "AGENTS.md"]
    assert found.cut == ("\n[fsagent: the instructions are cut here" in found.block)


def test_instructions_that_cannot_fit_at_all_are_left_out_and_said(tmp_path: Path):
    (tmp_path / "AGENTS.md").write_text("Keep it short.\n")
    found = read_instructions(tmp_path, 256)  # an eighth: 32 tokens, less than the header
    assert (found.block, found.tokens, found.cut) == ("", 0, True)
    assert with_instructions("The prompt.", found) == "The prompt."
    assert found.banner_line() == (
        "Instructions: AGENTS.md left out: an eighth of the context (32 tokens) cannot hold them"
    )


def test_undecodable_bytes_are_replaced_not_refused(tmp_path: Path):
    (tmp_path / "AGENTS.md").write_bytes(b"Use \xff tabs.\n")
    found = read_instructions(tmp_path, 8192)
    assert "Use \ufffd tabs." in found.block and not found.cut
