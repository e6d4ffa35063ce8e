"""A scripted stand-in for LM Studio's OpenAI-compatible server, for end-to-end tests.

The agent under test runs as a subprocess and talks real HTTP, so this is a real HTTP server
(stdlib only, so it starts fast) that answers /v1/chat/completions from a script of replies:

    script = [text("filesystem"), reply(tool_calls=[tool_call("read_file", {"path": "a"})])]
    with FakeLLM(script) as llm:
        run_agent("--base-url", llm.base_url)
        assert llm.remaining == 0

It can also run as its own process (so a test can kill it to simulate LM Studio going down):

    python tests/fake_llm.py --script steps.json [--port 0] [--auto-route NAME] [--log FILE]
        [--flavour lmstudio|llamacpp|openai|ollama] [--context N] [--slots N]
        [--model NAME[:TYPE[:STATE[:CONTEXT]]] ...]

which prints `ready http://127.0.0.1:PORT/v1` once listening and serves until killed.

Everything below is opt-in; `FakeLLM(script)` behaves as it always has.

Flavours (`flavour=`) copy what each real server says besides chat completions:

- "openai" (default): a plain OpenAI-compatible server, `/v1/models` and nothing else.
- "lmstudio": LM Studio. `/v1/models` lists every downloaded model, embedding ones too;
  the native lists `/api/v0/models` (+ `/{id}`) and the 0.4 `/api/v1/models` say each model's
  type, whether it is loaded and with what context. Unknown paths answer 200 with
  `{"error": "Unexpected endpoint or method. (GET /path)"}`, as LM Studio does. A chat
  request naming a downloaded model that is not loaded loads it (LM Studio's JIT loading).
- "llamacpp": llama-server. One model; `/props` (`default_generation_settings.n_ctx`),
  `/v1/models` with `meta.n_ctx_train`, `/health`; a `timings` object on every answer.
  `props=False` leaves `/props` out, as a proxy in front of llama-server (llama-swap) or an
  old build does: then nothing says the context it runs with.
- "ollama": Ollama (docs.ollama.com/api). `/api/version`, `/api/ps` (each loaded model with
  its allocated `context_length`), `/api/tags`, `POST /api/show` (a Modelfile's `num_ctx`
  when the model sets a context, and `model_info.<arch>.context_length`), a plain-text 404
  elsewhere. Its own runner never refuses a prompt too long: it keeps its last `num_ctx/2 +
  2` tokens, answers 200 and says so only in its usage (ollama/ollama#3839, #17427);
  `llm.truncated` lists each (prompt, kept). A model on its llama-server runner refuses it
  (`ollama_refuses=True`, ollama/ollama#17889): a 400 whose message is llama-server's
  `exceed_context_size_error` body as JSON text (microsoft/vscode#320558).

The catalogue (`models=`) takes plain ids or `FakeModel(id, type=, state=, context=)`.

Tokens. The stand-in renders each request the way a llama.cpp chat template would (the tools
block first, then every message, then the assistant's turn opening; see `render_prompt`) and
cuts that text into tokens with one regular expression (`tokenize`): a word piece of at most
four letters or digits with the space before it, one punctuation mark with the space before
it, or a run of whitespace. That is deterministic, stable under extension (text appended to a
prompt changes at most its last token, as with a real BPE tokenizer) and close to real token
counts: about 4 characters a token for prose, fewer for JSON. `llm.prompt_tokens(request)`
gives the count; `usage` in answers comes from the same tokenizer.

- `context=N` (or per model): a prompt of N tokens or more is refused in the server's own
  words: llama.cpp's 400 `exceed_context_size_error`; LM Studio's 400 `{"error": "<a plain
  string>"}` (`lmstudio_wording=` "n_keep" or "keep-first", see LMSTUDIO_WORDINGS), or when
  streaming, LM Studio 0.4.2x's 200 stream whose one event is `event: error`
  (`stream_errors=False` gives the 400 to a streamed request too); OpenAI's 400
  `context_length_exceeded`; Ollama's, above. A refused request consumes no script step.
  `reply(overflow=N)` is the same refusal naming N tokens whatever the request holds (a
  server counting more than the stand-in), and does. LM Studio's scripted errors
  (`reply(status=500, error=...)`) are plain strings too. A reply that would
  run past the context is cut there, as a real server stops generating.
- `max_tokens` / `max_completion_tokens` in the request cut a reply at that many tokens with
  `finish_reason: "length"`; `reply(loop="I will read the file. ")` repeats that sentence
  until the cut (or 4096 tokens), like a small model stuck in a loop.
- `reply(reasoning="...")` streams `reasoning_content` deltas before the content, as
  llama.cpp and LM Studio do with reasoning models (`reasoning_key=` picks another field
  name, e.g. "reasoning"). A model that thinks inside its content instead is just scripted
  content: `text("<think>hmm</think>Hello")`.
- Prompt cache: each slot (`slots=`, default 1) keeps the tokens of its last request and
  reply; the shared prefix with the next request counts as cached. Reported as llama.cpp
  does (`timings.cache_n`, `timings.prompt_n`, `usage.prompt_tokens_details.cached_tokens`)
  and kept for tests in `llm.cache_stats`.
- Usage in a stream comes as a last chunk with empty `choices`, only when the request asks
  with `stream_options.include_usage` (OpenAI, LM Studio and current llama.cpp alike);
  llama.cpp also puts `timings` on its last chunk.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple, Self

Reply = dict[str, Any]
Step = Reply | Callable[[dict[str, Any]], Reply]
Script = Sequence[Step] | Callable[[dict[str, Any]], Reply]

FLAVOURS = ("openai", "lmstudio", "llamacpp", "ollama")

# A GET route's answer (status, JSON body), or None for a path the server does not serve.
_Got = tuple[int, dict[str, Any]] | None

# Real servers stream text and tool arguments in many small deltas; a few pieces are enough to
# exercise the client's reassembly without making every test slow.
_PIECES = 3

# A looping reply with no max_tokens and no context to stop it still has to end somewhere.
_LOOP_CAP = 4096

_call_ids = itertools.count(1)
_completion_ids = itertools.count(1)


# -- the script ----------------------------------------------------------------------------


def tool_call(name: str, args: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    """One tool call; a str `args` is sent verbatim so tests can send malformed JSON."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": id or f"call_{next(_call_ids)}", "name": name, "arguments": arguments}


