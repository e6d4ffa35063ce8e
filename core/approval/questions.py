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

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from core.approval.approval import (
    PERSON_SOURCES,
    ApprovalRecord,
    ToolCall,
    call_problem,
    tool_message,
)

# As in core.approval.approval: the payload's types and readers are core.approval.pauses'.
from core.approval.pauses import QUESTION_KIND as QUESTION_KIND
from core.approval.pauses import QUESTION_VERSION
from core.approval.pauses import Pause as Pause
from core.approval.pauses import QuestionCall as QuestionCall
from core.approval.pauses import QuestionPayload as QuestionPayload
from core.approval.pauses import is_question as is_question
from core.approval.pauses import is_resumable_question as is_resumable_question
from core.approval.pauses import read_pause as read_pause
from core.tools.tool_groups import ASK_PERSON

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
