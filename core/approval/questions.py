"""The `ask_person` tool: the model asks the person a question instead of guessing.

It is not a tool of our MCP server: the graph handles its calls itself. A call pauses the
thread the way an approval does, with a payload of its own kind:

    {"kind": "question", "version": 1, "route": "filesystem",
     "calls": [{"id": "call_q1", "name": "ask_person", "args": {...},
                "question": "Which list?", "choices": ["notes/todo.md", "todo.md"]}]}

and resumes with the answers keyed by call id, whoever gives them (the terminal, `fsagent
approve NAME --answer TEXT`, the HTTP admin API):

    {"answers": {"call_q1": "notes/todo.md"}, "by": "person"}

An answer that is missing, null or blank means no one could answer: the model reads "No one
can answer; decide yourself or stop." It is not a write, so `--approve yes` never answers it;
with `--approve no` no one is asked. Nothing here does I/O: the `ask` node runs again from the
top on resume.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict, cast

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from core.approval.approval import (
    PERSON_SOURCES,
    ApprovalPayload,
    ApprovalRecord,
    ToolCall,
    call_problem,
    read_approval,
    tool_message,
)
from core.tools.tool_groups import ASK_PERSON

QUESTION_KIND: Final = "question"
QUESTION_VERSION = 1
NO_ONE_CAN_ANSWER = "No one can answer; decide yourself or stop."

# Short on purpose: every request carries it, and local models run in small contexts.
ASK_PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "the question, in one or two sentences"},
        "choices": {
            "type": "array",
            "items": {"type": "string"},
            "description": "optional: the answers you think likely",
        },
    },
    "required": ["question"],
}
ASK_PERSON_DESCRIPTION = (
    "Ask the person a question and wait for the answer. Use it when you are unsure what they "
    "want, instead of guessing."
)


async def _never_run(**_: Any) -> str:
    # The graph answers ask_person calls from the person's answers; it never runs the tool.
    return "Error: ask_person is answered by the person, not run."


def ask_person_tool() -> BaseTool:
    return StructuredTool(
        name=ASK_PERSON,
        description=ASK_PERSON_DESCRIPTION,
        args_schema=ASK_PERSON_SCHEMA,
        coroutine=_never_run,
    )


def with_ask_person(tools: list[BaseTool]) -> list[BaseTool]:
    """`tools` and ask_person, which the model may always call (once, whoever adds it)."""
    if any(tool.name == ASK_PERSON for tool in tools):
        return list(tools)
    return [*tools, ask_person_tool()]


def questions_to_ask(message: AIMessage, schemas: dict[str, dict[str, Any]]) -> list[ToolCall]:
    """The ask_person calls of a model message that can be asked (valid arguments)."""
    return [
        call
        for call in message.tool_calls
        if call["name"] == ASK_PERSON and call_problem(call, schemas) is None
    ]


def choices_of(call: ToolCall) -> list[str]:
    choices = (call.get("args") or {}).get("choices") or []
    return [str(choice) for choice in choices if str(choice).strip()]


class QuestionCall(TypedDict):
    """One ask_person call of a question payload: the call, and the question it asks."""

    id: str
    name: str
    args: dict[str, Any]
    question: str
    choices: list[str]


class QuestionPayload(TypedDict):
    """What a thread paused on a question waits on, and its JSON form (module docstring)."""

    kind: Literal["question"]  # QUESTION_KIND: what tells it from an ApprovalPayload
    version: int
    route: str
    calls: list[QuestionCall]


def read_question(value: Any) -> QuestionPayload | None:
    """An interrupt's value (or its JSON) as a question payload; None if it is not one. The
    version is judged by `is_resumable_question`."""
    if not is_question(value):
        return None
    calls = value.get("calls")
    if not isinstance(calls, list) or not all(_is_question_call(call) for call in calls):
        return None
    return cast(QuestionPayload, value)


def _is_question_call(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("question"), str)
        and isinstance(value.get("choices"), list)
    )


# What a paused thread waits on, which a person answers: an approval or a question.
Pause = ApprovalPayload | QuestionPayload


def read_pause(value: Any) -> Pause | None:
    """An interrupt's value as the payload a person answers; None if it is neither kind."""
    return read_approval(value) or read_question(value)


def question_json(payload: QuestionPayload) -> dict[str, Any]:
    """The payload's JSON form: the same keys, as a plain dict."""
    return {**payload, "calls": [dict(call) for call in payload["calls"]]}


def question_payload(route: str, calls: list[ToolCall]) -> QuestionPayload:
    return {
        "kind": QUESTION_KIND,
        "version": QUESTION_VERSION,
        "route": route,
        "calls": [
            {
                "id": call["id"],
                "name": call["name"],
                "args": call["args"],
                "question": str(call["args"].get("question", "")),
                "choices": choices_of(call),
            }
            for call in calls
        ],
    }


def is_question(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == QUESTION_KIND


def is_resumable_question(value: Any) -> bool:
    return (
        is_question(value)
        and value.get("version") == QUESTION_VERSION
        and isinstance(value.get("calls"), list)
    )


def record_answers(value: Any, calls: list[ToolCall]) -> dict[str, ApprovalRecord]:
    """One record per question from a resume value; anything but a non-blank text is "no
    one could answer". Records carry what the audit needs, like approval records."""
    given = value.get("answers") if isinstance(value, dict) else None
    given = given if isinstance(given, dict) else {}
    by = value.get("by") if isinstance(value, dict) else None
    by = by if by in PERSON_SOURCES else "person"
    records: dict[str, ApprovalRecord] = {}
    for call in calls:
        text = given.get(call["id"])
        if isinstance(text, str) and text.strip():
            records[call["id"]] = answered(text.strip(), by)
        else:
            reason = value.get("reason") if isinstance(value, dict) else None
            records[call["id"]] = unanswered(str(reason or "no one answered"), by)
    return records


def answered(text: str, by: str) -> ApprovalRecord:
    return {"type": "answer", "decision": "answer", "message": text, "tool": ASK_PERSON, "by": by}


def unanswered(reason: str, by: str) -> ApprovalRecord:
    return {
        "type": "unanswered",
        "decision": "unanswered",
        "message": reason,
        "reason": reason,
        "tool": ASK_PERSON,
        "by": by,
    }


def unanswered_by_mode(calls: list[ToolCall]) -> dict[str, ApprovalRecord]:
    """With --approve no nobody is there to ask."""
    reason = "fsagent runs with --approve no: no one is asked"
    return {call["id"]: unanswered(reason, "mode") for call in calls}


def answer_message(call: ToolCall, record: ApprovalRecord | None) -> ToolMessage:
    """What the model reads as the result of its ask_person call."""
    if record is not None and record["type"] == "answer":
        return tool_message(call["id"], f"The person answered: {record.get('message', '')}")
    return tool_message(call["id"], NO_ONE_CAN_ANSWER)
