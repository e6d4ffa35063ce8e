"""The approval contract of DESIGN.md, as pure functions.

What a paused thread asks (the versioned payload), what a resume must carry (decisions keyed by
call id), how a decision is recorded in state, and the ToolMessages the model reads for a call
that did not run. Nothing here runs a tool or does I/O: the `approve` node runs again from the
top on resume, so everything it calls must be free of side effects.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent import WRITE_TOOLS

APPROVAL_KIND = "approval"
APPROVAL_VERSION = 1
ALL_DECISIONS: tuple[str, ...] = ("approve", "edit", "reject")
# A delete has nothing to edit that would not be a different call; approve or reject it.
LIMITED_DECISIONS: dict[str, tuple[str, ...]] = {"delete": ("approve", "reject")}

ToolCall = dict[str, Any]
Decision = dict[str, Any]


def allowed_decisions(tool_name: str) -> list[str]:
    return list(LIMITED_DECISIONS.get(tool_name, ALL_DECISIONS))


def new_id(prefix: str) -> str:
    """Ids for messages we create; model-supplied ids are not unique across turns."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


# --- checking calls before anyone is asked about them --------------------------------------


def call_problem(call: ToolCall, schemas: dict[str, dict[str, Any]]) -> str | None:
    """Why this call cannot run, as a sentence the model can act on; None if it can."""
    name = call.get("name") or ""
    if name not in schemas:
        known = ", ".join(sorted(schemas))
        return f"there is no tool named {name!r}. The tools are: {known}."
    return schema_problem(name, call.get("args"), schemas[name])


def schema_problem(name: str, args: Any, schema: dict[str, Any]) -> str | None:
    import jsonschema

    if not isinstance(args, dict):
        return f"the arguments of {name} must be a JSON object."
    try:
        jsonschema.validate(args, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return f"invalid arguments for {name} ({where}): {error.message}."
    except jsonschema.SchemaError:
        return None  # the server's schema is its business; let the server judge the call
    return None


def writes_to_review(message: AIMessage, schemas: dict[str, dict[str, Any]]) -> list[ToolCall]:
    """The write calls a person must decide on: only those that could actually run."""
    return [
        call
        for call in message.tool_calls
        if call["name"] in WRITE_TOOLS and call_problem(call, schemas) is None
    ]


# --- the payload and the resume value ------------------------------------------------------


def approval_payload(route: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "kind": APPROVAL_KIND,
        "version": APPROVAL_VERSION,
        "route": route,
        "calls": [
            {
                "id": call["id"],
                "name": call["name"],
                "args": call["args"],
                "allowed_decisions": allowed_decisions(call["name"]),
            }
            for call in calls
        ],
    }


def is_current_payload(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("kind") == APPROVAL_KIND
        and value.get("version") == APPROVAL_VERSION
        and isinstance(value.get("calls"), list)
    )


def record_decisions(
    answer: Any, calls: list[ToolCall], schemas: dict[str, dict[str, Any]]
) -> dict[str, Decision]:
    """Turn a resume value into one approval record per call, failing closed.

    Records have `type` "approve" (with `args` when the person edited them) or "reject"
    (with a `message`). A missing, malformed or disallowed decision is a rejection.
    """
    given = answer.get("decisions") if isinstance(answer, dict) else None
    given = given if isinstance(given, dict) else {}
    return {call["id"]: record_one(given.get(call["id"]), call, schemas) for call in calls}


def record_one(decision: Any, call: ToolCall, schemas: dict[str, dict[str, Any]]) -> Decision:
    if not isinstance(decision, dict):
        return {"type": "reject", "message": "no decision was given, so it was not run"}
    kind = decision.get("type")
    if kind not in allowed_decisions(call["name"]):
        return {"type": "reject", "message": f"{kind!r} is not a decision allowed for this call"}
    if kind == "approve":
        return {"type": "approve"}
    if kind == "edit":
        args = decision.get("args")
        problem = call_problem({"name": call["name"], "args": args}, schemas)
        if problem:
            return {"type": "reject", "message": f"the person's edit could not run: {problem}"}
        return {"type": "approve", "args": args, "edited": True}
    message = decision.get("message")
    return {"type": "reject", "message": str(message) if message else ""}


def is_approved(record: Any) -> bool:
    """The one check that lets a write run: an explicit approve record, nothing else."""
    return isinstance(record, dict) and record.get("type") == "approve"


# --- what the model reads for a call --------------------------------------------------------


def tool_message(call_id: str, content: str, *, error: bool = False) -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=call_id,
        id=new_id("tool"),
        status="error" if error else "success",
    )


def rejection_text(call: ToolCall, reason: str) -> str:
    text = f"Not done: the person rejected {call['name']}; nothing was changed."
    if reason:
        text += f" Their reason: {reason}."
    return text + " Do not retry this call; ask the person what they want instead."


def edited_preamble(call: ToolCall, edited_args: dict[str, Any]) -> str:
    changed = {k: v for k, v in edited_args.items() if call["args"].get(k) != v}
    dropped = [k for k in call["args"] if k not in edited_args]
    parts = [f"{k}={v!r}" for k, v in changed.items()] + [f"without {k}" for k in dropped]
    return (
        f"The person edited this {call['name']} call before it ran ({', '.join(parts) or 'same'}"
        "). It ran with their arguments, not yours; report this result and do not redo the "
        "original call.\n"
    )


def answer_without_running(
    call: ToolCall, approvals: dict[str, Any], schemas: dict[str, dict[str, Any]]
) -> ToolMessage | None:
    """The ToolMessage for a call that must not run, or None when it should run."""
    problem = call_problem(call, schemas)
    if problem:
        return tool_message(call["id"], f"Error: {problem}", error=True)
    if call["name"] not in WRITE_TOOLS:
        return None
    record = approvals.get(call["id"])
    if is_approved(record):
        return None
    reason = record.get("message", "") if isinstance(record, dict) else ""
    if not isinstance(record, dict):
        reason = "no approval was recorded for it, so it was not run"
    return tool_message(call["id"], rejection_text(call, reason), error=True)


def answer_invalid_call(invalid: dict[str, Any]) -> ToolMessage:
    """A call the model emitted with unparseable arguments. The bad text is not echoed back."""
    name = invalid.get("name") or "a tool"
    return tool_message(
        invalid["id"],
        f"Error: your call to {name} was not run because its arguments are not valid JSON. "
        "Call it again with a JSON object of arguments that matches the tool's schema.",
        error=True,
    )
