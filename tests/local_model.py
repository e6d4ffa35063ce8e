"""A scripted model for long threads against tests/fake_llm.py: it answers fsagent's router,
its summary requests and its agent steps as a small local model would in a file agent.

    model = LocalModel(route=lambda turn: "search" if turn % 2 else "filesystem")
    with FakeLLM(model, flavour="llamacpp", context=4096) as llm:
        ...
    model.summaries  # every summary request it was sent

Agent steps: when the person's message names a file (`note07.md`), it reads that file, then
answers `Read note07.md.`; a message naming none gets `OK.` Summaries name every file the
summarised conversation mentions, as fsagent asks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from core.context.prompts import ROUTE_QUESTION, SUMMARY_REQUEST
from fake_llm import reply, text, tool_call

FILE = re.compile(r"\b[\w-]+\.md\b")
ROUTE_MARK = ROUTE_QUESTION[:30]
SUMMARY_MARK = SUMMARY_REQUEST[:30]


def content(message: dict[str, Any]) -> str:
    value = message.get("content")
    return value if isinstance(value, str) else ""


def request_kind(request: dict[str, Any]) -> str:
    """router, summary or agent: which of fsagent's requests this is."""
    messages = request.get("messages") or []
    last = content(messages[-1]) if messages else ""
    if SUMMARY_MARK in last or (not request.get("tools") and "Summarise" in content(messages[0])):
        return "summary"
    if ROUTE_MARK in last:  # tool_choice none, or a constrained router's enum and no tools
        return "router"
    return "agent"


class LocalModel:
    """A callable script for FakeLLM (see the module docstring)."""

    def __init__(self, route: Callable[[int], str] = lambda turn: "filesystem") -> None:
        self.route = route
        self.routed = 0  # router requests answered
        self.summaries: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request_kind(request)
        messages = request["messages"]
        if kind == "router":
            self.routed += 1
            return text(self.route(self.routed))
        if kind == "summary":
            self.summaries.append(request)
            files = sorted({f for m in messages for f in FILE.findall(content(m))})
            return text(
                f"Summary {len(self.summaries)}: the person asked to read "
                f"{', '.join(files) or 'nothing'}; each file was read and reported."
            )
        last = messages[-1]
        if last["role"] == "user":
            named = FILE.findall(content(last).split("\n\n[fsagent:")[0])
            if named:
                return reply(tool_calls=[tool_call("read_file", {"path": named[0]})])
            return text("OK.")
        asked = next(m for m in reversed(messages) if m["role"] == "user")
        named = FILE.findall(content(asked))
        return text(f"Read {named[0]}." if named else "Done.")
