"""The approval contract of docs/design.md, as pure functions.

What a paused thread asks (the versioned payload), what a resume must carry (decisions keyed by
call id), how a decision is recorded in state, and the ToolMessages the model reads for a call
that did not run. Nothing here runs a tool or does I/O: the `approve` node runs again from the
top on resume, so everything it calls must be free of side effects.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal, Required, TypedDict

import jsonschema
import pydantic
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool

# The payload's types and readers live in core.approval.pauses (no library); their names
# are kept here for the modules that import them from here.
from core.approval.pauses import APPROVAL_KIND
from core.approval.pauses import ApprovalCall as ApprovalCall
from core.approval.pauses import ApprovalPayload as ApprovalPayload
from core.approval.pauses import is_resumable_approval as is_resumable_approval
from core.approval.pauses import read_approval as read_approval
from core.approval.policy import Grant, Places, Policy, covering_other_grant
from core.tools.merged_tools import BOTH_FORMS
from core.tools.tool_groups import in_group, needs_approval, other_server

# Version 2 added `respond`. A version-1 payload (a thread paused by an older release) still
# resumes: the resume value has the same shape, and what it may say is judged by tool here.
APPROVAL_VERSION = 2
# Who decides without a person: the rules, the --approve mode, a grant the person gave.
AUTOMATIC: Final = ("rule", "mode", "grant")
ALL_DECISIONS: tuple[str, ...] = ("approve", "edit", "reject", "respond")
# A delete has nothing to edit that would not be a different call; approve, reject or answer.
LIMITED_DECISIONS: dict[str, tuple[str, ...]] = {"delete": ("approve", "reject", "respond")}

# Who decided a call: the terminal says whether a person typed it or a pipe supplied it; the
# HTTP service's admin API (and its inbox page) says `admin`.
PERSON_SOURCES: tuple[str, ...] = ("person", "piped", "admin")

# A call as the model made it: langchain's ToolCall (or InvalidToolCall) TypedDict, or the
# plain dict a payload carries; read, never changed, here.
ToolCall = Mapping[str, Any]


class ApprovalRecord(TypedDict, total=False):
    """What was decided for one call, kept in the thread's state (`approvals`, by call id)
    from the decision until the tools step has answered the call. Written here and by
    core.approval.questions; read by the tools step, the audit log and the events."""

    # approve runs the call (with `args` when edited); reject and unanswered answer it with
    # `message`; respond and answer give the model the person's `message` as its result.
    type: Required[Literal["approve", "reject", "respond", "answer", "unanswered"]]
    decision: Required[str]  # as given: approve, edit, grant, reject, respond, answer...
    tool: str
    by: str  # person, piped, admin, or rule, mode, grant
    reason: str  # a rule's, the mode's or a grant's words
    message: str
    args: dict[str, Any]  # an edit's arguments
    edited: bool
    expect: list[Any]  # the state the preview showed, which the server checks
    # An edit's own plan (core.changes.plans, as kept): the edited arguments are judged on
    # it, never on the original call's plan nor on their text.
    plan: str
    recheck: bool  # made stricter on resume by the rules in force then


# Another server's call is approved, rejected or answered as the model made it: its preview
# is its arguments, which an edit would replace with a call no one previewed.
OTHER_DECISIONS: tuple[str, ...] = ("approve", "reject", "respond")


def allowed_decisions(tool_name: str) -> list[str]:
    if other_server(tool_name) is not None:
        return list(OTHER_DECISIONS)
    return list(LIMITED_DECISIONS.get(tool_name, ALL_DECISIONS))


def new_id(prefix: str) -> str:
    """Ids for messages we create; model-supplied ids are not unique across turns."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


# --- checking calls before anyone is asked about them --------------------------------------


def tool_schema(tool: BaseTool) -> dict[str, Any]:
    """A tool's arguments as JSON schema (MCP tools carry theirs as a dict already)."""
    schema = tool.args_schema
    if isinstance(schema, dict):
        return schema
    model = tool.get_input_schema()
    # A tool built on pydantic.v1 has no model_json_schema; ours and MCP's are pydantic 2.
    assert issubclass(model, pydantic.BaseModel), f"{tool.name}: not a pydantic 2 schema"
    return model.model_json_schema()


