"""The graph's approve and tools steps on their own (agent_graph.approve, agent_graph.run_tools),
beside the end-to-end tests: real tools of our MCP server on a temp folder, a real SQLite
store, and the person's answer given as the resume value LangGraph would hand back."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agent_graph import approve, judge, run_tools
from core.approval.approval import tool_schema
from core.approval.policy import Policy, Rule
from core.approval.questions import with_ask_person
from core.tools.server_process import start_server, stop_server
from core.tools.tools import open_tools
from store import open_store


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "args": args, "type": "tool_call"}


def state(*calls: dict[str, Any], **more: Any) -> dict[str, Any]:
    asked = HumanMessage(content="do it", id="human-1")
    message = AIMessage(content="", id="ai-1", tool_calls=list(calls))
    return {"messages": [asked, message], "route": "filesystem", "turn": 1, **more}


@asynccontextmanager
async def real_tools(root: Path) -> AsyncIterator[dict[str, BaseTool]]:
    process = await start_server([root], read_only=False, verbose=False)
    try:
        async with open_tools(process) as tools:
            yield {tool.name: tool for tool in with_ask_person(tools)}
    finally:
        await stop_server(process)


def schemas_of(tools: dict[str, BaseTool]) -> dict[str, Any]:
    return {name: tool_schema(tool) for name, tool in tools.items()}


async def decide(
    given: dict[str, Any], tools: dict[str, BaseTool], policy: Policy, mode: str, ask: Any
) -> Any:
    """The graph's judge step (the server's plan, then rules, mode and grants), and its
    approve step when the judge left a call to a person: the command the last one returned."""
    schemas = schemas_of(tools)
    judged = await judge(given, schemas=schemas, policy=policy, mode=mode, tools=tools)
    if judged.goto != "approve":
        return judged
    return approve({**given, **judged.update}, schemas=schemas, policy=policy, mode=mode, ask=ask)


class Person:
    """The reviewer: answers each payload it is shown with `answer`, and keeps them."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.shown: list[dict[str, Any]] = []

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.shown.append(payload)
        return self.answer


def test_approve_asks_once_about_what_no_rule_decides(tmp_path: Path):
    root = tmp_path.resolve()
    allow_docs = Rule(1, None, ("docs/**",), "allow", "fsagent.toml")
    policy = Policy(roots=(root,), rules=(allow_docs,), source=str(root / "fsagent.toml"))
    calls = [
        call("write_file", "call_docs", path="docs/a.md", content="a\n"),
        call("write_file", "call_top", path="top.md", content="t\n"),
        call("read_file", "call_read", path="docs/a.md"),
    ]
    person = Person({"decisions": {"call_top": {"type": "approve", "grant": True}}})

    async def scenario() -> None:
        async with real_tools(root) as tools:
            command = await decide(state(*calls), tools, policy, "ask", person)
            # The person saw one payload, with only the call no rule decided; the read is not
            # theirs to decide.
            [payload] = person.shown
            assert payload["kind"] == "approval" and payload["route"] == "filesystem"
            assert [c["id"] for c in payload["calls"]] == ["call_top"]
            assert command.goto == "tools"
            approvals = command.update["approvals"]
            assert approvals["call_docs"]["by"] == "rule" and approvals["call_docs"]["type"] == (
                "approve"
            )
            assert approvals["call_top"] == {
                "type": "approve",
                "decision": "grant",
                "tool": "write_file",
                "by": "person",
            }
            assert "call_read" not in approvals
            [grant] = command.update["grants"]
            assert grant["tool"] == "write_file"

            # The same state and the grant it recorded: nobody is asked again.
            again = Person({})
            later = await decide(
                state(*calls, grants=command.update["grants"]), tools, policy, "ask", again
            )
            assert again.shown == []
            assert later.update["approvals"]["call_top"]["by"] == "grant"

    asyncio.run(scenario())


def test_approve_with_approve_no_refuses_every_write_without_asking(tmp_path: Path):
    root = tmp_path.resolve()
    person = Person({"decisions": {"call_w": {"type": "approve"}}})

    async def scenario() -> None:
        async with real_tools(root) as tools:
            command = await decide(
                state(call("write_file", "call_w", path="a.txt", content="a\n")),
                tools,
                Policy(roots=(root,)),
                "no",
                person,
            )
            assert person.shown == []
            record = command.update["approvals"]["call_w"]
            assert record["type"] == "reject" and record["by"] == "mode"

    asyncio.run(scenario())


