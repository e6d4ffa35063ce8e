"""The read-only agent (`--read-only`): a model and the read tools in a loop, so nothing in
it can change a file. Its thread is stored the same way as the approval graph's, and its
requests are built and kept within the context the same way (core.context.context).

agent ─► tools (any call) ─► agent ... ─► END (a reply without calls)
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

from core.approval.approval import answer_invalid_call, new_id
from core.context.context import ContextKeeper, announce_compaction
from core.context.replies import mark_cut, was_cut
from core.context.summary import Summary
from core.servers import gate
from core.threads.messages import append_messages, content_text, last_ai_message
from core.threads.threads import MAX_MODEL_CALLS_PER_TURN
from core.tools.merged_tools import server_calls
from core.tools.tool_groups import ALLOWED_TOOLS


class ReadOnlyState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]
    model_calls: int
    summary: dict[str, Any]  # as in the approval graph's state


async def text_results(request: Any, execute: Any) -> Any:
    """Tool results as plain text, as our graph sends them: some local servers reject the
    content-block lists MCP results arrive as."""
    message = await execute(request)
    if isinstance(message, ToolMessage) and not isinstance(message.content, str):
        message.content = content_text(message.content)
    return message


def read_tools(tools: list[BaseTool]) -> list[BaseTool]:
    """Our read tools and the other servers' tools proven read-only (core.servers.gate)."""
    read_only = ALLOWED_TOOLS | gate.read_only_names(tools)
    return [tool for tool in tools if tool.name in read_only]


def build_read_only_agent(
    context: ContextKeeper,
    tools: list[BaseTool],
    checkpointer: BaseCheckpointSaver[Any],
    max_model_calls: int = MAX_MODEL_CALLS_PER_TURN,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """context must offer only read tools (core.tools.tool_schemas.offered_tools with
    ALLOWED_TOOLS); tools are the loaded ones, of which only the read tools can run."""
    run_tool = ToolNode(read_tools(tools), awrap_tool_call=text_results)

    async def agent(state: ReadOnlyState) -> dict[str, Any]:
        messages = state.get("messages", [])
        # A turn starts with the person's message: the count starts again.
        new_turn = bool(messages) and isinstance(messages[-1], HumanMessage)
        calls = 0 if new_turn else state.get("model_calls", 0)
        if calls >= max_model_calls:
            stop = AIMessage(
                content=f"Stopped: this request used {max_model_calls} model calls without "
                "finishing. Say how to go on, or ask for something smaller.",
                id=new_id("ai"),
            )
            return {"messages": [stop]}
        summary = Summary.from_state(state.get("summary"))
        sent = await context.send(messages, summary, on_compacted=announce_compaction)
        response = sent.response
        if was_cut(response):
            response = mark_cut(response, context.max_tokens)
        response = server_calls(response)  # list_directory with a pattern is search_files
        response.id = new_id("ai")
        for invalid in response.invalid_tool_calls:
            invalid["id"] = invalid.get("id") or new_id("call")
        update: dict[str, Any] = {"messages": [response], "model_calls": calls + 1}
        if sent.compacted is not None:
            update["summary"] = sent.compacted.as_state()
        return update

    async def tools_step(state: ReadOnlyState, config: RunnableConfig) -> dict[str, Any]:
        message = last_ai_message(state.get("messages", []))
        assert message is not None, "tools is only reached after a model message"
        results: list[Any] = []
        if message.tool_calls:
            results += (await run_tool.ainvoke({"messages": [message]}, config))["messages"]
        results += [answer_invalid_call(call) for call in message.invalid_tool_calls]
        return {"messages": results}

    def after_agent(state: ReadOnlyState) -> str:
        message = last_ai_message(state.get("messages", []))
        if message is None or not (message.tool_calls or message.invalid_tool_calls):
            return END
        return "tools"

    graph = StateGraph(ReadOnlyState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools_step)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", after_agent, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)