def reply(
    content: str = "",
    tool_calls: Sequence[dict[str, Any]] = (),
    *,
    delay: float = 0.0,
    drop_after: int | None = None,
    status: int | None = None,
    error: str | None = None,
    reasoning: str = "",
    loop: str = "",
    hold: bool = False,
    overflow: int | None = None,
) -> Reply:
    """One scripted answer. The dict is JSON-able, which is also the --script file format.

    delay: seconds slept between stream chunks (or before a non-streamed body).
    drop_after: send this many stream chunks, then close the connection without [DONE].
    status/error: answer with this HTTP status and an OpenAI-style error body instead.
    reasoning: sent as reasoning_content before the content.
    loop: appended to the content over and over until max_tokens (or the context) cuts it.
    hold: stream the first piece of the content, then wait for `FakeLLM.release()` (a test
        acts while the answer is on the screen but not done, without a sleep; `FakeLLM.holding`
        is set once the piece is sent).
    overflow: refuse the request as too long for the context, in the flavour's own words
    (as `context=` does), naming this many prompt tokens whatever the request holds: a
    server that counts more than the stand-in's tokenizer.
    """
    return {
        "content": content,
        "tool_calls": [dict(call) for call in tool_calls],
        "delay": delay,
        "drop_after": drop_after,
        "status": status,
        "error": error,
        "reasoning": reasoning,
        "loop": loop,
        "hold": hold,
        "overflow": overflow,
    }


def text(content: str) -> Reply:
    return reply(content=content)


def _normalise(step: Reply) -> Reply:
    """Fill defaults so hand-written JSON scripts may omit keys or give arguments as objects."""
    calls = []
    for call in step.get("tool_calls") or ():
        args = call.get("arguments", call.get("args", {}))
        calls.append(tool_call(call["name"], args, call.get("id")))
    status = step.get("status")
    if status is None and step.get("error") is not None:
        status = 500
    return {
        "content": step.get("content") or "",
        "tool_calls": calls,
        "delay": float(step.get("delay") or 0.0),
        "drop_after": step.get("drop_after"),
        "status": status,
        "error": step.get("error"),
        "reasoning": step.get("reasoning") or "",
        "loop": step.get("loop") or "",
        "hold": bool(step.get("hold")),
        "overflow": step.get("overflow"),
    }


# -- the catalogue -------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeModel:
    """One downloaded model, in LM Studio's words.

    type: "llm", "vlm" or "embeddings". state: "loaded" or "not-loaded".
    context: the context it is (or will be) loaded with; None takes the server's `context`.
    max_context: what the model was trained for (LM Studio's max_context_length,
    llama.cpp's n_ctx_train).
    """

    id: str
    type: str = "llm"
    state: str = "loaded"
    context: int | None = None
    max_context: int = 32768
    publisher: str = "fake"
    arch: str = "llama"
    quantization: str = "Q4_K_M"
    tools: bool = True  # trained for tool use: LM Studio's capabilities, Ollama's refusal

    @property
    def is_chat(self) -> bool:
        return self.type in ("llm", "vlm")


def parse_model(spec: str) -> FakeModel:
    """`NAME[:TYPE[:STATE[:CONTEXT[:no-tools]]]]`, the --model flag's format."""
    name, *rest = spec.split(":")
    fields: dict[str, Any] = {}
    if len(rest) > 0 and rest[0]:
        fields["type"] = rest[0]
    if len(rest) > 1 and rest[1]:
        fields["state"] = rest[1]
    if len(rest) > 2 and rest[2]:
        fields["context"] = int(rest[2])
    if len(rest) > 3 and rest[3]:
        fields["tools"] = rest[3] != "no-tools"
    return FakeModel(name, **fields)


# -- tokens --------------------------------------------------------------------------------

