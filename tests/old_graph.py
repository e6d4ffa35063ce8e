"""Leave a thread paused the way another version of fsagent would have: at a step named
STEP (the current graph calls it `approve`), waiting on an approval payload of VERSION.

    python tests/old_graph.py DB THREAD STEP VERSION

or, in a test's own process (the graph's libraries are imported once per worker, not once a
thread): `leave_paused(DB, THREAD, STEP, VERSION)`. It uses the real state schema and
checkpointer on the real thread file, so the current CLI meets exactly what an older or
newer release would have stored.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from agent_graph import AgentState  # noqa: E402
from store import open_store  # noqa: E402

WRITE = {"id": "call_old", "name": "write_file", "args": {"path": "old.txt", "content": "old"}}


def seed(state: AgentState) -> dict[str, Any]:
    return {
        "route": "filesystem",
        "messages": [AIMessage(content="", id="ai-old", tool_calls=[WRITE])],
    }


def pause_for(version: int) -> Any:
    def pause(state: AgentState) -> dict[str, Any]:
        interrupt(
            {
                "kind": "approval",
                "version": version,
                "route": "filesystem",
                "calls": [{**WRITE, "allowed_decisions": ["approve", "reject"]}],
            }
        )
        return {}

    return pause


async def main(db: str, thread: str, step: str, version: int) -> None:
    async with open_store(db) as store:
        graph = StateGraph(AgentState)
        graph.add_node("seed", seed)
        graph.add_node(step, pause_for(version))
        graph.add_edge(START, "seed")
        graph.add_edge("seed", step)
        app = graph.compile(checkpointer=store.checkpointer)
        question = HumanMessage(content="create old.txt", id="human-old")
        config = {"configurable": {"thread_id": thread}}
        await app.ainvoke({"messages": [question]}, config, durability="sync")


def leave_paused(db: str, thread: str, step: str, version: int) -> None:
    asyncio.run(main(db, thread, step, version))


if __name__ == "__main__":
    leave_paused(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
