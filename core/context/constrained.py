"""Tool calls a small model cannot get wrong: each agent step asks the server for output that
fits a JSON schema, one or more calls to the tools this request offers (each with arguments
that fit that tool's own schema) or an answer, and the reply is read into real tool calls.

Small models rarely call a tool through a template's tool format: SmolLM2-135M answered
prose to "Create a file notes.txt containing 'buy milk'" with `tools` and with `tool_choice:
"required"`, and a valid call once its output had to fit a schema (issue 30). llama.cpp turns
`response_format: {"type": "json_schema", ...}` into a grammar; LM Studio documents the same
field (structured output); Ollama's OpenAI-compatible endpoint takes it too (0.5 and later)
and hands it to its own `format`.

A constrained request offers its tools in the system prompt, as one line each, rather than in
`tools`: a server without tool support for the model refuses `tools` (Ollama's 400 "... does
not support tools"), a template's tool block is ten times longer (llama.cpp's Hermes template
wraps each tool in ~90 tokens), and the grammar, not the template, makes the call valid. For
the same reason the model's earlier calls are sent back as the JSON it writes, and their
results as a person's message that names the tool (`as_text_protocol`): every template
renders those, whether it knows tool calls or not.

Protocols, as `CallMode.protocol` chooses them for a request:

- native: `tools` in the request, the server's own tool calls (the default);
- schema: the tools in the prompt and `response_format` with the schema (`--constrain-calls
  on`, or `auto` once the server says the model has no tool support or the model wrote its
  calls as text or malformed them twice in a thread);
- prompt: the tools in the prompt and no schema, for a server that refuses both `tools` and
  `response_format`; replies are read as the JSON the prompt asks for, or as calls written
  as text (core.context.text_calls).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)

from core.approval.approval import CUT_CALL
from core.context.text_calls import TEXT_CALL_KEY
from core.threads.messages import content_text

ConstrainMode = Literal["auto", "on", "off"]
CONSTRAIN_MODES: tuple[ConstrainMode, ...] = ("auto", "on", "off")
Protocol = Literal["native", "schema", "prompt"]

CONSTRAINED_KEY = "fsagent_constrained"  # additional_kwargs: a reply read from the schema's JSON

# Calls a model may make in one step: a small model under a grammar repeats its call until
# the reply limit; four is more than a step needs.
MAX_CALLS = 4

# auto turns the schema on after this many replies in a thread whose calls were written as
# text or did not parse.
BAD_REPLIES = 2

FORMAT_NOTE = (
    'Reply with JSON only: {"calls": [{"tool": NAME, "arguments": {...}}]} to use tools, '
    'or {"answer": TEXT} to answer.'
)
RESULT_HEAD = "[fsagent: result of {tool}]"


# -- the schemas -----------------------------------------------------------------------------


def _function(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    function = schema.get("function")
    return function if isinstance(function, Mapping) else schema


def _closed(schema: Any) -> Any:
    """A tool's parameters with no property beyond those it names, all the way down: a
    grammar then cannot add one (llama.cpp lets an object without additionalProperties hold
    any key)."""
    if not isinstance(schema, dict):
        return schema
    closed = dict(schema)
    if isinstance(closed.get("properties"), dict):
        closed["properties"] = {k: _closed(v) for k, v in closed["properties"].items()}
        closed.setdefault("additionalProperties", False)
    if "items" in closed:
        closed["items"] = _closed(closed["items"])
    return closed


def step_schema(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{"answer": text}, or {"calls": [...]} with each call naming one of `tools` and holding
    arguments that fit that tool's own parameters."""
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    if not tools:
        return answer
    calls = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": _function(tool)["name"]},
                "arguments": _closed(_function(tool).get("parameters") or {"type": "object"}),
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    call = {
        "type": "object",
        "properties": {
            "calls": {
                "type": "array",
                "items": {"anyOf": calls},
                "minItems": 1,
                "maxItems": MAX_CALLS,
            }
        },
        "required": ["calls"],
        "additionalProperties": False,
    }
    return {"anyOf": [answer, call]}


def route_schema(routes: Sequence[str]) -> dict[str, Any]:
    """The router's answer: one of the route names."""
    return {
        "type": "object",
        "properties": {"route": {"enum": list(routes)}},
        "required": ["route"],
        "additionalProperties": False,
    }


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's form, which llama.cpp, LM Studio and Ollama's /v1 all read."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


# -- the tools in the prompt -----------------------------------------------------------------


def _shape(schema: Any) -> str:
    """A parameter's type in a few characters: nothing for a string."""
    if not isinstance(schema, Mapping):
        return ""
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items") or {}
        if isinstance(items, Mapping) and isinstance(items.get("properties"), Mapping):
            return ": [{" + ", ".join(items["properties"]) + "}]"
        return f": [{_shape(items).removeprefix(': ') or 'str'}]"
    return {"integer": ": int", "number": ": number", "boolean": ": bool"}.get(str(kind), "")


