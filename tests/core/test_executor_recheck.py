"""The executor's own check (DESIGN.md: `tools` runs a write only with an explicit approval in
state, fail closed): a write call that reaches `tools` with no approval record, as a bug in
routing would send it, does not run. A mutant that let such a call through survived the
whole suite (issue 19), since every normal path records a decision first.

The graph as `fsagent serve` wires it (real MCP server on a temp folder, real SQLite, the LM
Studio stand-in); the routing bug is made by hand with LangGraph's own `aupdate_state`, as
the `approve` node would have gone to `tools` (its Command) without recording anything."""

from __future__ import annotations

import asyncio

from langgraph.types import Command

from conftest import Workspace, tool_messages
from core.threads.threads import run_config
from fake_llm import FakeLLM, reply, text, tool_call
from serving import serving


def test_a_write_with_no_approval_record_does_not_run(workspace: Workspace):
    write = tool_call("write_file", {"path": "hello.txt", "content": "hello\n"}, id="call_1")

    async def scenario() -> None:
        script = [reply(tool_calls=[write]), text("It did not run.")]
        with FakeLLM(script, auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "create hello.txt")
                graph = served.app.state.service.graph
                config = run_config("t")
                # approve "decided" nothing, yet went on to tools.
                skipped = Command(goto="tools", update={"approvals": {}})
                await graph.aupdate_state(config, skipped, as_node="approve")
                state = await graph.aget_state(config)
                assert state.next == ("tools",) and not state.values.get("approvals")
                await graph.ainvoke(None, config)

                [answer] = tool_messages(llm.requests_with_tools()[1])
                assert answer["tool_call_id"] == "call_1"
                assert "no approval was recorded for it, so it was not run" in answer["content"]

    asyncio.run(scenario())
    assert not (workspace.root / "hello.txt").exists()
