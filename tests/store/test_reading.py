"""The light readers (store/reading.py for SQLite, store/postgres_reading.py for Postgres,
core/threads/stored_views.py) against the graph's own reading, on threads the real CLI made
with the real graph, MCP server and stand-in model: the messages (DeltaChannel replay), the
status, what it waits on, why it cannot resume. The Postgres store holds the SQLite store's
threads copied by `migrate-db` (LangGraph's Postgres saver writes them) and threads the CLI
made there. And the reading commands through the real CLI, on both stores: what they import
(never LangGraph, langchain, MCP) and that they print what the graph's reading prints.

A LangGraph upgrade that changes the checkpoint format fails these tests, not the person:
the reader falls back to the graph for what it does not decode, and the parity breaks here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from test_long_threads import prompts, write_notes

import store.postgres_reading
from conftest import AGENT, REPO, Workspace, agent_env
from core.threads.ledger import HOLD_MARKER, TEST_HOLD_ENV
from core.threads.messages import append_messages
from core.threads.stored_views import GRAPH_STEPS, MESSAGES, StoredView, stored_view
from fake_llm import FakeLLM, reply, text, tool_call
from local_model import LocalModel
from pg_server import Server
from store.postgres_reading import open_postgres_reader
from store.reading import Reader, open_sqlite_reader

NO_LLM = "http://127.0.0.1:9/v1"
HEAVY = ("langgraph", "langchain_core", "langchain_openai", "mcp", "langsmith", "httpx",
         "jsonschema", "pydantic")  # fmt: skip


def ask(question: str) -> dict[str, Any]:
    args = {"question": question, "choices": ["yes", "no"]}
    return reply(tool_calls=[tool_call("ask_person", args, id="ask_1")])


def write(path: str, call_id: str = "call_1") -> dict[str, Any]:
    return reply(tool_calls=[tool_call("write_file", {"path": path, "content": "x"}, id=call_id)])


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One store with a thread of each kind, made by the real CLI."""
    base = tmp_path_factory.mktemp("reading")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    space = Workspace(root=root, outside=outside, db=base / "threads.db")
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        assert space.run(llm.base_url, "hi\n", thread="fresh").returncode == 0
    with FakeLLM([write("a.txt")], auto_route="filesystem") as llm:
        space.run(llm.base_url, "write a.txt\n", thread="approval")  # stays paused
    with FakeLLM([ask("Go on?")], auto_route="general") as llm:
        # A piped line that is not one of the choices leaves the question waiting.
        space.run(llm.base_url, "ask me\nmaybe\n", thread="question")
    with FakeLLM([write("b.txt")], auto_route="filesystem") as llm:
        agent = space.start(llm.base_url, thread="crashed", env={TEST_HOLD_ENV: "started"})
        agent.send("write b.txt")
        agent.send("y")
        agent.wait_for(f"{HOLD_MARKER} 'started'")
        agent.kill()
    with FakeLLM([write("c.txt"), text("Wrote it.")], auto_route="filesystem") as llm:
        done = space.run(llm.base_url, "write c.txt\ny\n", thread="undone")
        assert done.returncode == 0, done.stderr
    undone = space.run(NO_LLM, "y\n", "undo", "undone", thread=None)
    assert undone.returncode == 0, undone.stderr
    assert not (root / "c.txt").exists()
    # Long: 30 turns on a 4096 context, read_file in each: compactions, a summary, and over
    # 100 updates of the messages, so a stored snapshot seeds the replay.
    write_notes(root, 30)
    with FakeLLM(LocalModel(), flavour="llamacpp", context=4096) as llm:
        long = space.run(llm.base_url, prompts(range(30)), thread="long", timeout=600)
        assert long.returncode == 0, long.stderr
    return space