def tool_lines(tools: Iterable[Mapping[str, Any]]) -> str:
    """One line a tool, `name(param, optional?): description`, for the system prompt."""
    lines = []
    for tool in tools:
        function = _function(tool)
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or ())
        params = ", ".join(
            f"{name}{'' if name in required else '?'}{_shape(spec)}"
            for name, spec in (parameters.get("properties") or {}).items()
        )
        lines.append(f"- {function['name']}({params}): {function.get('description', '')}")
    return "\n".join(lines)


def prompt_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """What the system prompt adds for a request that offers its tools in the prompt."""
    if not tools:
        return f"\n\n{FORMAT_NOTE}"
    return f"\n\nTools:\n{tool_lines(tools)}\n\n{FORMAT_NOTE}"


def as_text_protocol(
    messages: Sequence[BaseMessage], tool_of: Mapping[str, str]
) -> list[BaseMessage]:
    """The history as a request without `tools` carries it: each call the model made as the
    JSON it writes, and the results of a step as one message from the person's side, each
    under the tool's name. Ids and usage are kept: the server's counts are read by them."""
    sent: list[BaseMessage] = []
    results: list[ToolMessage] = []

    def flush() -> None:
        if results:
            parts = [
                f"{RESULT_HEAD.format(tool=tool_of.get(r.tool_call_id, r.name or 'the tool'))}\n"
                f"{content_text(r.content)}"
                for r in results
            ]
            sent.append(HumanMessage("\n\n".join(parts), id=f"results_{results[0].id}"))
            results.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            results.append(message)
            continue
        flush()
        if isinstance(message, AIMessage) and message.tool_calls:
            sent.append(
                AIMessage(
                    content=calls_json(message),
                    id=message.id,
                    usage_metadata=message.usage_metadata,
                    response_metadata=message.response_metadata,
                )
            )
        else:
            sent.append(message)
    flush()
    return sent


def calls_json(message: AIMessage) -> str:
    """A reply's calls as the schema has the model write them."""
    calls = [{"tool": call["name"], "arguments": call["args"]} for call in message.tool_calls]
    said = content_text(message.content).strip()
    if said:
        return json.dumps({"answer": said, "calls": calls}, ensure_ascii=False)
    return json.dumps({"calls": calls}, ensure_ascii=False)


# -- reading the reply -----------------------------------------------------------------------


def read_step(message: AIMessage, offered: Collection[str], answer: str) -> AIMessage:
    """A reply written to the step schema, as a reply with real tool calls.

    answer is the answer text as it streamed (AnswerStream), which is what stays of a reply
    cut off before its JSON closed. A reply that is not the schema's JSON (a server that
    took the schema and did not enforce it) is left as it is, for the calls-as-text reader.
    A call to a tool this request did not offer is kept as a call that did not parse, so it
    is answered with an error the model can act on and never runs."""
    raw = content_text(message.content)
    try:
        value = json.loads(raw)
    except ValueError:
        if answer or not raw.lstrip().startswith("{"):
            return message.model_copy(update={"content": answer or raw})
        return message.model_copy(update={"content": ""})
    if not isinstance(value, dict):
        return message
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    seen: list[tuple[str, str]] = []
    for item in value.get("calls") or []:
        name = item.get("tool") if isinstance(item, dict) else None
        args = item.get("arguments") if isinstance(item, dict) else None
        key = (str(name), json.dumps(args, sort_keys=True))
        if key in seen:
            continue  # a small model repeats its call: once is what it meant
        seen.append(key)
        call_id = f"call_json_{uuid.uuid4().hex[:12]}"
        if isinstance(name, str) and name in offered and isinstance(args, dict):
            calls.append({"name": name, "args": args, "id": call_id, "type": "tool_call"})
        else:
            invalid.append(
                {
                    "name": str(name) if name is not None else None,
                    "args": json.dumps(args),
                    "id": call_id,
                    "error": f"not a tool this request offered: {name}",
                    "type": "invalid_tool_call",
                }
            )
    said = value.get("answer")
    return message.model_copy(
        update={
            "content": said if isinstance(said, str) else "",
            "tool_calls": calls,
            "invalid_tool_calls": invalid,
            "additional_kwargs": {**message.additional_kwargs, CONSTRAINED_KEY: True},
        }
    )


