"""A reviewer's decisions on a paused batch, checked before anything resumes: the resume value
of the approval contract (docs/design.md), built from what a front-end received.

Two forms are accepted:

    {"approved": true|false, "note": "...",          the whole batch, the seed's simple form
     "preview_ids": {call_id: preview_id}}           (an approval is bound to its previews)
    {"decisions": {call_id: {"type": ..., ...}}}     one decision per call, the contract's

Fail closed, and stricter than the graph's own check (which turns anything malformed into a
rejection): a body that is not exactly one of these, a call of the batch left undecided, a
call id that is not in the batch, a decision the call does not allow, an unknown key or
edited arguments that fail the tool's schema are refused with one line, and nothing resumes.

Each decision type is one entry of DECISION_TYPES: the keys it takes and what it checks, so a
new type is one entry more (as `respond`, which answers the model instead of running the call,
was).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

from core.approval.approval import call_problem

# A call of the paused batch as its payload carries it (an ApprovalCall or a QuestionCall).
ToolCall = Mapping[str, Any]
Schemas = dict[str, dict[str, Any]]


class Decision(TypedDict):
    """A reviewer's decision on one call, checked (DECISION_TYPES says which keys a type
    takes) and marked with who made it."""

    type: Literal["approve", "reject", "edit", "respond"]
    by: str  # core.approval.approval.PERSON_SOURCES
    grant: NotRequired[bool]  # approve: the same tool inside this folder, for the thread
    # approve, edit: the state the preview showed; put there by the binding or this
    # process's own preview, never taken from an HTTP body (resume_value refuses it)
    expect: NotRequired[list[Any]]
    preview_id: NotRequired[str]  # approve, edit: the preview it answers (core.changes.binding)
    args: NotRequired[dict[str, Any]]  # edit: the arguments to run instead
    message: NotRequired[str]  # reject: the reason; respond: what the model reads


class ResumeValue(TypedDict):
    """What resumes a thread paused for approval: one decision per call id."""

    decisions: dict[str, Decision]


class AnswerValue(TypedDict):
    """What resumes a thread paused on a question: one answer per call id. None (or no
    entry) is "no one can answer" (core.approval.questions), with `reason` saying why."""

    answers: dict[str, str | None]
    by: str
    reason: NotRequired[str]


def resume_json(value: ResumeValue | AnswerValue) -> dict[str, Any]:
    """A resume value's JSON form (what `Command(resume=...)` and the audit carry)."""
    return dict(value)


class DecisionError(ValueError):
    """A body that decides nothing safely; the message is the one line the reviewer reads."""


def _check_approve(decision: dict[str, Any], call: ToolCall, schemas: Schemas) -> None:
    if "grant" in decision and not isinstance(decision["grant"], bool):
        raise DecisionError(f"{call['id']}: grant must be true or false")
    _check_preview_id(decision, call)


def _check_preview_id(decision: dict[str, Any], call: ToolCall) -> None:
    if "preview_id" in decision and not isinstance(decision["preview_id"], str):
        raise DecisionError(f"{call['id']}: preview_id must be the string the call's preview gave")


def _check_reject(decision: dict[str, Any], call: ToolCall, schemas: Schemas) -> None:
    if not isinstance(decision.get("message", ""), str):
        raise DecisionError(f"{call['id']}: message must be a string")


def _check_respond(decision: dict[str, Any], call: ToolCall, schemas: Schemas) -> None:
    message = decision.get("message")
    if not isinstance(message, str) or not message.strip():
        raise DecisionError(f"{call['id']}: respond needs a message, the answer the model reads")


def _check_edit(decision: dict[str, Any], call: ToolCall, schemas: Schemas) -> None:
    args = decision.get("args")
    if not isinstance(args, dict):
        raise DecisionError(f"{call['id']}: an edit needs args, a JSON object of arguments")
    _check_preview_id(decision, call)
    if call["name"] in schemas:
        problem = call_problem({"name": call["name"], "args": args}, schemas)
        if problem:
            raise DecisionError(f"{call['id']}: the edited arguments cannot run: {problem}")


@dataclass(frozen=True)
class DecisionType:
    keys: frozenset[str]  # what a decision of this type may carry besides `type`
    check: Callable[[dict[str, Any], ToolCall, Schemas], None]  # raises DecisionError


DECISION_TYPES: dict[str, DecisionType] = {
    # preview_id: the preview the reviewer read, whose state the write is bound to
    # (core.changes.binding), read again by the server. Never `expect`, the state itself: a
    # client's would be taken for what was shown (issue 41), so a body with one is refused.
    "approve": DecisionType(frozenset({"grant", "preview_id"}), _check_approve),
    "reject": DecisionType(frozenset({"message"}), _check_reject),
    # preview_id: the edit's own preview (over its arguments), or the call's it was made on.
    "edit": DecisionType(frozenset({"args", "preview_id"}), _check_edit),
    # The person answers in the call's place: it does not run, the model reads the message.
    "respond": DecisionType(frozenset({"message"}), _check_respond),
}
SIMPLE_KEYS = frozenset({"approved", "note", "preview_ids"})


