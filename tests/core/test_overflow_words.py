"""Every server's "the prompt does not fit", as the stand-in answers it with the real
wording (tests/fake_llm.py quotes where each was seen): read as an overflow, with the
server's own count and context, so a retry is cut by the server's count (issue 30)."""

from __future__ import annotations

import json

import pytest

from core.context.budget import is_context_overflow, overflow_sizes
from fake_llm import LMSTUDIO_WORDINGS, _overflow

CASES = [("llamacpp", "n_keep"), ("openai", "n_keep"), ("ollama", "n_keep")] + [
    ("lmstudio", wording) for wording in LMSTUDIO_WORDINGS
]


@pytest.mark.parametrize(("flavour", "wording"), CASES, ids=[f"{f}-{w}" for f, w in CASES])
def test_an_overflow_answer_gives_the_server_s_count_and_context(flavour: str, wording: str):
    status, body = _overflow(flavour, 4097, 4096, wording)
    said = json.dumps(body)  # what the client reads: the whole error body, as text

    assert status == 400
    assert is_context_overflow(said)
    assert overflow_sizes(said) == (4097, 4096)


def test_other_errors_are_not_overflows():
    said = json.dumps({"error": "Model unloaded. n_ctx (4096) unchanged"})
    assert not is_context_overflow(said) and overflow_sizes(said) is None
