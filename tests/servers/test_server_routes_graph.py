"""A server's route in the graph itself (agent_graph.build_graph), on the tests' real little
server, a real SQLite store and the stand-in model: a server named like one of our groups
gets a word of its own; a run cut off on a server's route is resumed by the graph that has
the server, said loudly by one that has not, and never refused by the reader that knows no
server (cli.reader); a thread paused on a server's route goes on as general without it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.types import Command
from servers.test_gate import little, servers

from agent_graph import build_graph, parse_route
from cli.reader import check_resumable
from core.context.context import ContextKeeper
from core.read_only import build_read_only_agent
from core.servers.routes import server_routes
from core.threads.stored_views import resume_problem
from core.threads.threads import view_thread
from core.tools.tool_schemas import offered_tools
from fake_llm import FakeLLM, reply, text, tool_call
from store import open_store


def chat(llm: FakeLLM) -> Any:
    return lambda: ChatOpenAI(
        base_url=llm.base_url, api_key="none", model="fake-model", max_retries=0
    )


def named(name: str) -> Any:
    spec = little()
    return type(spec)(**{**spec.__dict__, "name": name})


def test_a_server_named_like_one_of_our_groups_gets_a_word_of_its_own(tmp_path: Path) -> None:
    async def run() -> None:
        async with servers(tmp_path, named("search"), named("Notes")) as (_, tools):
            routes = server_routes(tools.values())
            assert routes.names == ("filesystem", "search", "general", "search_mcp", "notes")
            assert routes.server("search_mcp").server == "search"  # type: ignore[union-attr]
            assert parse_route("search_mcp.", routes.names) == "search_mcp"
            assert parse_route("**Notes**", routes.names) == "notes"
            graph = build_graph(lambda: None, list(tools.values()), None)  # type: ignore[arg-type,return-value]
            assert {"agent_search_mcp", "agent_notes", "agent_search"} <= set(graph.nodes)

    asyncio.run(run())


def test_a_run_cut_off_on_a_servers_route_is_resumed_only_where_the_server_is(
    tmp_path: Path,
) -> None:
    config = {"configurable": {"thread_id": "t"}}
    script = [text("little"), reply(status=500, error="the model server fell over"), text("Done.")]

    async def run() -> None:
        with FakeLLM(script) as llm:
            async with (
                servers(tmp_path, little()) as (_, tools),
                open_store(str(tmp_path / "threads.db")) as store,
            ):
                app = build_graph(chat(llm), list(tools.values()), store.checkpointer)
                with pytest.raises(Exception, match="fell over"):
                    await app.ainvoke({"messages": [HumanMessage("read a note")]}, config)
                assert (await app.aget_state(config)).next == ("agent_little",)
                # The reader that knows no server does not refuse it (the chat checks first).
                await check_resumable(store, "t")
                # A graph without the server says so, loudly, rather than do nothing.
                without = build_graph(chat(llm), [], store.checkpointer)
                view = await view_thread(without, "t")
                assert view is not None and "'agent_little'" in str(view.problem)
                # The graph with it resumes the cut-off run on its route.
                view = await view_thread(app, "t")
                assert view is not None and view.problem is None
                done = await app.ainvoke(None, config)
                assert done["messages"][-1].content == "Done."
                assert done["route"] == "little"

    asyncio.run(run())


def test_a_thread_paused_on_a_servers_route_goes_on_as_general_without_it(
    tmp_path: Path,
) -> None:
    config = {"configurable": {"thread_id": "t"}}
    write = reply(tool_calls=[tool_call("little__write_note", {"name": "n.txt", "text": "hi"})])
    script = [text("little"), write, text("Not written.")]

    async def run() -> None:
        with FakeLLM(script) as llm:
            async with (
                servers(tmp_path, little()) as (_, tools),
                open_store(str(tmp_path / "threads.db")) as store,
            ):
                app = build_graph(chat(llm), list(tools.values()), store.checkpointer)
                await app.ainvoke({"messages": [HumanMessage("write a note")]}, config)
                assert (await app.aget_state(config)).next == ("approve",)
            # Opened again without the server: the person's no is answered, and the run
            # goes on at agent_general.
            async with open_store(str(tmp_path / "threads.db")) as store:
                without = build_graph(chat(llm), [], store.checkpointer)
                call_id = write["tool_calls"][0]["id"]
                no = {"decisions": {call_id: {"type": "reject", "message": "no"}}}
                done = await without.ainvoke(Command(resume=no), config)
                assert done["messages"][-1].content == "Not written."
        assert not (tmp_path / "n.txt").exists()

    asyncio.run(run())


def test_the_light_reader_leaves_a_servers_route_to_the_graph_that_runs_it() -> None:
    assert resume_problem(["agent_git"], [], False) is None
    assert "'tools_v9'" in str(resume_problem(["tools_v9"], [], False))


def test_the_read_only_agent_runs_no_tool_of_a_server_not_proven_read_only(
    tmp_path: Path,
) -> None:
    """Even handed a server's every tool, the read-only agent runs only those proven
    read-only (core.read_only.read_tools): a write asked for is answered, never run."""
    config = {"configurable": {"thread_id": "t"}}
    calls = [
        tool_call("little__write_note", {"name": "n.txt", "text": "hi"}),
        tool_call("little__read_note", {"name": "m.txt"}),
    ]
    (tmp_path / "m.txt").write_text("the note", encoding="utf-8")

    async def run() -> None:
        with FakeLLM([reply(tool_calls=calls), text("Done.")]) as llm:
            async with (
                servers(tmp_path, little()) as (_, tools),
                open_store(str(tmp_path / "threads.db")) as store,
            ):
                every = list(tools.values())
                context = ContextKeeper(chat(llm), offered_tools(every), budget=None)
                app = build_read_only_agent(context, every, store.checkpointer)
                done = await app.ainvoke({"messages": [HumanMessage("notes")]}, config)
                answers = [m for m in done["messages"] if m.type == "tool"]
                assert "the note" in str(answers[1].content)
                assert answers[0].status == "error"

    asyncio.run(run())
    assert not (tmp_path / "n.txt").exists()