# A CJK character, or a word piece of at most 4 other letters/digits, or one other character,
# each with the one space before it; or a run of whitespace. Every character matches, so the
# tokens join back into the text exactly, which is what lets a reply be cut at a token. CJK
# text is about a token a character in real tokenizers (three times our estimate of
# characters / 3): the stand-in counts it so, which is how the tests meet a server that
# counts more than fsagent guessed (issue 30).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf" ?[{_CJK}]| ?[^\W{_CJK}]{{1,4}}| ?[^\w\s]|\s+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _text_of(content: Any) -> str:
    """Message content as text: a string, or OpenAI's list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def _call_text(name: str, arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _render_message(message: dict[str, Any]) -> str:
    role = str(message.get("role") or "user")
    body = _text_of(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        body += _call_text(str(function.get("name", "")), str(function.get("arguments", "")))
    return f"<|{role}|>\n{body}<|end|>\n"


def render_prompt(request: dict[str, Any]) -> str:
    """The request as one prompt text, laid out like a llama.cpp chat template.

    The tools block comes first, as in most templates, so a request with other tools (or
    none, like the router's) shares no prefix with the one before it: that is what kills a
    real server's prompt cache on a route switch.
    """
    parts = []
    tools = request.get("tools")
    if tools:
        schemas = "\n".join(json.dumps(tool) for tool in tools)
        parts.append(f"<|tools|>\n{schemas}<|end|>\n")
    parts.extend(_render_message(message) for message in request.get("messages") or ())
    parts.append("<|assistant|>\n")
    return "".join(parts)


def _generated_text(step: Reply) -> str:
    """What the model produced, as the next request's template will render it back."""
    thought = f"<think>{step['reasoning']}</think>" if step["reasoning"] else ""
    calls = "".join(_call_text(c["name"], c["arguments"]) for c in step["tool_calls"])
    return thought + step["content"] + calls + "<|end|>\n"


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class CacheStat(NamedTuple):
    """One answered request: its prompt tokens, how many came from the cache, how many not."""

    prompt_tokens: int
    cached: int
    processed: int


@dataclass
class _Generation:
    """A step as the server delivers it: possibly cut short, with its accounting."""

    step: Reply
    finish: str
    completion_tokens: int


def _may_call_tools(request: dict[str, Any]) -> bool:
    return bool(request.get("tools")) and request.get("tool_choice") != "none"


def _limit_of(request: dict[str, Any]) -> int | None:
    # llama.cpp's order of precedence; -1 (LM Studio's documented default) means no limit.
    for key in ("n_predict", "max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value if value > 0 else None
    return None


def _generate(step: Reply, limit: int | None) -> _Generation:
    """Cut the reply at `limit` tokens: reasoning first, then content, then tool calls."""
    content = step["content"]
    if step["loop"]:
        limit = limit if limit is not None else _LOOP_CAP
        more = step["loop"]
        while len(tokenize(content)) <= limit:
            content += more
            more += more  # doubling: a few rounds reach any limit
    budget = limit if limit is not None else sys.maxsize
    used = 0
    cut = False

    def take(value: str) -> str:
        nonlocal used, cut
        tokens = tokenize(value)
        room = budget - used
        if len(tokens) > room:
            cut = True
            tokens = tokens[: max(0, room)]
        used += len(tokens)
        return "".join(tokens)

    reasoning = take(step["reasoning"])
    content = take(content) if not cut else ""
    calls = []
    for call in step["tool_calls"]:
        if cut:
            break
        name_tokens = len(tokenize(call["name"]))
        used += name_tokens
        calls.append({**call, "arguments": take(call["arguments"])})
    finish = "length" if cut else "tool_calls" if calls else "stop"
    cut_step = {**step, "reasoning": reasoning, "content": content, "tool_calls": calls}
    return _Generation(cut_step, finish, min(used, budget))


# -- schemas: what a grammar lets a model write -----------------------------------------------
#
# A request with `response_format: {"type": "json_schema", ...}` is answered within the schema,
# as llama.cpp's grammar (and LM Studio's structured output, Ollama's `format`) would force:
# the scripted content when it is JSON that fits, else the nearest thing that fits. Prose
# becomes the first string a branch asks for (`{"answer": "..."}`); scripted tool calls are
# written as `{"calls": [{"tool": NAME, "arguments": {...}}]}` first, which is what a model
# told of such a schema writes, and then fitted the same way.

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def fits(value: Any, schema: Any) -> bool:
    """Whether value fits the subset of JSON schema grammars take (types, properties,
    required, additionalProperties, enum, const, anyOf, items, min/maxItems)."""
    if not isinstance(schema, dict):
        return True
    if "anyOf" in schema:
        return any(fits(value, option) for option in schema["anyOf"])
    if "const" in schema and value != schema["const"]:
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type") or ("object" if "properties" in schema else None)
    if kind is not None:
        allowed = _TYPES.get(str(kind), (object,))
        if not isinstance(value, allowed) or (kind != "boolean" and isinstance(value, bool)):
            return False
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        if any(key not in value for key in schema.get("required") or ()):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        return all(fits(v, properties[k]) for k, v in value.items() if k in properties)
    if isinstance(value, list):
        if len(value) < int(schema.get("minItems", 0)):
            return False
        if len(value) > int(schema.get("maxItems", len(value))):
            return False
        return all(fits(item, schema.get("items")) for item in value)
    return True


def fitted(value: Any, schema: Any) -> Any:
    """value, or the nearest value that fits schema: what a grammar lets through."""
    if fits(value, schema) or not isinstance(schema, dict):
        return value
    if "anyOf" in schema:
        options = schema["anyOf"]

        # The branch whose properties the value shares most, else the first.
        def shared(option: Any) -> int:
            keys = set((option.get("properties") or {}) if isinstance(option, dict) else {})
            return len(keys & set(value)) if isinstance(value, dict) else 0

        return fitted(value, max(options, key=shared))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        text = str(value).lower()
        return next((e for e in schema["enum"] if str(e).lower() in text), schema["enum"][0])
    kind = schema.get("type") or ("object" if "properties" in schema else "string")
    if kind == "object":
        properties = schema.get("properties") or {}
        given = value if isinstance(value, dict) else {}
        out = {k: fitted(v, properties[k]) for k, v in given.items() if k in properties}
        for key in schema.get("required") or ():
            if key not in out:
                spec = properties.get(key) or {}
                # A model's words go into the first thing the schema asks for.
                loose = None if isinstance(value, dict) or out else value
                out[key] = fitted(loose, spec)
        return out
    if kind == "array":
        items = value if isinstance(value, list) else ([] if value is None else [value])
        items = [fitted(item, schema.get("items")) for item in items]
        least = int(schema.get("minItems", 0))
        while len(items) < least:
            items.append(fitted(None, schema.get("items")))
        return items[: int(schema.get("maxItems", len(items)))]
    if kind == "string":
        return value if isinstance(value, str) else ("" if value is None else json.dumps(value))
    if kind == "integer":
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else 0
    if kind == "boolean":
        return bool(value)
    return None


def schema_of(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request's reply must fit, if it asks for one."""
    wanted = request.get("response_format")
    if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
        return None
    schema = (wanted.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def constrained_call(name: str, args: dict[str, Any]) -> Reply:
    """A reply a model writes to a schema of calls: `{"calls": [{"tool", "arguments"}]}`."""
    return text(json.dumps({"calls": [{"tool": name, "arguments": args}]}))


def within_schema(step: Reply, schema: dict[str, Any]) -> Reply:
    """The step as a grammar for `schema` lets the model write it (see above)."""
    content: Any = step["content"]
    if step["tool_calls"]:
        content = {
            "calls": [
                {"tool": call["name"], "arguments": json.loads(call["arguments"] or "{}")}
                for call in step["tool_calls"]
            ]
        }
    else:
        with contextlib.suppress(ValueError):
            content = json.loads(content)
    written = json.dumps(fitted(content, schema), ensure_ascii=False)
    return {**step, "content": written, "tool_calls": [], "loop": ""}


# A server without structured output, in the words of llama.cpp before it took json_schema
# (utils.hpp, oaicompat_chat_completion_params_parse), which ik_llama.cpp still answered with
# in 2025 as an HTTP 500 `server_error` (ikawrakow/ik_llama.cpp#778).
NO_SCHEMA_WORDS = 'response_format type must be one of "text" or "json_object", but got: {kind}'


# -- the wire format -----------------------------------------------------------------------


def _split(value: str, pieces: int = _PIECES) -> list[str]:
    if not value:
        return []
    size = max(1, -(-len(value) // pieces))
    return [value[i : i + size] for i in range(0, len(value), size)]


def _error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass
class _Answer:
    """Everything a successful answer says, whatever its wire format."""

    generation: _Generation
    model: str
    usage: dict[str, Any]
    timings: dict[str, Any] | None
    reasoning_key: str


def _message(answer: _Answer) -> dict[str, Any]:
    step = answer.generation.step
    message: dict[str, Any] = {"role": "assistant", "content": step["content"]}
    if step["reasoning"]:
        message[answer.reasoning_key] = step["reasoning"]
    if step["tool_calls"]:
        # OpenAI sends null content alongside tool calls when the model said nothing.
        message["content"] = step["content"] or None
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in step["tool_calls"]
        ]
    return message


def _completion(answer: _Answer) -> dict[str, Any]:
    """A non-streamed chat.completion object."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-fake-{next(_completion_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": _message(answer),
                "logprobs": None,
                "finish_reason": answer.generation.finish,
            }
        ],
        "usage": answer.usage,
    }
    if answer.timings is not None:
        body["timings"] = answer.timings
    return body


def _chunks(request: dict[str, Any], answer: _Answer) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed answer, in OpenAI's order."""
    step = answer.generation.step
    base = {
        "id": f"chatcmpl-fake-{next(_completion_ids)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": answer.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _split(step["reasoning"]):
        yield chunk({answer.reasoning_key: piece})
    for piece in _split(step["content"]):
        yield chunk({"content": piece})
    for index, call in enumerate(step["tool_calls"]):
        # The first delta of a call carries id, type and name; later ones only argument text.
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        for piece in _split(call["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    last = chunk({}, answer.generation.finish)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield last
        last = {**base, "choices": [], "usage": answer.usage}
    if answer.timings is not None:
        # llama.cpp hangs its timings on whichever chunk comes last.
        last = {**last, "timings": answer.timings}
    yield last


# LM Studio's wordings of "the prompt does not fit", as users quote them:
# - "n_keep": 0.3.x-0.4.x, HTTP 400 `{"error": "<this string>"}`, quoted in full in
#   Gitlawb/openclaude#353 and anomalyco/opencode#2259;
# - "keep-first": 0.3.x, "Trying to keep the first N tokens when context the overflows...",
#   lmstudio-ai/lmstudio-bug-tracker#546 and #237 (a 400 BadRequestError);
# - "does-not-fit": 0.4.2x, inside a 200 stream's one `event: error` frame,
#   lmstudio-ai/lmstudio-bug-tracker#2322 ("Input does not fit in context length");
# - "cannot-truncate": 0.4.6, HTTP 400 `{"error": "Cannot truncate prompt with n_keep (14169)
#   >= n_ctx (4096)"}`, quoted whole in lreuss07/secintel-ai#1 and anomalyco/opencode#11141.
LMSTUDIO_WORDINGS = ("n_keep", "keep-first", "does-not-fit", "cannot-truncate")


def lmstudio_overflow_words(prompt: int, context: int, wording: str = "n_keep") -> str:
    if wording == "keep-first":
        return (
            f"Trying to keep the first {prompt} tokens when context the overflows. However, "
            f"the model is loaded with context length of only {context} tokens, which is not "
            "enough. Try to load the model with a larger context length, or provide a "
            "shorter input"
        )
    if wording == "cannot-truncate":
        return f"Cannot truncate prompt with n_keep ({prompt}) >= n_ctx ({context})"
    if wording == "does-not-fit":
        # #2322 quotes the first words; the whole line, from LM Studio's MLX engine in a
        # stream's error frame, as a client's test quotes it verbatim (2026-10-08).
        return (
            f"Input does not fit in context length. The input has {prompt} tokens, but the "
            f"context length only supports {context} tokens."
        )
    return (
        "The number of tokens to keep from the initial prompt is greater than the context "
        f"length (n_keep: {prompt}>= n_ctx: {context}). Try to load the model with a larger "
        "context length, or provide a shorter input."
    )


def _overflow(
    flavour: str, prompt: int, context: int, wording: str = "n_keep"
) -> tuple[int, dict[str, Any]]:
    """The status and body a real server answers a prompt too long for its context with."""
    if flavour == "llamacpp":
        # tools/server: ERROR_TYPE_EXCEED_CONTEXT_SIZE, with both counts beside the message.
        message = (
            f"request ({prompt} tokens) exceeds the available context size "
            f"({context} tokens), try increasing it"
        )
        error = {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": context,
        }
        return 400, {"error": error}
    if flavour == "lmstudio":
        return 400, {"error": lmstudio_overflow_words(prompt, context, wording)}
    if flavour == "ollama":
        # A model Ollama runs on its llama-server runner: llama-server's refusal, as JSON
        # text inside the message of Ollama's OpenAI-style error (microsoft/vscode#320558,
        # Ollama 0.30.7; ollama/ollama#17889: "some models return HTTP 400 naming 4096").
        inner = json.dumps(_overflow("llamacpp", prompt, context)[1], separators=(",", ":"))
        error = {"message": inner, "type": "invalid_request_error", "param": None, "code": None}
        return 400, {"error": error}
    message = (
        f"This model's maximum context length is {context} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return 400, {"error": error}


def _timings(cached: int, processed: int, predicted: int) -> dict[str, Any]:
    # Made-up but steady speeds (2 ms a prompt token, 20 ms a predicted one): tests must
    # never depend on the clock.
    prompt_ms = processed * 2.0
    predicted_ms = predicted * 20.0
    return {
        "cache_n": cached,
        "prompt_n": processed,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": 2.0,
        "prompt_per_second": 500.0,
        "predicted_n": predicted,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": 20.0,
        "predicted_per_second": 50.0,
    }


# -- the server ----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Don't join handler threads on close: one may be sleeping in a `delay` for a client that
    # has long gone, and `with FakeLLM(...)` must not wait for it.
    block_on_close = False
    # socketserver's default backlog of 5 makes bursts of parallel clients (benchmarks, the
    # thread-safety test) wait for SYN retries or fail outright.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeLLM) -> None:
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (Ctrl-C, killed agent, closed keep-alive) are routine here; a
        # traceback for each would bury real failures in the test output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the client can keep connections alive and streams can use chunked encoding,
    # which is what lets a dropped stream look truncated rather than merely finished.
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate small writes; with Nagle's algorithm the body
        # waits for the client's delayed ACK, 40 ms a reply, which is not LM Studio's time.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean; `llm.requests` is the log that matters

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        found = self.server.fake._get(path)
        if found is not None:
            self._send_json(*found)
        else:
            self._no_route("GET")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.fake.flavour == "ollama" and self.path.rstrip("/") == "/api/show":
            shown = self.server.fake._ollama_show(raw)
            if shown is None:
                self._send_json(404, {"error": "model not found"})
            else:
                self._send_json(200, shown)
            return
        if self.server.fake.flavour == "llamacpp" and self.path.rstrip("/") == "/tokenize":
            self._send_json(*self.server.fake._tokenize(raw))
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._no_route("POST")
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send_json(400, _error_body("fake_llm: body is not JSON", "invalid_request_error"))
            return
        fake = self.server.fake
        prompt = render_prompt(request)
        tokens = tokenize(prompt)
        refusal = fake._admit(request, len(tokens)) or fake._unsupported(request)
        try:
            if refusal is not None:
                self._refuse(request, *refusal)
                return
            step = fake._next_step(request)
            model = str(request.get("model") or fake.models[0])
            self._answer(request, step, model, prompt, tokens)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up (e.g. Ctrl-C); nothing to do

    def _no_route(self, method: str) -> None:
        if self.server.fake.flavour == "lmstudio":
            # LM Studio answers every path it does not serve with 200 and this body.
            body = {"error": f"Unexpected endpoint or method. ({method} {self.path})"}
            self._send_json(200, body)
        elif self.server.fake.flavour == "ollama":
            # Ollama's router (gin) answers an unknown path with a plain-text 404.
            self._send_json(404, b"404 page not found")
        elif self.server.fake.flavour == "llamacpp":
            error = {"code": 404, "message": "File Not Found", "type": "not_found_error"}
            self._send_json(404, {"error": error})
        else:
            message = f"fake_llm: no route {method} {self.path}"
            self._send_json(404, _error_body(message, "invalid_request_error"))

    def _refuse(self, request: dict[str, Any], status: int, body: dict[str, Any]) -> None:
        fake = self.server.fake
        if fake.flavour == "lmstudio" and request.get("stream") and fake.stream_errors:
            # LM Studio 0.4.2x opens the stream first and reports the refusal inside it
            # (lmstudio-bug-tracker#2322), as an OpenAI-style error object.
            frame = {"error": {"message": body["error"]}}
            self._send_head(200, "text/event-stream", None)
            self._write_chunk(f"event: error\ndata: {json.dumps(frame)}\n\n".encode())
            self._write_chunk(b"")
        else:
            self._send_json(status, body)

    def _answer(
        self, request: dict[str, Any], step: Reply, model: str, prompt: str, tokens: list[str]
    ) -> None:
        fake = self.server.fake
        if step["overflow"] is not None:
            with fake._lock:
                context = fake._context(fake._serving(request.get("model"))) or 4096
            wording = fake.lmstudio_wording
            self._refuse(request, *_overflow(fake.flavour, step["overflow"], context, wording))
            return
        if step["status"] is not None:
            message = step["error"] or f"fake_llm: scripted HTTP {step['status']}"
            time.sleep(step["delay"])
            # LM Studio's errors are `{"error": "<a plain string>"}` (Gitlawb/openclaude#353).
            lmstudio = self.server.fake.flavour == "lmstudio"
            body = {"error": message} if lmstudio else _error_body(message)
            self._send_json(step["status"], body)
            return
        answer = self.server.fake._deliver(request, step, model, prompt, tokens)
        if request.get("stream"):
            self._stream(request, answer)
        else:
            time.sleep(step["delay"])
            body = json.dumps(_completion(answer)).encode()
            if step["drop_after"] is None:
                self._send_json(200, body)
            else:
                # Promise the whole body, deliver half: the client sees a truncated response.
                self._send_head(200, "application/json", len(body))
                self.wfile.write(body[: len(body) // 2])
                self._drop()

    def _stream(self, request: dict[str, Any], answer: _Answer) -> None:
        step = answer.generation.step
        self._send_head(200, "text/event-stream", None)
        holding = bool(step.get("hold"))
        for sent, chunk in enumerate(_chunks(request, answer)):
            if sent == step["drop_after"]:
                self._drop()
                return
            if sent and step["delay"]:
                time.sleep(step["delay"])
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if holding and any(c["delta"].get("content") for c in chunk.get("choices", [])):
                holding = False
                self.server.fake.holding.set()
                self.server.fake.released.wait(timeout=60)
        if step["drop_after"] is not None:
            self._drop()  # asked to drop after more chunks than there were: drop before [DONE]
            return
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the zero-length chunk ends the chunked body

    def _send_head(self, status: int, content_type: str, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_json(self, status: int, body: dict[str, Any] | bytes) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self._send_head(status, "application/json", len(data))
        self.wfile.write(data)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the socket mid-response, the way a crashed or unloaded LM Studio does."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):  # already gone is just as good
            self.connection.shutdown(socket.SHUT_RDWR)


class FakeLLM:
    """A scripted OpenAI chat-completions server on 127.0.0.1, run in a background thread.

    `script` is a list of steps (reply dicts or `(request) -> reply` callables) consumed one per
    chat request, or a single callable answering every request. With `auto_route` set, requests
    in which no tool may be called (the agent's router) get that text without consuming a
    step.

    `models` are ids or `FakeModel`s; `flavour`, `context`, `slots` and `reasoning_key` are
    described in the module docstring.
    """

    def __init__(
        self,
        script: Script,
        models: Sequence[str | FakeModel] = ("fake-model",),
        auto_route: str | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
        flavour: str = "openai",
        context: int | None = None,
        slots: int = 1,
        reasoning_key: str = "reasoning_content",
        props: bool = True,
        lmstudio_wording: str | None = None,
        stream_errors: bool = True,
        structured_output: bool = True,
        ollama_refuses: bool = False,
    ) -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {', '.join(FLAVOURS)}, not {flavour!r}")
        self._script = script if callable(script) else list(script)
        catalogue = [m if isinstance(m, FakeModel) else FakeModel(m) for m in models]
        self.catalogue = catalogue or [FakeModel("fake-model")]
        self.models = [m.id for m in self.catalogue]
        self.auto_route = auto_route
        self.flavour = flavour
        self.context = context
        self.reasoning_key = reasoning_key
        self.props = props
        if lmstudio_wording is not None and lmstudio_wording not in LMSTUDIO_WORDINGS:
            raise ValueError(f"lmstudio_wording must be one of {', '.join(LMSTUDIO_WORDINGS)}")
        # LM Studio's wording of an overflow, and whether a streamed request hears of it in a
        # 200 stream (0.4.2x) or as a 400 before any stream (0.3.x).
        self.lmstudio_wording = lmstudio_wording or "n_keep"
        self.stream_errors = stream_errors
        # Ollama: whether a prompt too long is refused (a model on its llama-server runner)
        # rather than cut from the front and answered (its own runner).
        self.ollama_refuses = ollama_refuses
        # Whether response_format json_schema is honoured (a grammar) or refused, as a server
        # without structured output does (NO_SCHEMA_WORDS).
        self.structured_output = structured_output
        self.tokenized: list[str] = []  # llama.cpp: every text POST /tokenize counted
        self.truncated: list[tuple[int, int]] = []  # Ollama: (prompt tokens, kept), silently
        self.exhausted = 0
        self._port = port
        self._log_path = Path(log_path) if log_path else None
        self._index = 0
        self._requests: list[dict[str, Any]] = []
        self._loaded = {m.id: m.state == "loaded" for m in self.catalogue}
        self._slots: list[list[str]] = [[] for _ in range(max(1, slots))]
        self._cache_stats: list[CacheStat] = []
        self._lock = threading.Lock()
        self.released = threading.Event()  # a `hold` reply goes on (release())
        self.holding = threading.Event()  # a `hold` reply has sent its first words and waits
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def bind(self) -> _Server:
        """Listen without serving yet; `port` is known from here on."""
        if self._server is None:
            self._server = _Server(("127.0.0.1", self._port), self)
        return self._server

    def start(self) -> Self:
        server = self.bind()
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            if self._thread is not None:  # shutdown() waits for a serve_forever that runs
                self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def release(self) -> None:
        """Let a reply scripted with `hold` stream the rest of its answer."""
        self.released.set()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests look at ----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeLLM is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat-completions body received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_with_tools(self) -> list[dict[str, Any]]:
        """The requests in which the model may call a tool: tools offered, and tool_choice
        not "none" (fsagent's router offers the tools too, for the prompt cache, but may not
        call them)."""
        return [r for r in self.requests if _may_call_tools(r)]

    @property
    def remaining(self) -> int:
        """Scripted steps not yet used; always 0 for a callable script, which never runs out."""
        with self._lock:
            return 0 if callable(self._script) else len(self._script) - self._index

    @property
    def cache_stats(self) -> list[CacheStat]:
        """One entry per answered request (refused and scripted-error ones have none)."""
        with self._lock:
            return list(self._cache_stats)

    def prompt_tokens(self, request: dict[str, Any]) -> int:
        """How many tokens this server counts in a request's prompt."""
        return len(tokenize(render_prompt(request)))

    def context_of(self, model_id: str | None = None) -> int | None:
        """The context a request for this model runs in; None when unlimited."""
        with self._lock:
            return self._context(self._serving(model_id))

    def is_loaded(self, model_id: str) -> bool:
        with self._lock:
            return self._loaded.get(model_id, False)

    # -- models and contexts ---------------------------------------------------------------

    def _serving(self, model_id: str | None) -> FakeModel:
        """The model a request runs on: the one it names, else the first loaded chat model."""
        for model in self.catalogue:
            if model.id == model_id:
                return model
        for model in self.catalogue:
            if model.is_chat and self._loaded[model.id]:
                return model
        return self.catalogue[0]

    def _context(self, model: FakeModel) -> int | None:
        if model.context or self.context:
            return model.context or self.context
        # LM Studio and llama.cpp always run in some context; unless told, the trained one.
        return None if self.flavour == "openai" else model.max_context

    def _admit(self, request: dict[str, Any], prompt: int) -> tuple[int, dict[str, Any]] | None:
        """Log the request; the refusal (status, body) when its prompt does not fit."""
        with self._lock:
            self._requests.append(request)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(request) + "\n")
            model = self._serving(request.get("model"))
            if self.flavour in ("lmstudio", "ollama") and model.is_chat:
                self._loaded[model.id] = True  # both load a model on its first request
            context = self._context(model)
        # llama.cpp refuses at `n_tokens >= n_ctx`: the reply needs at least one free cell.
        if context is not None and prompt >= context:
            if self.flavour == "ollama" and not self.ollama_refuses:
                # Ollama's own runner never refuses: it drops the front of the prompt, answers 200
                # (ollama/ollama#3839, #17427: what is kept is num_ctx/2 + 2 tokens).
                with self._lock:
                    self.truncated.append((prompt, context // 2 + 2))
                return None
            return _overflow(self.flavour, prompt, context, self.lmstudio_wording)
        return None

    def _unsupported(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The refusal (status, body) of what the server or the model does not do: tools
        for a model without tool support on Ollama, a schema on a server without
        structured output. Checked after the context, so a refusal is logged too."""
        with self._lock:
            model = self._serving(request.get("model"))
        if self.flavour == "ollama" and request.get("tools") and not model.tools:
            # ollama/ollama#6027 (the /v1 endpoint, verbatim), #5793.
            error = {
                "message": f"{model.id} does not support tools",
                "type": "api_error",
                "param": None,
                "code": None,
            }
            return 400, {"error": error}
        wanted = request.get("response_format")
        if self.structured_output or not isinstance(wanted, dict):
            return None
        words = NO_SCHEMA_WORDS.format(kind=wanted.get("type"))
        if self.flavour == "lmstudio":
            return 400, {"error": words}
        if self.flavour == "llamacpp":
            return 500, {"error": {"code": 500, "message": words, "type": "server_error"}}
        return 400, _error_body(words, "invalid_request_error")

    def _tokenize(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """llama.cpp's POST /tokenize: `{"content": text}` -> `{"tokens": [ids]}`."""
        try:
            content = json.loads(raw).get("content")
        except (ValueError, AttributeError):
            content = None
        if not isinstance(content, str):
            error = {
                "code": 400,
                "message": '"content" must be provided',
                "type": "invalid_request_error",
            }
            return 400, {"error": error}
        with self._lock:
            self.tokenized.append(content)
        return 200, {"tokens": list(range(len(tokenize(content))))}

    def _deliver(
        self, request: dict[str, Any], step: Reply, model: str, text: str, tokens: list[str]
    ) -> _Answer:
        """Cut the step to what the server would produce, and account for the cache."""
        schema = schema_of(request)
        if schema is not None:
            step = within_schema(step, schema)
        with self._lock:
            context = self._context(self._serving(request.get("model")))
        limits = [n for n in (_limit_of(request),) if n is not None]
        if context is not None:
            limits.append(context - len(tokens))  # generation stops at the end of the context
        prompt = len(tokens)
        if self.flavour == "ollama" and context is not None and prompt >= context:
            prompt = context // 2 + 2  # what was kept of it, and all usage will say
            tokens = tokens[-prompt:]
            limits[-1] = context - prompt
        generation = _generate(step, min(limits) if limits else None)
        with self._lock:
            slot = self._slot_for(request, tokens)
            cached = _common_prefix(self._slots[slot], tokens)
            # A real server always evaluates at least the last prompt token itself.
            cached = min(cached, max(0, prompt - 1))
            # The slot now holds the prompt and the reply, as a real KV cache does.
            self._slots[slot] = tokenize(text + _generated_text(generation.step))
            self._cache_stats.append(CacheStat(prompt, cached, prompt - cached))
        completion = generation.completion_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        timings = None
        if self.flavour == "llamacpp":
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
            timings = _timings(cached, prompt - cached, completion)
        return _Answer(generation, model, usage, timings, self.reasoning_key)

    def _slot_for(self, request: dict[str, Any], tokens: list[str]) -> int:
        wanted = request.get("id_slot")
        if isinstance(wanted, int) and 0 <= wanted < len(self._slots):
            return wanted
        # llama.cpp picks the slot whose cached prompt shares the most with this one.
        shares = [_common_prefix(slot, tokens) for slot in self._slots]
        return shares.index(max(shares))

    # -- what GET answers ------------------------------------------------------------------

    def _get(self, path: str) -> _Got:
        with self._lock:
            loaded = dict(self._loaded)
        if self.flavour == "lmstudio":
            return self._lmstudio_get(path, loaded)
        if self.flavour == "llamacpp":
            return self._llamacpp_get(path)
        if self.flavour == "ollama":
            return self._ollama_get(path, loaded)
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.models]
            return 200, {"object": "list", "data": data}
        return None

    def _lmstudio_get(self, path: str, loaded: dict[str, bool]) -> _Got:
        if path == "/v1/models":
            # Every downloaded model, embedding ones too (LM Studio with JIT loading on).
            data = [
                {"id": m.id, "object": "model", "owned_by": "organization_owner"}
                for m in self.catalogue
            ]
            return 200, {"object": "list", "data": data}
        if path == "/api/v0/models":
            data = [self._v0_entry(m, loaded[m.id]) for m in self.catalogue]
            return 200, {"object": "list", "data": data}
        if path.startswith("/api/v0/models/"):
            wanted = path.removeprefix("/api/v0/models/")
            for model in self.catalogue:
                if model.id == wanted:
                    return 200, self._v0_entry(model, loaded[model.id])
            return 404, {"error": f"Model '{wanted}' not found"}
        if path == "/api/v1/models":
            return 200, {"models": [self._v1_entry(m, loaded[m.id]) for m in self.catalogue]}
        return None

    def _v0_entry(self, model: FakeModel, loaded: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": model.id,
            "object": "model",
            "type": model.type,
            "publisher": model.publisher,
            "arch": model.arch,
            "compatibility_type": "gguf",
            "quantization": model.quantization,
            "state": "loaded" if loaded else "not-loaded",
            "max_context_length": model.max_context,
        }
        if loaded:
            entry["loaded_context_length"] = self._context(model)
        if model.is_chat:
            # LM Studio 0.3.16+: what the model can do (its changelog: "tool_use").
            entry["capabilities"] = ["tool_use"] if model.tools else []
        return entry

    def _v1_entry(self, model: FakeModel, loaded: bool) -> dict[str, Any]:
        # The 0.4 list says "llm" or "embedding", and vision under capabilities.
        instances = []
        if loaded:
            instances.append({"id": model.id, "config": {"context_length": self._context(model)}})
        entry: dict[str, Any] = {
            "type": "llm" if model.is_chat else "embedding",
            "publisher": model.publisher,
            "key": model.id,
            "display_name": model.id,
            "quantization": {"name": model.quantization, "bits_per_weight": 4},
            "size_bytes": 1_000_000_000,
            "params_string": None,
            "loaded_instances": instances,
            "max_context_length": model.max_context,
            "format": "gguf",
        }
        if model.is_chat:
            entry["architecture"] = model.arch
            entry["capabilities"] = {
                "vision": model.type == "vlm",
                "trained_for_tool_use": model.tools,
            }
            entry["description"] = None
        return entry

    def _ollama_get(self, path: str, loaded: dict[str, bool]) -> _Got:
        """Ollama's answers (docs.ollama.com/api): `/api/version`, `/api/ps` with each loaded
        model's allocated `context_length`, `/api/tags`, and its OpenAI list."""
        if path == "/api/version":
            return 200, {"version": "0.12.3"}
        if path == "/v1/models":
            data = [
                {"id": m.id, "object": "model", "created": 1_700_000_000, "owned_by": "library"}
                for m in self.catalogue
            ]
            return 200, {"object": "list", "data": data}
        if path == "/api/ps":
            running = [
                {
                    "name": m.id,
                    "model": m.id,
                    "size": 6_591_830_464,
                    "digest": "a2af6cc3eb7f",
                    "details": {
                        "format": "gguf",
                        "family": m.arch,
                        "parameter_size": "4.3B",
                        "quantization_level": m.quantization,
                    },
                    "expires_at": "2026-12-01T12:00:00Z",
                    "size_vram": 6_591_830_464,
                    "context_length": self._context(m),
                }
                for m in self.catalogue
                if loaded.get(m.id)
            ]
            return 200, {"models": running}
        if path == "/api/tags":
            return 200, {"models": [{"name": m.id, "model": m.id} for m in self.catalogue]}
        return None

    def _ollama_show(self, raw: bytes) -> dict[str, Any] | None:
        """POST /api/show: the model's Modelfile parameters (num_ctx if it sets one) and its
        trained maximum in model_info (`<arch>.context_length`)."""
        try:
            name = json.loads(raw).get("model") or json.loads(raw).get("name")
        except (ValueError, AttributeError):
            return None
        model = next((m for m in self.catalogue if m.id == name), None)
        if model is None:
            return None
        parameters = 'stop "<|im_end|>"\ntemperature 0.6'
        if model.context:
            parameters = f"num_ctx {model.context}\n{parameters}"
        return {
            "parameters": parameters,
            "details": {"format": "gguf", "family": model.arch},
            "model_info": {f"{model.arch}.context_length": model.max_context},
        }

    def _llamacpp_get(self, path: str) -> _Got:
        # llama-server serves one model: the first loaded chat model of the catalogue.
        model = self._serving(None)
        context = self._context(model)
        if path in ("/v1/models", "/models"):
            meta = {
                "vocab_type": 2,
                "n_vocab": 128256,
                "n_ctx_train": model.max_context,
                "n_embd": 4096,
                "n_params": 8_030_261_312,
                "size": 4_912_898_304,
            }
            entry = {
                "id": model.id,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "llamacpp",
                "meta": meta,
            }
            return 200, {"object": "list", "data": [entry]}
        if path == "/props" and self.props:
            settings = {
                "id": 0,
                "id_task": -1,
                "n_ctx": context,
                "speculative": False,
                "is_processing": False,
                "params": {"n_predict": -1, "max_tokens": -1, "n_keep": 0, "stream": True},
                "prompt": "",
            }
            return 200, {
                "default_generation_settings": settings,
                "total_slots": len(self._slots),
                "model_path": f"models/{model.id}.gguf",
                "chat_template": "fake",
                "chat_template_caps": {
                    "supports_tools": model.tools,
                    "supports_tool_calls": model.tools,
                    "supports_system_role": True,
                },
                "modalities": {"vision": model.type == "vlm"},
                "build_info": "b0000-fake",
            }
        if path == "/health":
            return 200, {"status": "ok"}
        return None

    # -- the script ------------------------------------------------------------------------

    def _next_step(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            number = len(self._requests)
            if self.auto_route is not None and not _may_call_tools(request):
                return _normalise(text(self.auto_route))
            if callable(self._script):
                step: Step = self._script
            elif self._index < len(self._script):
                step = self._script[self._index]
                self._index += 1
            else:
                self.exhausted += 1
                return _normalise(
                    reply(status=500, error=f"fake_llm: script exhausted at request {number}")
                )
        # Call dynamic steps outside the lock: they may be slow or read `requests` themselves.
        return _normalise(step(request) if callable(step) else step)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted fake of LM Studio's OpenAI API.")
    parser.add_argument("--script", required=True, help="JSON file: a list of reply dicts")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--auto-route", default=None)
    parser.add_argument("--log", default=None, help="append each request body as a JSON line")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        default=None,
        help="NAME[:TYPE[:STATE[:CONTEXT]]], e.g. nomic-embed:embeddings:loaded; repeatable",
    )
    parser.add_argument("--flavour", choices=FLAVOURS, default="openai")
    parser.add_argument("--context", type=int, default=None, help="context length in tokens")
    parser.add_argument("--slots", type=int, default=1, help="prompt-cache slots")
    # The real servers' quirks, as the tests use them (see docs/model-servers.md).
    parser.add_argument(
        "--lmstudio-wording",
        choices=LMSTUDIO_WORDINGS,
        default=None,
        help="LM Studio's words for an overflow (with --flavour lmstudio)",
    )
    parser.add_argument(
        "--no-stream-errors",
        action="store_true",
        help="LM Studio 0.3.x: an overflow is a 400 before any stream, not a 200 stream "
        "holding `event: error` (0.4.2x)",
    )
    parser.add_argument(
        "--reasoning-key",
        default="reasoning_content",
        help="the delta field reasoning streams in (LM Studio and llama.cpp: "
        "reasoning_content; Ollama: reasoning)",
    )
    parser.add_argument(
        "--no-structured-output",
        action="store_true",
        help="refuse response_format, as a server without structured output does",
    )
    parser.add_argument(
        "--ollama-refuses",
        action="store_true",
        help="Ollama: refuse a prompt too long (a model on its llama-server runner) rather "
        "than cut it and answer",
    )
    parser.add_argument(
        "--no-props",
        action="store_true",
        help="llama.cpp without GET /props (a proxy in front, such as llama-swap, or an old build)",
    )
    args = parser.parse_args(argv)

    script = json.loads(Path(args.script).read_text(encoding="utf-8"))
    fake = FakeLLM(
        script,
        models=[parse_model(spec) for spec in args.models or ["fake-model"]],
        auto_route=args.auto_route,
        port=args.port,
        log_path=args.log,
        flavour=args.flavour,
        context=args.context,
        slots=args.slots,
        reasoning_key=args.reasoning_key,
        props=not args.no_props,
        lmstudio_wording=args.lmstudio_wording,
        stream_errors=not args.no_stream_errors,
        structured_output=not args.no_structured_output,
        ollama_refuses=args.ollama_refuses,
    )
    server = fake.bind()
    print(f"ready {fake.base_url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