def check_form(body: Any) -> None:
    """What can be checked before the thread is read: one of the two forms, well typed."""
    if not isinstance(body, dict):
        raise DecisionError("the body must be a JSON object")
    if "decisions" in body:
        if set(body) != {"decisions"}:
            raise DecisionError('give either "decisions" or "approved" (with "note"), not both')
        decisions = body["decisions"]
        if not isinstance(decisions, dict) or not decisions:
            raise DecisionError('"decisions" must be an object of call id -> decision')
        for call_id, decision in decisions.items():
            check_shape(call_id, decision)
        return
    unknown = sorted(set(body) - SIMPLE_KEYS)
    if unknown:
        raise DecisionError(f'unknown field {unknown[0]!r}: give "approved" or "decisions"')
    if not isinstance(body.get("approved"), bool):
        raise DecisionError('"approved" must be true or false')
    if not isinstance(body.get("note", ""), str):
        raise DecisionError('"note" must be a string')
    ids = body.get("preview_ids", {})
    if not isinstance(ids, dict) or not all(isinstance(v, str) for v in ids.values()):
        raise DecisionError('"preview_ids" must be an object of call id -> the preview_id shown')


def check_shape(call_id: str, decision: Any) -> None:
    if not isinstance(decision, dict):
        raise DecisionError(f"{call_id}: a decision must be an object with a type")
    kind = decision.get("type")
    known = DECISION_TYPES.get(kind) if isinstance(kind, str) else None
    if known is None:
        names = ", ".join(DECISION_TYPES)
        raise DecisionError(f"{call_id}: type {kind!r} is not a decision ({names})")
    extra = sorted(set(decision) - known.keys - {"type"})
    if "expect" in extra:  # the state is read by the server, never taken from a client
        raise DecisionError(
            f"{call_id}: {kind} takes no 'expect': the server reads what is there itself and "
            "binds the decision by its preview_id"
        )
    if extra:
        raise DecisionError(f"{call_id}: {kind} takes no {extra[0]!r}")


def resume_value(body: Any, calls: Sequence[ToolCall], schemas: Schemas, *, by: str) -> ResumeValue:
    """The contract's resume value for `calls` (the paused batch), every decision marked as
    made `by` this front-end; DecisionError when the body does not decide the batch exactly."""
    check_form(body)
    if "decisions" not in body:
        return {"decisions": {call["id"]: simple(body, call, by) for call in calls}}
    given: dict[str, Any] = body["decisions"]
    ids = [call["id"] for call in calls]
    unknown = [call_id for call_id in given if call_id not in ids]
    if unknown:
        raise DecisionError(
            f"no pending call {unknown[0]!r}; the pending calls are {', '.join(ids)}"
        )
    missing = [call_id for call_id in ids if call_id not in given]
    if missing:
        raise DecisionError(f"no decision for {', '.join(missing)}: decide every call of the batch")
    decisions: dict[str, Decision] = {}
    for call in calls:
        decision = dict(given[call["id"]])
        allowed = call.get("allowed_decisions") or []
        if decision["type"] not in allowed:
            raise DecisionError(
                f"{call['id']}: {call['name']} can only be {' or '.join(map(past, allowed))}"
            )
        DECISION_TYPES[decision["type"]].check(decision, call, schemas)
        # Its type, keys and their values were checked just above (check_shape, check).
        decisions[call["id"]] = cast(Decision, {**decision, "by": by})
    return {"decisions": decisions}


def simple(body: dict[str, Any], call: ToolCall, by: str) -> Decision:
    if body["approved"]:
        decision: Decision = {"type": "approve", "by": by}
        preview = body.get("preview_ids", {}).get(call["id"])
        if preview is not None:  # without it, the binding refuses the approval (428)
            decision["preview_id"] = preview
        return decision
    return {"type": "reject", "message": body.get("note", ""), "by": by}


def past(kind: str) -> str:
    return {"approve": "approved", "reject": "rejected", "edit": "edited"}.get(kind, kind)


def answer_value(body: Any, calls: Sequence[ToolCall], *, by: str) -> AnswerValue:
    """The resume value for a paused question (`ask_person`): every question answered with
    text (one of its choices, when it gives them), marked as answered `by` this front-end."""
    if not isinstance(body, dict) or set(body) != {"answers"}:
        raise DecisionError('the thread waits for an answer: give {"answers": {call id: text}}')
    given = body["answers"]
    if not isinstance(given, dict):
        raise DecisionError('"answers" must be an object of call id -> text')
    ids = [call["id"] for call in calls]
    unknown = [call_id for call_id in given if call_id not in ids]
    if unknown:
        raise DecisionError(
            f"no pending question {unknown[0]!r}; the pending questions are {', '.join(ids)}"
        )
    answers: dict[str, str | None] = {}
    for call in calls:
        text = given.get(call["id"])
        if not isinstance(text, str) or not text.strip():
            raise DecisionError(f"{call['id']}: answer the question with text")
        choices = call.get("choices") or []
        if choices and text.strip() not in choices:
            raise DecisionError(f"{call['id']}: answer with one of {', '.join(choices)}")
        answers[call["id"]] = text.strip()
    return {"answers": answers, "by": by}
