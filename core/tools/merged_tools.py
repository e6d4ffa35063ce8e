"""Two of the server's tools shown to the model as a form of another: `search_files` as
`list_directory` with a `pattern`, and `patch_file` as `write_file` with `edits`.

Why: a chat template renders every tool it is sent several times over. The Hermes tool-use
template llama.cpp runs for many small models writes each tool as a Python signature, an
`Args:` line per parameter and its JSON schema, and costs 70-155 tokens a tool before any
description; nine tools and a short system prompt were 1,172 tokens, more than half of a 2048
context (issue 30; docs/performance.md). A tool folded into another costs only its extra
argument. The pairs are the ones a person thinks of as one act: listing a folder or finding
names under it (`ls`, `find`), writing a file whole or in places.

The model's call is read back into the server's own tool as soon as it arrives
(`server_calls`), so everything after it (the judge, the preview, approval, undo, the audit,
the transcript) sees the server's tool and arguments, as with any other call. A call the
model makes to `search_files` or `patch_file` by name still runs: they are only not offered.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall


class Fold(NamedTuple):
    """`tool` is offered with `argument` of `server_tool`'s schema, optional; a call that
    gives it is a call to `server_tool`."""

    tool: str
    argument: str
    server_tool: str
    description: str


FOLDS: tuple[Fold, ...] = (
    Fold(
        "list_directory",
        "pattern",
        "search_files",
        "List a folder, or find names matching a glob pattern under it.",
    ),
    Fold(
        "write_file",
        "edits",
        "patch_file",
        "Create or overwrite a file, or replace each old_text with new_text.",
    ),
)
FOLDED: frozenset[str] = frozenset(fold.server_tool for fold in FOLDS)
_BY_TOOL = {fold.tool: fold for fold in FOLDS}

# The error a write_file call with both forms is answered with: either is a whole change of
# its own, and guessing which was meant would write what nobody previewed.
BOTH_FORMS = "write_file takes content (the whole file) or edits, not both"


def folded_schema(schema: dict[str, Any], server_schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an offered tool, OpenAI form) with its fold's argument added from
    `server_schema`, optional, and the description that names both forms. Every argument the
    two forms do not share becomes optional: which one is given says which form it is."""
    fold = _BY_TOOL[schema["function"]["name"]]
    params = schema["function"]["parameters"]
    extra = server_schema["function"]["parameters"]["properties"][fold.argument]
    shared = set(params.get("properties", {})) & set(
        server_schema["function"]["parameters"].get("properties", {})
    )
    return {
        "type": "function",
        "function": {
            "name": fold.tool,
            "description": fold.description,
            "parameters": {
                **params,
                "properties": {**params.get("properties", {}), fold.argument: extra},
                "required": [r for r in params.get("required", []) if r in shared],
            },
        },
    }


def server_call(call: ToolCall) -> ToolCall | InvalidToolCall:
    """The server's own call for a model's call to a folded form; any other call as it is."""
    fold = _BY_TOOL.get(call["name"])
    args = call["args"]
    if fold is None or not isinstance(args, dict) or args.get(fold.argument) in (None, ""):
        if fold is not None and isinstance(args, dict) and fold.argument in args:
            # An empty pattern or null edits: the plain form, without the empty argument.
            args = {k: v for k, v in args.items() if k != fold.argument}
            return ToolCall(name=call["name"], args=args, id=call["id"], type="tool_call")
        return call
    if fold.tool == "write_file" and args.get("content") is not None:
        return InvalidToolCall(
            name=call["name"],
            args=json.dumps(args),
            id=call["id"],
            error=BOTH_FORMS,
            type="invalid_tool_call",
        )
    return ToolCall(name=fold.server_tool, args=dict(args), id=call["id"], type="tool_call")


def server_calls(message: AIMessage) -> AIMessage:
    """The model's message with each call read as the server's tool (see `server_call`)."""
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = list(message.invalid_tool_calls)
    for call in message.tool_calls:
        read = server_call(call)
        if read.get("type") == "invalid_tool_call":
            invalid.append(read)  # type: ignore[arg-type]
        else:
            calls.append(read)  # type: ignore[arg-type]
    if calls == message.tool_calls and len(invalid) == len(message.invalid_tool_calls):
        return message
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})
