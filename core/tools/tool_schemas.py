"""The tools as the model is shown them: every request of a thread offers the same few, in the
same order, each with a one-line description and a plain schema.

Tool schemas are the largest fixed part of a request, and a local model often has 4096 tokens
of context. The server's own descriptions are written for people configuring an MCP client;
here each is cut to a line, and what the model does not need is left out of its schema:
titles, defaults (the server applies them), `anyOf` with null for optional values,
parameters for our own use (`dry_run`, which the previews use) or for rare fine-tuning, and
the few tools another one does as well. The arguments a call arrives with are still checked
against the server's full schema, and a call to a tool left out here still runs: it is only
not advertised.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from core.tools.merged_tools import FOLDED, FOLDS, folded_schema

# Tools another tool does as well, left out to keep every request small: touch (write_file
# with empty content), file_hash (writes return the new sha256), read_multiple_files (several
# read_file calls in one step), diff_files (read both), list_directory_with_sizes
# (list_directory, then get_file_info). plan is fsagent's own: what a write would touch.
# And, to bring the fixed part of a request under 1,200
# real tokens on a 4096 context (issue 21): list_allowed_roots (paths are relative to the
# first root, as the system prompt says), directory_tree (list_directory, folder by folder),
# get_file_info (list_directory and read_file say what a model needs), copy (read_file, then
# write_file) and make_dir (write_file creates the folders a new file needs). A call to any of
# them still runs, reviewed like any other: they are only not advertised. move stays:
# nothing else renames a folder in one call. And, to bring it under 1,000 (issue 30),
# search_files and patch_file are offered as forms of list_directory and write_file
# (core.tools.merged_tools).
NOT_OFFERED: frozenset[str] = FOLDED | frozenset(
    {
        "touch",
        "file_hash",
        "read_multiple_files",
        "diff_files",
        "list_directory_with_sizes",
        "plan",
        "list_allowed_roots",
        "directory_tree",
        "get_file_info",
        "copy",
        "make_dir",
    }
)

# Parameters the model is not shown: dry_run is how fsagent previews a write itself, expect
# binds an approved write to its preview; the others tune what a call returns and have good
# defaults on the server. A regex can say (?i)
# itself and a path narrows a grep as a glob would; a move that would overwrite is refused
# and the model told why; write_file's append mode is patch_file's job too. delete's
# recursive stays: its refusal of a folder that is not empty says to pass it, and a
# constrained call (core.context.constrained) may hold no argument its schema does not name.
# ask_person's choices (35 real tokens, issue 30): a question asked in words is answered in
# words; a call that gives choices still shows them.
HIDDEN_PARAMETERS: frozenset[str] = frozenset(
    {
        "choices",
        "dry_run",
        "expect",
        "context",
        "max_matches",
        "exclude",
        "expected_sha256",
        "sort_by",
        "ignore_case",
        "glob",
        "overwrite",
        "mode",
    }
)

# One line each, as short as still lets a small model pick the right tool and arguments.
# A tool not named here gets the first sentence of the server's description.
DESCRIPTIONS: dict[str, str] = {
    "list_allowed_roots": "The folders you may use; relative paths start in the first.",
    "list_directory": "List a folder.",
    "directory_tree": "A folder's tree, max_depth levels deep.",
    "read_file": "Read a file, or some lines.",
    "grep": "Find a regex in files.",
    "get_file_info": "Size, type and times of a file or folder.",
    "write_file": "Create or overwrite a file.",
    "make_dir": "Create a folder and its parents.",
    "copy": "Copy a file or folder.",
    "move": "Move or rename.",
    "delete": "Delete a file or folder.",
    "ask_person": "Ask the person instead of guessing.",
}


def offered_tools(
    tools: Iterable[BaseTool], names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The OpenAI-format schemas of the tools the model is offered, in the server's order.

    names, when given, limits them further (the read-only agent's read tools).
    """
    tools = list(tools)
    wanted = None if names is None else set(names)
    by_name = {tool.name: tool for tool in tools}
    folds = {
        fold.tool: by_name[fold.server_tool]
        for fold in FOLDS
        if fold.server_tool in by_name and (wanted is None or fold.server_tool in wanted)
    }
    offered = []
    for tool in tools:
        if tool.name in NOT_OFFERED or (wanted is not None and tool.name not in wanted):
            continue
        schema = model_tool(tool)
        if tool.name in folds:
            schema = folded_schema(schema, model_tool(folds[tool.name]))
        offered.append(schema)
    return offered


def offered_names(schemas: Iterable[dict[str, Any]]) -> list[str]:
    return [schema["function"]["name"] for schema in schemas]


def model_tool(tool: BaseTool) -> dict[str, Any]:
    function = convert_to_openai_tool(tool)["function"]
    name = function["name"]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": DESCRIPTIONS.get(name) or first_sentence(function["description"]),
            "parameters": plain_schema(function.get("parameters") or {"type": "object"}),
        },
    }


def first_sentence(text: str) -> str:
    words = " ".join((text or "").split("\n\n")[0].split())
    for end in (". ", "; "):
        head, found, _ = words.partition(end)
        if found:
            return head + end.strip()
    return words


def plain_schema(schema: Any) -> Any:
    """A JSON schema with only what the model needs to write a valid call."""
    if not isinstance(schema, dict):
        return schema
    plain = {k: v for k, v in schema.items() if k not in ("title", "description", "default")}
    options = plain.get("anyOf")
    if isinstance(options, list):
        # Optional[X] is {"anyOf": [X, {"type": "null"}]}: leaving the argument out says null.
        real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(real) == 1:
            del plain["anyOf"]
            plain = {**plain_schema(real[0]), **plain}
    if isinstance(plain.get("properties"), dict):
        plain["properties"] = {
            name: plain_schema(value)
            for name, value in plain["properties"].items()
            if name not in HIDDEN_PARAMETERS
        }
        if isinstance(plain.get("required"), list):
            plain["required"] = [r for r in plain["required"] if r not in HIDDEN_PARAMETERS]
    if "items" in plain:
        plain["items"] = plain_schema(plain["items"])
    return plain


def schema_text(schemas: list[dict[str, Any]]) -> str:
    """The schemas as one JSON text, for estimating their size."""
    return json.dumps(schemas)