def call_problem(
    call: ToolCall, schemas: dict[str, dict[str, Any]], route: str | None = None
) -> str | None:
    """Why this call cannot run, as a sentence the model can act on; None if it can.
    With a route, a tool outside its group cannot run either."""
    name = call.get("name") or ""
    if name not in schemas:
        known = ", ".join(sorted(schemas))
        return f"there is no tool named {name!r}. The tools are: {known}."
    if route is not None and not in_group(route, name):
        return (
            f"{name} is not available for this request, which is a {route} request. "
            "Tell the person what you would do instead, and they can ask for it."
        )
    return schema_problem(name, call.get("args"), schemas[name])


def schema_problem(name: str, args: Any, schema: dict[str, Any]) -> str | None:
    if not isinstance(args, dict):
        return f"the arguments of {name} must be a JSON object."
    validator = _validator(schema)
    if validator is None:
        return None  # the server's schema is its business; let the server judge the call
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "arguments"
    return f"invalid arguments for {name} ({where}): {error.message}."


# Checking a schema costs far more than checking arguments against it, and a tool's schema
# never changes while the server runs: check each once. Keyed by identity, holding the schema
# so its id is never reused by another.
_validators: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator(schema: dict[str, Any]) -> Any:
    cached = _validators.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        validator = cls(schema)
    except jsonschema.SchemaError:
        validator = None
    _validators[id(schema)] = (schema, validator)
    return validator


def writes_to_review(
    message: AIMessage,
    schemas: dict[str, dict[str, Any]],
    route: str | None = None,
    read_only: frozenset[str] = frozenset(),
) -> list[ToolCall]:
    """The calls a person must decide on (our writes, and other servers' tools not proven
    read-only: `read_only` names those that are): only those that could actually run."""
    return [
        call
        for call in message.tool_calls
        if needs_approval(call["name"], read_only) and call_problem(call, schemas, route) is None
    ]


# --- the payload and the resume value ------------------------------------------------------


def approval_json(payload: ApprovalPayload) -> dict[str, Any]:
    """The payload's JSON form: the same keys, as a plain dict."""
    return {**payload, "calls": [dict(call) for call in payload["calls"]]}


def approval_payload(
    route: str,
    calls: list[ToolCall],
    said: dict[str, str] | None = None,
    unplanned: Mapping[str, str | None] | None = None,
) -> ApprovalPayload:
    """`said`: what the policy said of each call at pause time, recorded so a resume that
    finds the rules changed can tell (see `recheck`). `unplanned`: why the server could not
    plan a call, shown to the person with it."""
    said, unplanned = said or {}, unplanned or {}
    return {
        "kind": APPROVAL_KIND,
        "version": APPROVAL_VERSION,
        "route": route,
        "calls": [payload_call(call, said, unplanned) for call in calls],
    }


def payload_call(
    call: ToolCall, said: Mapping[str, str], unplanned: Mapping[str, str | None]
) -> ApprovalCall:
    shown: ApprovalCall = {
        "id": call["id"],
        "name": call["name"],
        "args": call["args"],
        "allowed_decisions": allowed_decisions(call["name"]),
        "policy": said.get(call["id"], "ask"),
    }
    why = unplanned.get(call["id"])
    if why:
        shown["unplanned"] = why
    return shown


def record_decisions(
    answer: Any, calls: list[ToolCall], schemas: dict[str, dict[str, Any]]
) -> dict[str, ApprovalRecord]:
    """Turn a resume value into one approval record per call, failing closed.

    Records have `type` "approve" (with `args` when the person edited them), "reject" (with
    a `message`) or "respond" (with the person's `message`, which the model reads as the
    call's result), plus what the audit needs: `tool`, the `decision` as given (approve,
    edit, grant, reject or respond) and `by` (person, piped or admin). A missing, malformed
    or disallowed decision is a rejection.
    """
    given = answer.get("decisions") if isinstance(answer, dict) else None
    given = given if isinstance(given, dict) else {}
    records: dict[str, ApprovalRecord] = {}
    for call in calls:
        decision = given.get(call["id"])
        record = record_one(decision, call, schemas)
        record["tool"] = call["name"]
        record["by"] = decided_by(decision)
        records[call["id"]] = record
    return records


