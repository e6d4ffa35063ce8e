"""A reviewer's body becomes the contract's resume value, or nothing at all: the simple form
for the whole batch, the per-call form, and a new decision type slotting in as one entry."""

from __future__ import annotations

from typing import Any

import pytest

from core.approval.approval import record_decisions
from core.approval.decisions import DecisionError, resume_value

CALLS = [
    {"id": "c1", "name": "write_file", "args": {"path": "a", "content": "x"},
     "allowed_decisions": ["approve", "edit", "reject"]},
    {"id": "c2", "name": "delete", "args": {"path": "b"},
     "allowed_decisions": ["approve", "reject"]},
]  # fmt: skip
SCHEMAS = {
    "write_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "delete": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def test_the_simple_form_decides_the_whole_batch_as_the_admin():
    approved = resume_value({"approved": True}, CALLS, SCHEMAS, by="admin")
    assert approved == {
        "decisions": {
            "c1": {"type": "approve", "by": "admin"},
            "c2": {"type": "approve", "by": "admin"},
        }
    }
    rejected = resume_value({"approved": False, "note": "not now"}, CALLS, SCHEMAS, by="admin")
    assert rejected["decisions"]["c2"] == {"type": "reject", "message": "not now", "by": "admin"}


def test_per_call_decisions_are_recorded_by_the_graph_as_the_admin_s():
    body = {
        "decisions": {
            "c1": {"type": "edit", "args": {"path": "a", "content": "y"}},
            "c2": {"type": "reject", "message": "keep b"},
        }
    }
    value = resume_value(body, CALLS, SCHEMAS, by="admin")
    records = record_decisions(value, CALLS, SCHEMAS)
    assert records["c1"] == {
        "type": "approve", "decision": "edit", "args": {"path": "a", "content": "y"},
        "edited": True, "tool": "write_file", "by": "admin",
    }  # fmt: skip
    assert records["c2"]["by"] == "admin" and records["c2"]["message"] == "keep b"


@pytest.mark.parametrize(
    "body",
    [
        {"decisions": {"c1": {"type": "approve"}}},  # c2 left undecided
        {"decisions": {"c1": {"type": "approve"}, "c2": {"type": "edit", "args": {}}}},
        {"decisions": {"c1": {"type": "edit", "args": {"path": "a"}}, "c2": {"type": "approve"}}},
        {"decisions": {"c1": {"type": "approve", "grant": "yes"}, "c2": {"type": "approve"}}},
        {"decisions": {"c1": {"type": "reject", "message": 3}, "c2": {"type": "approve"}}},
        {"approved": 1},
        {"approved": True, "note": None},
        "approve",
    ],
)
def test_anything_short_of_a_whole_well_formed_batch_is_refused(body: Any):
    with pytest.raises(DecisionError):
        resume_value(body, CALLS, SCHEMAS, by="admin")


def test_respond_carries_the_reviewers_answer_and_needs_one():
    calls = [{**CALLS[0], "allowed_decisions": ["approve", "edit", "reject", "respond"]}]
    body = {"decisions": {"c1": {"type": "respond", "message": "use notes/ instead"}}}
    value = resume_value(body, calls, SCHEMAS, by="admin")
    assert value["decisions"]["c1"] == {
        "type": "respond",
        "message": "use notes/ instead",
        "by": "admin",
    }
    for empty in ({"type": "respond"}, {"type": "respond", "message": "  "}):
        with pytest.raises(DecisionError, match="respond needs a message"):
            resume_value({"decisions": {"c1": empty}}, calls, SCHEMAS, by="admin")
