"""core.context.constrained, piece by piece: the schemas, the tools in the prompt, reading a
reply written to the schema (and its answer as it streams), and when calls are constrained."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from core.approval.approval import CUT_CALL
from core.context.constrained import (
    MAX_CALLS,
    AnswerStream,
    CallMode,
    as_text_protocol,
    bad_replies,
    read_route,
    read_step,
    refuses_schema,
    refuses_tools,
    route_schema,
    step_schema,
    tool_lines,
)
from core.context.text_calls import TEXT_CALL_KEY
from fake_llm import NO_SCHEMA_WORDS, fits, lmstudio_overflow_words

WRITE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Create or overwrite a text file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
PATCH = {
    "type": "function",
    "function": {
        "name": "patch_file",
        "description": "Replace each old_text (found once) with new_text.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_text": {"type": "string"},
                            "new_text": {"type": "string"},
                        },
                        "required": ["old_text", "new_text"],
                    },
                },
                "start_line": {"type": "integer"},
            },
            "required": ["path", "edits"],
        },
    },
}


# -- the schemas ---------------------------------------------------------------------------


def test_the_step_schema_holds_an_answer_or_calls_to_the_offered_tools_only() -> None:
    schema = step_schema([WRITE, PATCH])
    call = {"tool": "write_file", "arguments": {"path": "a", "content": "b"}}
    assert fits({"answer": "hi"}, schema)
    assert fits({"calls": [call]}, schema)
    # Not another tool, not arguments of another shape, not an extra key, not nothing.
    assert not fits({"calls": [{**call, "tool": "delete"}]}, schema)
    assert not fits({"calls": [{"tool": "write_file", "arguments": {"path": "a"}}]}, schema)
    assert not fits({"calls": [{**call, "arguments": {**call["arguments"], "x": 1}}]}, schema)
    assert not fits({"calls": []}, schema) and not fits({"answer": "hi", "x": 1}, schema)
    assert not fits({"calls": [call] * (MAX_CALLS + 1)}, schema)
    edits = {"path": "a", "edits": [{"old_text": "x", "new_text": "y", "more": 1}]}
    assert not fits({"calls": [{"tool": "patch_file", "arguments": edits}]}, schema)
    assert step_schema([]) == schema["anyOf"][0]  # no tools: an answer
    assert fits({"route": "search"}, route_schema(["filesystem", "search"]))
    assert not fits({"route": "other"}, route_schema(["filesystem", "search"]))


def test_the_tools_in_the_prompt_are_a_line_each() -> None:
    assert tool_lines([WRITE, PATCH]).splitlines() == [
        "- write_file(path, content): Create or overwrite a text file.",
        "- patch_file(path, edits: [{old_text, new_text}], start_line?: int): "
        "Replace each old_text (found once) with new_text.",
    ]


def test_calls_and_results_are_sent_as_text_every_template_renders() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    call = {"name": "write_file", "args": {"path": "a", "content": "日本"}, "id": "c1"}
    history: list[BaseMessage] = [
        HumanMessage("make a", id="h1"),
        AIMessage("", tool_calls=[call], id="a1", usage_metadata=usage),
        ToolMessage("wrote a", tool_call_id="c1", id="t1"),
        AIMessage("Done.", id="a2"),
    ]
    sent = as_text_protocol(history, {"c1": "write_file"})
    assert [type(m).__name__ for m in sent] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert json.loads(str(sent[1].content)) == {
        "calls": [{"tool": "write_file", "arguments": {"path": "a", "content": "日本"}}]
    }
    assert sent[1].id == "a1" and sent[1].usage_metadata == usage  # counts are read by id
    assert sent[2].content == "[fsagent: result of write_file]\nwrote a"
    assert sent[3] is history[3]


# -- reading the reply ------------------------------------------------------------------------


def test_a_reply_to_the_schema_becomes_real_calls_and_a_bad_one_never_runs() -> None:
    offered = {"write_file", "read_file"}
    write = {"tool": "write_file", "arguments": {"path": "a", "content": "b"}}
    raw = json.dumps({"calls": [write, write, {"tool": "delete", "arguments": {"path": "a"}}]})
    reply = read_step(AIMessage(raw), offered, "")
    # The repeated call once; the tool not offered as a call that did not parse.
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("write_file", write["arguments"])
    ]
    [bad] = reply.invalid_tool_calls
    assert bad["name"] == "delete" and "not a tool this request offered" in str(bad["error"])
    assert reply.content == ""
    answered = read_step(AIMessage('{"answer": "Hi."}'), offered, "Hi.")
    assert answered.content == "Hi." and not answered.tool_calls
    # A reply cut before its JSON closed keeps what streamed of its answer.
    assert read_step(AIMessage('{"answer": "Hel'), offered, "Hel").content == "Hel"
    # Not JSON (a server that took the schema and did not enforce it): left for the
    # calls-as-text reader, as it came.
    plain = read_step(AIMessage("Sure, here it is."), offered, "")
    assert plain.content == "Sure, here it is." and not plain.tool_calls
    assert read_route('{"route": "search"}') == "search" and read_route("search") == "search"


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_answer_streams_out_of_its_json_however_it_is_cut(size: int) -> None:
    said = 'Line one\nsays "hi" \\ 日本 😀 \u00e9.'
    raw = "{\n  " + json.dumps("answer") + ": " + json.dumps(said, ensure_ascii=True) + "\n}"
    stream = AnswerStream()
    pieces = [stream.feed(raw[i : i + size]) for i in range(0, len(raw), size)]
    assert "".join(pieces) == said == stream.text
    assert all("{" not in p for p in pieces)
    calls = AnswerStream()
    assert calls.feed('{"calls": [{"tool": "x", "arguments": {"answer": "no"}}]}') == ""


# -- when calls are constrained ------------------------------------------------------------


def test_which_protocol_a_thread_gets() -> None:
    text_call = AIMessage("", additional_kwargs={TEXT_CALL_KEY: "tool_call tags"})
    malformed = AIMessage("", invalid_tool_calls=[{"name": "x", "args": "{", "id": "1"}])
    cut = AIMessage(
        "", invalid_tool_calls=[{"name": "x", "args": "", "id": "2", "error": CUT_CALL}]
    )
    once: list[BaseMessage] = [HumanMessage("a", id="h"), text_call]
    twice: list[BaseMessage] = [*once, malformed, cut]
    assert bad_replies(twice) == 2  # a call cut at the reply limit is neither
    auto = CallMode("auto")
    assert auto.protocol(once) == "native" and auto.protocol(twice) == "schema"
    assert CallMode("off").protocol(twice) == "native"
    assert CallMode("on").protocol([]) == "schema"
    # A server without tool support for the model: the schema; without response_format
    # either: the tools in the prompt, no schema.
    assert CallMode("auto", no_tools="LM Studio says so").protocol([]) == "schema"
    assert CallMode("off", no_tools="it says so").protocol([]) == "prompt"
    assert CallMode("on", no_schema="refused").protocol([]) == "native"
    # auto says so once a thread.
    assert "2 times in this thread" in str(auto.notice(twice, "t1"))
    assert auto.notice(twice, "t1") is None and auto.notice(twice, "t2") is not None
    assert CallMode("on").notice(twice, "t1") is None  # asked for: nothing to say


def test_the_real_refusals_are_told_apart() -> None:
    assert refuses_tools("registry.ollama.ai/library/qwen:4b does not support tools")
    assert refuses_schema(NO_SCHEMA_WORDS.format(kind="json_schema"))
    assert refuses_schema("'response_format.json_schema.schema' must be an object")  # LM Studio
    overflow = lmstudio_overflow_words(5000, 4096, "does-not-fit")
    assert not refuses_schema(overflow) and not refuses_tools(overflow)
