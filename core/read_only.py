"""The prebuilt read-only agent (`--read-only`): a ReAct agent over read tools only, so
nothing in it can change a file. Its thread is stored the same way as the approval graph's."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import ToolNode, create_react_agent

from core.messages import append_messages, content_text
from core.prompts import SYSTEM_PROMPT
from core.tool_groups import ALLOWED_TOOLS


class ReadOnlyState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]
    remaining_steps: RemainingSteps


async def text_results(request: Any, execute: Any) -> Any:
    """Tool results as plain text, as our graph sends them: some local servers reject the
    content-block lists MCP results arrive as."""
    message = await execute(request)
    if isinstance(message, ToolMessage) and not isinstance(message.content, str):
        message.content = content_text(message.content)
    return message


def build_read_only_agent(
    model: BaseChatModel, tools: list[BaseTool], checkpointer: BaseCheckpointSaver[Any]
) -> CompiledStateGraph:
    read_tools = [tool for tool in tools if tool.name in ALLOWED_TOOLS]
    return create_react_agent(
        model,
        ToolNode(read_tools, awrap_tool_call=text_results),
        prompt=SYSTEM_PROMPT,
        checkpointer=checkpointer,
        state_schema=ReadOnlyState,
    )
