"""One line for an error the person can act on: what, where, what to do."""

from __future__ import annotations

import sys

from langgraph.errors import GraphRecursionError

from core.context.models import server_name, unreachable_message
from core.context.server_errors import one_line, server_words
from core.errors import ContextTooSmall
from core.text import clip


def describe_error(error: BaseException, base_url: str) -> str:
    # An error of the openai client can only come from a loaded client: asking sys.modules
    # keeps a run that never talked to LM Studio (a replay) from loading the whole SDK.
    openai = sys.modules.get("openai")
    if openai is not None:
        if isinstance(error, openai.APIConnectionError | openai.APITimeoutError):
            return unreachable_message(base_url)
        if isinstance(error, openai.APIStatusError):
            detail = one_line(server_words(error))
            return f"{server_name(base_url)} at {base_url} answered {error.status_code}: {detail}"
        if isinstance(error, openai.APIError):  # an error inside a 200 stream (LM Studio 0.4)
            detail = one_line(server_words(error))
            return f"{server_name(base_url)} at {base_url} answered with an error: {detail}"
    if isinstance(error, ContextTooSmall):
        return str(error)
    if isinstance(error, GraphRecursionError):
        return "the request took too many steps and was stopped; ask for something smaller"
    return f"{type(error).__name__}: {clip(str(error), 200)} (run with --verbose for details)"