def someone_decided(approvals: Mapping[str, ApprovalRecord]) -> bool:
    """Whether a person (at the terminal, an admin, a piped answer) decided any call of the
    batch: then it waited, for days perhaps, since its judge step."""
    return any(record.get("by") not in AUTOMATIC for record in approvals.values())


def decided_by(decision: Any) -> str:
    by = decision.get("by") if isinstance(decision, dict) else None
    return by if by in PERSON_SOURCES else "person"


def record_one(decision: Any, call: ToolCall, schemas: dict[str, dict[str, Any]]) -> ApprovalRecord:
    if not isinstance(decision, dict):
        return rejected("no decision was given, so it was not run")
    kind = decision.get("type")
    if kind not in allowed_decisions(call["name"]):
        return rejected(f"{kind!r} is not a decision allowed for this call")
    if kind == "approve":
        granted = decision.get("grant") is True
        record: ApprovalRecord = {"type": "approve", "decision": "grant" if granted else "approve"}
        return bound_to(record, decision)
    if kind == "edit":
        args = decision.get("args")
        problem = call_problem({"name": call["name"], "args": args}, schemas)
        if problem or not isinstance(args, dict):
            return rejected(f"the person's edit could not run: {problem}")
        edited: ApprovalRecord = {
            "type": "approve",
            "decision": "edit",
            "args": args,
            "edited": True,
        }
        return bound_to(edited, decision)
    if kind == "respond":
        text = decision.get("message")
        if not isinstance(text, str) or not text.strip():
            return rejected("the person chose to respond but gave no text, so it was not run")
        return {"type": "respond", "decision": "respond", "message": text.strip()}
    message = decision.get("message")
    return rejected(str(message) if message else "")


def bound_to(record: ApprovalRecord, decision: dict[str, Any]) -> ApprovalRecord:
    """The record bound to the state the person's preview showed (`expect`, a plan's
    paths), which the server checks before the write acts; unbound when no preview was
    shown. An edit also keeps its own plan (`plan`), which it is judged on."""
    expect = decision.get("expect")
    if isinstance(expect, list):
        record["expect"] = expect
    plan = decision.get("plan")
    if record.get("edited") and isinstance(plan, str):
        record["plan"] = plan
    return record


def rejected(message: str) -> ApprovalRecord:
    return {"type": "reject", "decision": "reject", "message": message}


# --- decisions no person is asked for -------------------------------------------------------


def decide_without_person(
    call: ToolCall,
    policy: Policy,
    mode: str,
    grants: list[Grant],
    places: Places | None,
    *,
    refused: str | None = None,
    unplanned: str | None = None,
    asked: bool = False,
) -> ApprovalRecord | None:
    """The record for a call that rules, the --approve mode or a grant decide; None if the
    person must. Paths are judged only as the server's plan reads them (`places`, raw); a
    call it refuses outright (`refused`: a path disguised by escapes, a protected file) is
    rejected before anything else.

    Without places (the server could not plan the call; `unplanned` says why) nothing can
    judge its paths, so nothing approves it: --approve no and --approve yes refuse it, and
    otherwise the person decides. A call the person already decided (`asked`: judged again
    on resume) is left to their decision then, unless --approve no. With them, the
    precedence is: a deny rule, then
    --approve no, then a call on the rules file (always the person's), then an allow rule,
    then --approve yes, then a grant; everything else (an ask rule, no rule) asks the
    person. Pure: the same state and policy always give the same answer.
    """
    if refused:
        return auto(call, "reject", "rule", refused)
    if places is None:
        if mode == "no":
            return auto(call, "reject", "mode", NO_WRITES)
        if mode == "yes" and not asked:
            why = unplanned or "the server gave no plan"
            return auto(call, "reject", "mode", f"refused: {why}; {UNPLANNED}")
        return None
    verdict = policy.judge(call["name"], places)
    if verdict.decision == "deny" and verdict.rule is not None:
        return auto(call, "reject", "rule", f"denied by {verdict.rule.describe()}")
    if mode == "no":
        return auto(call, "reject", "mode", NO_WRITES)
    if policy.touches_rules(call["name"], places):
        return None  # the rules file: only the person may change what decides for them
    if verdict.decision == "allow" and verdict.rule is not None:
        return auto(call, "approve", "rule", f"allowed by {verdict.rule.describe()}")
    if mode == "yes":
        return auto(call, "approve", "mode", "fsagent runs with --approve yes")
    grant = policy.covering_grant(call, grants, places)
    if grant is not None:
        return auto(call, "approve", "grant", f"granted: {describe_grant(grant)}")
    return None