def read_route(text: str) -> str:
    """The route of a reply written to the route schema, or the text itself."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    route = value.get("route") if isinstance(value, dict) else None
    return route if isinstance(route, str) else text


_ANSWER_START = re.compile(r'^\s*\{\s*"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class AnswerStream:
    """The text of the `answer` string of a reply written to the step schema, as its JSON
    streams in: what a person should see of the reply while it is written."""

    def __init__(self) -> None:
        self.raw = ""
        self.start: int | None = None  # where the answer's text begins in raw
        self.at = 0  # how far raw is decoded
        self.text = ""
        self.done = False

    def feed(self, piece: str) -> str:
        """The answer's text this piece adds."""
        self.raw += piece
        if self.done:
            return ""
        if self.start is None:
            found = _ANSWER_START.match(self.raw)
            if found is None:
                return ""
            self.start = self.at = found.end()
        before = len(self.text)
        raw, i = self.raw, self.at
        while i < len(raw):
            char = raw[i]
            if char == '"':
                self.done = True
                i += 1
                break
            if char != "\\":
                self.text += char
                i += 1
                continue
            if i + 1 >= len(raw):
                break  # the escape's second half is still to come
            kind = raw[i + 1]
            if kind != "u":
                self.text += _ESCAPES.get(kind, kind)
                i += 2
                continue
            code = raw[i + 2 : i + 6]
            if len(code) < 4:
                break
            value = int(code, 16) if re.fullmatch(r"[0-9a-fA-F]{4}", code) else 0xFFFD
            if 0xD800 <= value < 0xDC00:  # a surrogate pair's first half: wait for both
                low = raw[i + 6 : i + 12]
                if len(low) < 6:
                    break
                if low.startswith("\\u") and re.fullmatch(r"[0-9a-fA-F]{4}", low[2:]):
                    value = 0x10000 + ((value - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)
                    i += 6
            self.text += chr(value) if value < 0xD800 or value > 0xDFFF else "\ufffd"
            i += 6
        self.at = i
        return self.text[before:]


# -- when to constrain -----------------------------------------------------------------------


def bad_replies(messages: Sequence[AnyMessage]) -> int:
    """Replies of the model in this history whose calls were written as text, or did not
    parse (a call cut off at the reply limit is neither)."""
    return sum(
        1
        for m in messages
        if isinstance(m, AIMessage)
        and (
            TEXT_CALL_KEY in m.additional_kwargs
            or any(c.get("error") != CUT_CALL for c in m.invalid_tool_calls)
        )
    )


NO_TOOLS_WORDS = ("does not support tools",)  # Ollama's 400 (ollama#5793, #6027)


def refuses_tools(words: str) -> bool:
    """A server's refusal of a request because the model has no tool support."""
    lowered = words.lower()
    return any(phrase in lowered for phrase in NO_TOOLS_WORDS)


def refuses_schema(words: str) -> bool:
    """A server's refusal of `response_format` (a server without structured output: e.g.
    `response_format type must be one of "text" or "json_object", but got: json_schema`,
    llama.cpp's words before it took schemas, still ik_llama.cpp's in 2025 (ik_llama.cpp#778))."""
    lowered = words.lower()
    return "response_format" in lowered or "json_schema" in lowered


@dataclass
class CallMode:
    """Whether a request's calls are constrained, and what the server has refused.

    setting is --constrain-calls. no_tools is why the model has no tool support, when the
    server said so (LM Studio's model list, llama.cpp's /props, Ollama's 400); no_schema is
    the server's words refusing `response_format`. Both hold for the life of the process.
    notices collects the one-line notices not given yet; `said` what was given, so each is
    said once (per thread for a thread's own reason)."""

    setting: ConstrainMode = "auto"
    no_tools: str | None = None
    no_schema: str | None = None
    said: set[str] = field(default_factory=set)

    def wanted(self, messages: Sequence[AnyMessage]) -> str | None:
        """Why this thread's requests should be constrained, or None."""
        if self.setting == "off":
            return None
        if self.setting == "on":
            return "--constrain-calls on"
        if self.no_tools is not None:
            return self.no_tools
        if bad_replies(messages) >= BAD_REPLIES:
            return "bad replies"
        return None

    def protocol(self, messages: Sequence[AnyMessage]) -> Protocol:
        if self.wanted(messages) is not None and self.no_schema is None:
            return "schema"
        if self.no_tools is not None:
            return "prompt"
        return "native"

    def notice(self, messages: Sequence[AnyMessage], thread: str) -> str | None:
        """The one line that says auto turned the schema on: once a process for the
        server's reason, once a thread (in this process) for the thread's; None when there
        is nothing new to say."""
        if self.setting != "auto" or self.protocol(messages) != "schema":
            return None
        why = self.wanted(messages)
        key = "server" if why == self.no_tools else f"{thread}:bad replies"
        if key in self.said:
            return None
        self.said.add(key)
        if why == "bad replies":
            return (
                f"⚙ the model wrote its tool calls as text or malformed them {BAD_REPLIES} "
                "times in this thread: its calls are constrained to a JSON schema from now on "
                "(--constrain-calls off stops it)"
            )
        return (
            f"⚙ {why}: its calls are constrained to a JSON schema (--constrain-calls off stops it)"
        )

    def once(self, key: str, line: str, say: Callable[[str], None] | None) -> None:
        """Say a process-wide line once."""
        if key not in self.said:
            self.said.add(key)
            if say is not None:
                say(line)
