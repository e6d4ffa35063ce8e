"""The light reader (store/reading.py, core/threads/stored_views.py) against the graph's own
reading, on threads the real CLI made with the real graph, MCP server and stand-in model: the
messages (DeltaChannel replay), the status, what it waits on, why it cannot resume. And the
reading commands through the real CLI: what they import (never LangGraph, langchain, MCP).

A LangGraph upgrade that changes the checkpoint format fails these tests, not the person:
the reader falls back to the graph for what it does not decode, and the parity breaks here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from test_long_threads import prompts, write_notes

from conftest import AGENT, REPO, Workspace, agent_env
from core.threads.ledger import HOLD_MARKER, TEST_HOLD_ENV
from core.threads.messages import append_messages
from core.threads.stored_views import GRAPH_STEPS, MESSAGES, StoredView, stored_view
from fake_llm import FakeLLM, reply, text, tool_call
from local_model import LocalModel
from store.reading import open_sqlite_reader

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


def light_views(db: Path) -> dict[str, StoredView]:
    with open_sqlite_reader(db) as reader:
        threads = {name: reader.thread(name, [MESSAGES]) for name in reader.thread_names()}
    return {name: stored_view(thread) for name, thread in threads.items() if thread}


def graph_views(db: Path) -> dict[str, StoredView]:
    from agent import reading_graph
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
    from agent import reading_graph
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


def loaded_by(made: Workspace, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    code = PROBE.format(repo=str(REPO))
    command = [sys.executable, "-c", code, "--db", str(made.db), "--base-url", NO_LLM, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=agent_env(), timeout=60)
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    return done, {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    "args",
    [("threads",), ("threads", "show", "long"), ("approvals",), ("audit",)],
    ids=["threads", "show", "approvals", "audit"],
)
def test_reading_commands_load_no_graph_model_or_mcp_client(made: Workspace, args: tuple[str]):
    done, roots = loaded_by(made, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout  # it printed what it read
    assert not roots & set(HEAVY)
    # And what it printed is what the graph's reading prints.
    heavy = subprocess.run(
        [sys.executable, str(AGENT), "--db", str(made.db), "--base-url", NO_LLM, *args],
        capture_output=True, text=True, env={**agent_env(), "FSAGENT_TEST_HEAVY_READ": "1"},
    )  # fmt: skip
    assert heavy.stdout == done.stdout


class State(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]


def test_writes_of_one_step_replacements_and_removals_replay_as_langgraph_does(tmp_path: Path):
    """A graph of LangGraph's own on our message channel, where the order matters: two steps
    that write messages in one super-step (their order is `writes_sort_key`'s), then one that
    replaces one message by id and removes another, for 60 rounds (past a snapshot)."""

    def step(name: str) -> Any:
        def write(state: State) -> dict[str, Any]:
            turn = len(state["messages"])
            return {"messages": [HumanMessage(f"{name} {turn}", id=f"{name}-{turn}")]}

        return write

    def tidy(state: State) -> dict[str, Any]:
        # Both writes of the step stay, so their order shows; now and then the first goes.
        *older, last = state["messages"]
        kept = AIMessage(f"replaced {last.content}", id=last.id)
        gone = [RemoveMessage(id=older[0].id or "")] if len(older) % 3 == 0 else []
        return {"messages": [*gone, kept]}

    graph = StateGraph(State)
    for name in ("b_step", "a_step"):
        graph.add_node(name, step(name))
        graph.add_edge(START, name)
        graph.add_edge(name, "tidy")
    graph.add_node("tidy", tidy)
    db = tmp_path / "order.db"

    async def run() -> list[tuple[str, str, Any]]:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            app = graph.compile(checkpointer=saver)
            config: Any = {"configurable": {"thread_id": "t"}}
            for _ in range(60):
                await app.ainvoke({"messages": []}, config)
            state = await app.aget_state(config)
            return [(m.type, m.id or "", m.content) for m in state.values["messages"]]

    expected = asyncio.run(run())
    with open_sqlite_reader(db) as reader:
        stored = reader.thread("t", [MESSAGES])
    assert stored is not None
    got = [(m.type, m.id, m.content) for m in stored_view(stored).messages]
    assert got == expected
    assert len(expected) > 60 and any(m[2].startswith("replaced") for m in expected)