def decide_other(
    call: ToolCall, policy: Policy, mode: str, grants: list[Grant], pin: str | None
) -> ApprovalRecord | None:
    """Another server's call not proven read-only: what rules (by server and tool), the
    mode and a grant decide, in the precedence `decide_without_person` keeps; None when the
    person must. `pin`: the digest of the tool's definition now, which a grant must carry."""
    verdict = policy.judge_other(call["name"])
    if verdict.decision == "deny" and verdict.rule is not None:
        return auto(call, "reject", "rule", f"denied by {verdict.rule.describe()}")
    if mode == "no":
        return auto(call, "reject", "mode", NO_WRITES)
    if verdict.decision == "allow" and verdict.rule is not None:
        return auto(call, "approve", "rule", f"allowed by {verdict.rule.describe()}")
    if mode == "yes":
        return auto(call, "approve", "mode", "fsagent runs with --approve yes")
    grant = covering_other_grant(call, grants, pin)
    if grant is not None:
        return auto(call, "approve", "grant", f"granted: {describe_grant(grant)}")
    return None


NO_WRITES = "fsagent runs with --approve no: no write runs"
# Why a call the server could not plan never runs unasked.
UNPLANNED = (
    "without the server's plan no rule, grant or guard can judge where it lands, so "
    "--approve yes does not run it (ask for it at the terminal)"
)


def edit_unplanned(call: ToolCall, why: str) -> ApprovalRecord:
    """A person's edit whose own arguments the server could not plan: never run, since no
    rule can judge where they land."""
    reason = (
        f"refused: the edited arguments could not be planned ({why}), so no rule can judge "
        "where they land; edit them again"
    )
    return auto(call, "reject", "rule", reason) | {"recheck": True}


def auto(
    call: ToolCall, kind: Literal["approve", "reject"], by: str, reason: str
) -> ApprovalRecord:
    record: ApprovalRecord = {
        "type": kind,
        "decision": kind,
        "tool": call["name"],
        "by": by,
        "reason": reason,
    }
    if kind == "reject":
        record["message"] = reason
    return record


def policy_said(record: ApprovalRecord | None) -> str:
    """What the policy said of a call, in the words the payload records."""
    if record is None:
        return "ask"
    return f"{record['decision']}: {record.get('reason', '')}"


def recheck(recorded: ApprovalRecord, now: ApprovalRecord | None) -> ApprovalRecord | None:
    """A decision made at pause time, judged again at resume with the rules, mode and
    grants in force now. They may only make it stricter: a deny rule or --approve no now
    rejects an approve; an approve the rules, mode or a grant made, which they would no
    longer make, must be asked again (returns None). A person's reject, edit or respond is
    never turned into a run of the original."""
    if not is_approved(recorded):
        return recorded  # a reject or respond is final
    if now is not None and now.get("type") == "reject":
        return now | {"recheck": True}  # stricter now: a deny rule, or --approve no
    if recorded.get("by") in AUTOMATIC and not is_approved(now):
        return None  # it was approved without the person; the rules no longer say so
    return recorded


def describe_grant(grant: Grant) -> str:
    if "pin" in grant:  # another server's tool, as pinned when granted
        return f"{grant['tool']}: every call, while its definition stays as it was"
    return f"{grant['tool']} inside {grant['shown']}"


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