@pytest.fixture(scope="module")
def made_pg(
    made: Workspace, postgres: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A Postgres store: every thread of `made`, copied by the real CLI's migrate-db, and two
    made on Postgres itself (so their writes keep their task paths)."""
    url = postgres.create_database(f"reading_{uuid.uuid4().hex[:8]}")
    copied = made.run(NO_LLM, "", "migrate-db", str(made.db), url, thread=None)
    assert copied.returncode == 0, copied.stderr
    base = tmp_path_factory.mktemp("reading_pg")
    (base / "root").mkdir()
    (base / "outside").mkdir()
    there = Workspace(base / "root", base / "outside", base / "unused.db", url)
    with FakeLLM([write("d.txt")], auto_route="filesystem") as llm:
        there.run(llm.base_url, "write d.txt\n", thread="pg_approval")  # stays paused
    with FakeLLM([text("One."), text("Two.")], auto_route="general") as llm:
        done = there.run(llm.base_url, "one\ntwo\n", thread="pg_turns")
        assert done.returncode == 0, done.stderr
    yield url
    postgres.drop_database(url.rsplit("/", 1)[-1])


@contextmanager
def reader_of(location: str | Path) -> Iterator[Reader]:
    if isinstance(location, str):
        with open_postgres_reader(location) as reader:
            yield reader
    else:
        with open_sqlite_reader(location) as sqlite_reader:
            yield sqlite_reader


def light_views(location: str | Path) -> dict[str, StoredView]:
    with reader_of(location) as reader:
        threads = {name: reader.thread(name, [MESSAGES]) for name in reader.thread_names()}
    return {name: stored_view(thread) for name, thread in threads.items() if thread}


def graph_views(db: str | Path) -> dict[str, StoredView]:
    from cli.reader import reading_graph
    from core.threads.threads import all_views
    from store import open_store

    async def read() -> dict[str, StoredView]:
        async with open_store(db) as store:
            views = await all_views(store, reading_graph(store))
            return {view.name: view.as_stored() for view in views}

    return asyncio.run(read())


KINDS = ["fresh", "approval", "question", "crashed", "undone", "long"]


@pytest.mark.parametrize("name", KINDS)
def test_the_light_reader_reads_each_thread_as_the_graph_does(made: Workspace, name: str):
    light, graph = light_views(made.db)[name], graph_views(made.db)[name]
    assert light == graph
    assert light.messages, "every thread here has messages"


PG_KINDS = [*KINDS, "pg_approval", "pg_turns"]


@pytest.mark.parametrize("name", PG_KINDS)
def test_the_postgres_reader_reads_each_thread_as_the_graph_does(made_pg: str, name: str):
    light, graph = light_views(made_pg)[name], graph_views(made_pg)[name]
    assert light == graph
    assert light.messages, "every thread here has messages"


def test_the_postgres_store_holds_the_kinds_meant(made_pg: str):
    views = light_views(made_pg)
    assert set(views) == set(PG_KINDS)
    assert views["approval"].status == views["pg_approval"].status == "waiting for approval"
    assert [c["args"]["path"] for c in views["pg_approval"].waiting] == ["d.txt"]
    assert views["crashed"].status == "interrupted"
    assert [m.content for m in views["pg_turns"].messages if m.type == "ai"] == ["One.", "Two."]
    with open_postgres_reader(made_pg) as reader:
        long = reader.thread("long", [MESSAGES])
    assert long is not None and long.histories[MESSAGES].seeded  # a snapshot's blob seeded it
    assert long.histories[MESSAGES].writes  # and the writes after it replay on top


def test_the_postgres_walk_reads_the_same_a_page_at_a_time(
    made_pg: str, monkeypatch: pytest.MonkeyPatch
):
    # Pages of two ancestors: the seed is found pages up, as it would be on a thread whose
    # snapshot is more than a page away.
    whole = light_views(made_pg)["long"]
    monkeypatch.setattr(store.postgres_reading, "PAGE", 2)
    assert light_views(made_pg)["long"] == whole


def test_the_threads_are_of_the_kinds_meant(made: Workspace):
    views = light_views(made.db)
    assert views["fresh"].status == "idle"
    assert views["approval"].status == "waiting for approval"
    assert [c["id"] for c in views["approval"].waiting] == ["call_1"]
    assert views["question"].status == "waiting for an answer"
    assert views["crashed"].status == "interrupted" and views["crashed"].steps == ["tools"]
    assert views["long"].summary is not None  # compacted
    # The undo's own note is a message of the thread's.
    assert any("undo" in str(m.content).lower() for m in views["undone"].messages)
    with open_sqlite_reader(made.db) as reader:
        long = reader.thread("long", [MESSAGES])
    assert long is not None and long.histories[MESSAGES].seeded  # a snapshot seeded it


def test_graph_steps_are_the_graphs_nodes(made: Workspace):
    from cli.reader import reading_graph
    from store import open_store

    async def nodes() -> set[str]:
        async with open_store(made.db) as store:
            return set(reading_graph(store).nodes)

    assert asyncio.run(nodes()) == GRAPH_STEPS


# A fresh interpreter runs the CLI's main() and reports, at exit, which modules it loaded.
PROBE = """
import atexit, json, sys
sys.path.insert(0, {repo!r})
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
import agent
sys.exit(agent.main())
"""


def loaded_by(location: str, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    code = PROBE.format(repo=str(REPO))
    command = [sys.executable, "-c", code, "--db", location, "--base-url", NO_LLM, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=agent_env(), timeout=60)
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    return done, {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize(
    "args",
    [("threads",), ("threads", "show", "long"), ("approvals",), ("audit",)],
    ids=["threads", "show", "approvals", "audit"],
)
def test_reading_commands_load_no_graph_model_or_mcp_client(
    made: Workspace, args: tuple[str], kind: str, request: pytest.FixtureRequest
):
    location = request.getfixturevalue("made_pg") if kind == "postgres" else str(made.db)
    done, roots = loaded_by(location, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout  # it printed what it read
    assert not roots & set(HEAVY)
    if kind == "sqlite":
        assert "psycopg" not in roots  # the Postgres driver only for a Postgres URL
    # And what it printed is what the graph's reading prints.
    heavy = subprocess.run(
        [sys.executable, str(AGENT), "--db", location, "--base-url", NO_LLM, *args],
        capture_output=True, text=True, env={**agent_env(), "FSAGENT_TEST_HEAVY_READ": "1"},
    )  # fmt: skip
    assert heavy.returncode == 0, heavy.stderr
    assert heavy.stdout == done.stdout


class State(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]


class SnapshotEveryTime(TypedDict):
    """Every update a snapshot, so the latest checkpoint holds the messages itself."""

    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages, snapshot_frequency=1)]


@pytest.mark.parametrize("state", [State, SnapshotEveryTime], ids=["deltas", "snapshots"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_writes_of_one_step_replacements_and_removals_replay_as_langgraph_does(
    tmp_path: Path, kind: str, state: type, request: pytest.FixtureRequest
):
    """A graph of LangGraph's own on our message channel, where the order matters: two steps
    that write messages in one super-step (their order is `writes_sort_key`'s), then one that
    replaces one message by id and removes another, for 60 rounds (past a snapshot). On
    Postgres, LangGraph's saver keeps the snapshot as a blob with a `true` marker inline."""

    def step(name: str) -> Any:
        def write(state: Any) -> dict[str, Any]:
            turn = len(state["messages"])
            return {"messages": [HumanMessage(f"{name} {turn}", id=f"{name}-{turn}")]}

        return write

    def tidy(state: Any) -> dict[str, Any]:
        # Both writes of the step stay, so their order shows; now and then the first goes.
        *older, last = state["messages"]
        kept = AIMessage(f"replaced {last.content}", id=last.id)
        gone = [RemoveMessage(id=older[0].id or "")] if len(older) % 3 == 0 else []
        return {"messages": [*gone, kept]}

    graph = StateGraph(state)
    for name in ("b_step", "a_step"):
        graph.add_node(name, step(name))
        graph.add_edge(START, name)
        graph.add_edge(name, "tidy")
    graph.add_node("tidy", tidy)
    location: str | Path = tmp_path / "order.db"
    if kind == "postgres":
        location = request.getfixturevalue("postgres_url")

    def saver_of() -> Any:
        if isinstance(location, str):
            return AsyncPostgresSaver.from_conn_string(location)
        return AsyncSqliteSaver.from_conn_string(str(location))

    async def run() -> list[tuple[str, str, Any]]:
        async with saver_of() as saver:
            if isinstance(location, str):
                await saver.setup()
            app = graph.compile(checkpointer=saver)
            config: Any = {"configurable": {"thread_id": "t"}}
            for _ in range(60):
                await app.ainvoke({"messages": []}, config)
            state = await app.aget_state(config)
            return [(m.type, m.id or "", m.content) for m in state.values["messages"]]

    expected = asyncio.run(run())
    with reader_of(location) as reader:
        stored = reader.thread("t", [MESSAGES])
    assert stored is not None
    if state is State:
        assert stored.histories[MESSAGES].seeded  # a snapshot of an ancestor's seeds it
    else:
        assert MESSAGES not in stored.histories  # the checkpoint holds them
    got = [(m.type, m.id, m.content) for m in stored_view(stored).messages]
    assert got == expected
    assert len(expected) > 60 and any(m[2].startswith("replaced") for m in expected)
