"""What a paused thread waits on, as stored: the approval and question payloads, read back
from a checkpoint and judged resumable or not. Plain dicts and no library, so the commands
that only read threads (`fsagent threads`, `approvals`) need nothing heavier."""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypedDict, cast

APPROVAL_KIND: Final = "approval"
# The approval payload versions this release resumes (core.approval.approval says why).
RESUMABLE_VERSIONS: frozenset[int] = frozenset({1, 2})
QUESTION_KIND: Final = "question"
QUESTION_VERSION = 1


class ApprovalCall(TypedDict):
    """One call of an approval payload, as the person (or the HTTP API) is shown it."""

    id: str
    name: str
    args: dict[str, Any]
    allowed_decisions: list[str]
    # What the policy said at pause time (version 2); a version-1 payload has none.
    policy: NotRequired[str]
    # Why the server could not plan the call, when it could not: no rule, mode or grant
    # judged it, and the person decides from the call itself.
    unplanned: NotRequired[str]


class ApprovalPayload(TypedDict):
    """What a thread paused for approval waits on: the interrupt's value, and its JSON form
    (the terminal, `fsagent approvals` and `/api/admin/approvals` show exactly this)."""

    kind: Literal["approval"]  # APPROVAL_KIND: what tells it from a QuestionPayload
    version: int
    route: str
    calls: list[ApprovalCall]


def read_approval(value: Any) -> ApprovalPayload | None:
    """An interrupt's value (or its JSON) as an approval payload; None if it is not one (a
    question, another kind, a value of a foreign shape). The version is not judged here:
    `is_resumable_approval` says whether this release can resume it."""
    if not isinstance(value, dict) or value.get("kind") != APPROVAL_KIND:
        return None
    calls = value.get("calls")
    if not isinstance(calls, list) or not all(_is_call(call) for call in calls):
        return None
    return cast(ApprovalPayload, value)


def _is_call(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("name"), str)
    )


def is_resumable_approval(value: Any) -> bool:
    """An approval payload this version can resume: the current one, or an older one whose
    resume value means the same."""
    return (
        isinstance(value, dict)
        and value.get("kind") == APPROVAL_KIND
        and value.get("version") in RESUMABLE_VERSIONS
        and isinstance(value.get("calls"), list)
    )


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


def is_question(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == QUESTION_KIND


def is_resumable_question(value: Any) -> bool:
    return (
        is_question(value)
        and value.get("version") == QUESTION_VERSION
        and isinstance(value.get("calls"), list)
    )