def rejection_text(call: ToolCall, reason: str, by: str = "person") -> str:
    if by in ("rule", "mode"):
        text = f"Not done: {call['name']} was {reason}; nothing was changed."
    else:
        text = f"Not done: the person rejected {call['name']}; nothing was changed."
        if reason:
            text += f" Their reason: {reason}."
    return text + " Do not retry this call; ask the person what they want instead."


def respond_text(call: ToolCall, answer: str) -> str:
    """What the model reads when the person answered in the call's place."""
    return (
        f"The person answered instead of running {call['name']} (it did not run; nothing was "
        f"changed). The person's answer: {answer}"
    )


def edited_preamble(call: ToolCall, edited_args: dict[str, Any]) -> str:
    """Tells the model the person changed its call, and how, so it reports the edited result
    and does not redo (or "correct") the original."""

    def shown(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 200 else f"{text[:200]}… ({len(text):,} chars)"

    changed = [
        f"{k}: {shown(call['args'][k])} -> {shown(v)}" if k in call["args"] else f"{k}: {shown(v)}"
        for k, v in edited_args.items()
        if call["args"].get(k) != v or k not in call["args"]
    ]
    dropped = [f"{k} removed" for k in call["args"] if k not in edited_args]
    how = "; ".join(changed + dropped) or "no argument changed"
    return (
        f"The person edited this {call['name']} call before it ran ({how}). It ran with their "
        "arguments, not yours: report this result, and do not redo or correct the original "
        "call.\n"
    )


def answer_without_running(
    call: ToolCall,
    approvals: dict[str, Any],
    schemas: dict[str, dict[str, Any]],
    route: str | None = None,
    read_only: frozenset[str] = frozenset(),
) -> ToolMessage | None:
    """The ToolMessage for a call that must not run, or None when it should run."""
    problem = call_problem(call, schemas, route)
    if problem:
        return tool_message(call["id"], f"Error: {problem}", error=True)
    if not needs_approval(call["name"], read_only):
        return None
    record = approvals.get(call["id"])
    if is_approved(record):
        return None
    if not isinstance(record, dict):
        reason, by = "no approval was recorded for it, so it was not run", "person"
    elif record.get("type") == "respond":
        return tool_message(call["id"], respond_text(call, str(record.get("message", ""))))
    else:
        reason, by = str(record.get("message", "")), str(record.get("by", "person"))
    return tool_message(call["id"], rejection_text(call, reason, by), error=True)


def cut_off_answer(call: ToolCall, why: str) -> ToolMessage:
    """The answer for a call whose run ended before it answered (Ctrl-C, a crash, an error)."""
    name = call.get("name") or "a tool"
    if needs_approval(name):
        text = (
            f"Cancelled: {name} did not run; {why}. Nothing was changed. "
            "Do not retry it unless the person asks again."
        )
    else:
        text = f"Not completed: {name} gave no answer; {why}. Call it again if you need it."
    return tool_message(call["id"], text, error=True)


# The error of a call whose reply was cut off at the reply limit: its arguments may be
# missing their end however well they parse, so it never runs.
CUT_CALL = "cut off by the reply limit"


def answer_invalid_call(invalid: Mapping[str, Any]) -> ToolMessage:
    """A call the model emitted with unparseable arguments. The bad text is not echoed back."""
    name = invalid.get("name") or "a tool"
    if invalid.get("error") == CUT_CALL:
        return tool_message(
            invalid["id"],
            f"Error: your call to {name} was not run: your reply was cut off at the reply "
            "limit before its arguments were complete. Make it again, smaller (a large file "
            "can be written in parts with mode 'append').",
            error=True,
        )
    if invalid.get("error") == BOTH_FORMS:
        return tool_message(
            invalid["id"],
            f"Error: your call to {name} was not run: {BOTH_FORMS}. Call it again with one.",
            error=True,
        )
    return tool_message(
        invalid["id"],
        f"Error: your call to {name} was not run because its arguments are not valid JSON. "
        "Call it again with a JSON object of arguments that matches the tool's schema.",
        error=True,
    )
