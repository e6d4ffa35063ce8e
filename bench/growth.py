"""Thread growth: the thread file's size and the time of a turn as a conversation gets long.

A minimal graph whose one node appends a 1 KB AIMessage (with a fixed id per turn) to the
messages, so the model is not involved and what is measured is storage: our state
(`agent_graph.AgentState`, messages in a DeltaChannel with `append_messages`) against
LangGraph's default message channel (`Annotated[list, add_messages]`), each on a real
AsyncSqliteSaver file opened the way fsagent opens it, run with durability="sync". A turn is
timed as display's session runs one: `astream` to the end (it reads the state again only
when a run paused for approval, which these turns never do).

Our state runs again on Postgres (a throwaway local server, fsync on, through the store
fsagent opens on a URL): the store's size is what its tables take on the server
(`pg_total_relation_size` of LangGraph's tables and ours, indexes and TOAST included), and a
turn's time is set beside the same turn on SQLite.

Where the growth goes (cProfile at turn 400): LangGraph loads the thread's messages from the
checkpoint at the start of every run (`aget_delta_channel_history`, unpacking and rebuilding
every message object), so a turn costs O(messages) whatever the channel stores.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph.message import add_messages

from bench.common import Row, median, postgres_server, row

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


# The tables a Postgres store keeps: LangGraph's and ours.
POSTGRES_TABLES = (
    "checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations",
    "fsagent_threads", "fsagent_ledger", "fsagent_audit", "fsagent_migrations",
)  # fmt: skip


@asynccontextmanager
async def open_checkpointer(
    location: Path | str,
) -> AsyncIterator[tuple[Any, Callable[[], Awaitable[int]]]]:
    """LangGraph's saver as fsagent opens it at `location` (a SQLite file, or a Postgres URL),
    and how to measure the store's size in bytes."""
    if isinstance(location, Path):
        from store.sqlite import open_saver

        async def file_bytes() -> int:
            return file_size(location)

        async with open_saver(location) as saver:
            yield saver, file_bytes
        return

    import psycopg

    from store import open_store

    async def table_bytes() -> int:
        async with await psycopg.AsyncConnection.connect(str(location)) as conn:
            cursor = await conn.execute(
                "SELECT sum(pg_total_relation_size(to_regclass(name))) "
                "FROM unnest(%s::text[]) AS name",
                (list(POSTGRES_TABLES),),
            )
            row = await cursor.fetchone()
            return int(row[0] or 0) if row else 0

    async with open_store(location) as store:
        yield store.checkpointer, table_bytes


async def run_thread(state_schema: Any, db: Path | str, turns: int, get_state: bool = True) -> dict:
    """Sizes in bytes, and wall and CPU seconds of a turn, at each mark.

    Wall time is what the person waits, fsyncs included, and is noisy on a shared disk; CPU
    time (all threads, aiosqlite's too) is the work we do, and shows growth without the noise.
    """
    sizes: dict[int, int] = {}
    wall: list[float] = []
    cpu: list[float] = []
    config = {"configurable": {"thread_id": "long"}}
    async with open_checkpointer(db) as (saver, size):
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
                sizes[turn] = await size()
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
    with postgres_server() as server:
        asyncio.run(run_thread(AgentState, server.create_database("warm"), 2 * WINDOW))
        postgres = asyncio.run(run_thread(AgentState, server.create_database("ours"), TURNS))
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
    rows.append(
        row(
            f"Postgres: thread store at turn {TURNS} (vs SQLite)",
            postgres["sizes"][TURNS] / 1e6,
            ours["sizes"][TURNS] / 1e6,
            "MB",
            "figure: our tables and LangGraph's",
        )
    )
    for kind in ("wall", "cpu"):
        for mark in (10, TURNS):
            rows.append(
                row(
                    f"Postgres: turn {kind} time, turn {mark} (vs SQLite)",
                    postgres[kind][mark] * 1000,
                    ours[kind][mark] * 1000,
                    "ms",
                    "figure: a local server, fsync on",
                )
            )
    return rows


if __name__ == "__main__":
    from bench.common import print_table

    print_table(measure())
