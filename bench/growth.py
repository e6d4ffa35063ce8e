"""Thread growth: the thread file's size and the time of a turn as a conversation gets long.

A minimal graph whose one node appends a 1 KB AIMessage (with a fixed id per turn) to the
messages, so the model is not involved and what is measured is storage: our state
(`agent_graph.AgentState`, messages in a DeltaChannel with `append_messages`) against
LangGraph's default message channel (`Annotated[list, add_messages]`), each on a real
AsyncSqliteSaver file opened the way fsagent opens it, run with durability="sync". A turn is
timed as display's session runs one: `astream` to the end (it reads the state again only
when a run paused for approval, which these turns never do).

Where the growth goes (cProfile at turn 400): LangGraph loads the thread's messages from the
checkpoint at the start of every run (`aget_delta_channel_history`, unpacking and rebuilding
every message object), so a turn costs O(messages) whatever the channel stores.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph.message import add_messages

from bench.common import Row, median, row

TURNS = 400
MARKS = (10, 100, 400)
WINDOW = 9  # a turn's time is the median of the WINDOW turns ending at the mark
REPLY = "x" * 1024


class DefaultState(TypedDict, total=False):
    """What the naive agent stores: the whole list, rewritten at every step."""

    messages: Annotated[list[AnyMessage], add_messages]


async def reply(state: dict[str, Any]) -> dict[str, Any]:
    turn = state["messages"][-1].id.removeprefix("human-")
    return {"messages": [AIMessage(content=REPLY, id=f"ai-{turn}")]}


def build(state_schema: Any, saver: Any) -> Any:
    from langgraph.graph import START, StateGraph

    graph = StateGraph(state_schema)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    return graph.compile(checkpointer=saver)


def file_size(db: Path) -> int:
    """The thread file with its WAL: both are what the person's disk holds."""
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


async def run_thread(state_schema: Any, db: Path, turns: int, get_state: bool = True) -> dict:
    """Sizes in bytes, and wall and CPU seconds of a turn, at each mark.

    Wall time is what the person waits, fsyncs included, and is noisy on a shared disk; CPU
    time (all threads, aiosqlite's too) is the work we do, and shows growth without the noise.
    """
    from store.sqlite import open_saver

    sizes: dict[int, int] = {}
    wall: list[float] = []
    cpu: list[float] = []
    config = {"configurable": {"thread_id": "long"}}
    async with open_saver(db) as saver:
        app = build(state_schema, saver)
        for turn in range(1, turns + 1):
            message = HumanMessage(content=f"turn {turn}", id=f"human-{turn}")
            started, started_cpu = time.perf_counter(), time.process_time()
            async for _ in app.astream({"messages": [message]}, config, durability="sync"):
                pass
            if get_state:
                await app.aget_state(config)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
            if turn in MARKS:
                sizes[turn] = file_size(db)
    marks = [m for m in MARKS if m <= turns]
    return {
        "sizes": sizes,
        "wall": {m: median(wall[m - WINDOW : m]) for m in marks},
        "cpu": {m: median(cpu[m - WINDOW : m]) for m in marks},
    }


def measure() -> list[Row]:
    from agent_graph import AgentState

    with tempfile.TemporaryDirectory(prefix="fsagent-growth-") as temp:
        # A throwaway thread first: the first runs pay one-time costs (lazy imports, caches)
        # that would otherwise land in whichever thread is measured first.
        asyncio.run(run_thread(AgentState, Path(temp) / "warm.db", 2 * WINDOW))
        asyncio.run(run_thread(DefaultState, Path(temp) / "warm-default.db", 2 * WINDOW))
        ours = asyncio.run(run_thread(AgentState, Path(temp) / "ours.db", TURNS))
        naive = asyncio.run(run_thread(DefaultState, Path(temp) / "default.db", TURNS))
    rows = []
    for mark in MARKS:
        rows.append(
            row(
                f"thread file at turn {mark} (vs default channel)",
                ours["sizes"][mark] / 1e6,
                naive["sizes"][mark] / 1e6,
                "MB",
                "< 10 MB" if mark == TURNS else "figure",
            )
        )
    for kind in ("wall", "cpu"):
        for mark in MARKS:
            rows.append(
                row(
                    f"turn {kind} time at turn {mark} (vs default)",
                    ours[kind][mark] * 1000,
                    naive[kind][mark] * 1000,
                    "ms",
                    "figure",
                )
            )
        rows.append(
            row(
                f"turn {kind} time growth, turn {TURNS} / turn 10",
                ours[kind][TURNS] / ours[kind][10],
                naive[kind][TURNS] / naive[kind][10],
                "x",
                "ours <= 2x",
            )
        )
    return rows


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