def test_run_tools_runs_reads_and_approved_writes_once_and_audits_every_decision(
    tmp_path: Path,
):
    root = (tmp_path / "root").resolve()
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    calls = [
        call("read_file", "call_read", path="a.txt"),
        call("write_file", "call_yes", path="yes.txt", content="yes\n"),
        call("write_file", "call_no", path="no.txt", content="no\n"),
        call("write_file", "call_none", path="none.txt", content="none\n"),
    ]
    approvals = {
        "call_yes": {
            "type": "approve",
            "decision": "approve",
            "tool": "write_file",
            "by": "person",
        },
        "call_no": {
            "type": "reject",
            "decision": "reject",
            "message": "not that one",
            "tool": "write_file",
            "by": "person",
        },
    }

    async def scenario() -> None:
        async with real_tools(root) as tools, open_store(tmp_path / "threads.db") as store:
            schemas = schemas_of(tools)
            given = state(*calls, approvals=approvals)
            update = await run_tools(
                given, "t", tools=tools, schemas=schemas, store=store, root=str(root)
            )
            results = update["messages"]
            assert all(isinstance(m, ToolMessage) for m in results)
            by_call = {m.tool_call_id: m for m in results}
            assert list(by_call) == ["call_read", "call_yes", "call_no", "call_none"]
            assert "alpha" in str(by_call["call_read"].content)
            assert by_call["call_yes"].status == "success"
            assert "not that one" in str(by_call["call_no"].content)
            assert update["approvals"] == {}  # the batch is done
            assert (root / "yes.txt").read_text() == "yes\n"
            assert not (root / "no.txt").exists() and not (root / "none.txt").exists()
            rows = await store.audit_rows("t")
            assert sorted((r.call_id, r.decision, r.by) for r in rows) == [
                ("call_no", "reject", "person"),
                ("call_yes", "approve", "person"),
            ]

            # The step again (a resume after a crash): the write does not run a second time,
            # its answer is the recorded one.
            (root / "yes.txt").write_text("changed since\n")
            again = await run_tools(
                given, "t", tools=tools, schemas=schemas, store=store, root=str(root)
            )
            assert (root / "yes.txt").read_text() == "changed since\n"
            [rerun] = [m for m in again["messages"] if m.tool_call_id == "call_yes"]
            assert rerun.content == by_call["call_yes"].content
            assert len(await store.audit_rows("t")) == 2
            [kept] = await store.undo_records("t")
            assert kept.call_id == "call_yes"

    asyncio.run(scenario())


def test_a_resume_value_without_a_call_s_decision_does_not_approve_it(tmp_path: Path):
    """Through the graph as a library, nothing checks the resume value before `approve`
    reads it (front-ends do, core.approval.decisions): a call it leaves out, or decides with
    something that is not a decision, is rejected, and its file is never written."""
    root = (tmp_path / "root").resolve()
    root.mkdir()
    calls = [
        call("write_file", "call_yes", path="yes.txt", content="yes\n"),
        call("write_file", "call_left_out", path="left.txt", content="left\n"),
        call("write_file", "call_not_one", path="odd.txt", content="odd\n"),
    ]
    person = Person({"decisions": {"call_yes": {"type": "approve"}, "call_not_one": "yes"}})

    async def scenario() -> None:
        async with real_tools(root) as tools, open_store(tmp_path / "threads.db") as store:
            command = await decide(state(*calls), tools, Policy(roots=(root,)), "ask", person)
            approvals = command.update["approvals"]
            assert approvals["call_yes"]["type"] == "approve"
            for left in ("call_left_out", "call_not_one"):
                assert approvals[left]["type"] == "reject", approvals[left]
                assert approvals[left]["message"] == "no decision was given, so it was not run"
            given = state(*calls, **command.update)
            update = await run_tools(
                given, "t", tools=tools, schemas=schemas_of(tools), store=store, root=str(root)
            )
            by_call = {m.tool_call_id: str(m.content) for m in update["messages"]}
            assert "no decision was given" in by_call["call_left_out"]

    asyncio.run(scenario())
    assert (root / "yes.txt").read_text() == "yes\n"
    assert not (root / "left.txt").exists() and not (root / "odd.txt").exists()


def test_a_plan_kept_in_the_thread_comes_back_as_the_server_gave_it(tmp_path: Path):
    """The judge's plans wait in the checkpoint while a person decides. A raw root with a
    byte that is not UTF-8 must come back as it went in (the checkpoint's msgpack would
    write it as `?`): else the rule's approval of the other call, re-checked on resume,
    would find no root of ours and ask the person again."""
    root = tmp_path / os.fsdecode(b"caf\xe9")
    root.mkdir()
    root = root.resolve()
    (root / "docs").mkdir()
    allow_docs = Rule(1, None, ("docs/**",), "allow", "fsagent.toml")
    policy = Policy(roots=(root,), rules=(allow_docs,), source=str(root / "fsagent.toml"))
    calls = [
        call("write_file", "call_docs", path="docs/a.md", content="a\n"),
        call("write_file", "call_top", path="top.md", content="t\n"),
    ]
    person = Person({"decisions": {"call_top": {"type": "approve"}}})
    serializer = JsonPlusSerializer()

    async def scenario() -> None:
        async with real_tools(root) as tools:
            schemas = schemas_of(tools)
            given = state(*calls)
            judged = await judge(given, schemas=schemas, policy=policy, mode="ask", tools=tools)
            assert judged.goto == "approve"
            kept = serializer.loads_typed(serializer.dumps_typed(judged.update))  # as stored
            command = approve(
                {**given, **kept}, schemas=schemas, policy=policy, mode="ask", ask=person
            )
            [payload] = person.shown  # asked once, about the call no rule decides
            assert [c["id"] for c in payload["calls"]] == ["call_top"]
            approvals = command.update["approvals"]
            assert approvals["call_docs"]["by"] == "rule"
            assert approvals["call_top"]["by"] == "person"

    asyncio.run(scenario())
