"""The thread store without the model or the tools: the graph's shape for commands that read or
reset threads, a thread held while it is read, and the checks made before a thread is resumed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from core.errors import StartupError, ThreadError

if TYPE_CHECKING:
    from cli.settings import Settings
    from core.threads.threads import Graph
    from store.base import Store


class NoModel:
    """Stands in for the chat model in a graph that is only read or updated, never run."""

    def bind_tools(self, *args: Any, **kwargs: Any) -> NoModel:
        return self

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this graph only reads threads; it has no model")


def reading_graph(store: Store) -> Graph:
    """The graph's shape without LM Studio or the MCP server, for commands that read or
    reset threads: the state's channels rebuild messages from stored deltas, and its node
    names tell which paused steps this version can resume."""
    from agent_graph import build_graph

    return build_graph(NoModel, [], store.checkpointer)  # type: ignore[arg-type]


@asynccontextmanager
async def open_reader(settings: Settings) -> AsyncIterator[tuple[Store, Graph]]:
    from store import open_store

    async with open_store(settings.db) as store:
        yield store, reading_graph(store)


@asynccontextmanager
async def held_reader(settings: Settings, given: str) -> AsyncIterator[tuple[Store, Graph, str]]:
    """The reader on an existing thread, held: the store, the graph and the thread's stored
    name. A name that is no thread is refused before the hold, which would register it."""
    from core.threads.thread_names import existing_name

    async with open_reader(settings) as (store, reader):
        name = await existing_name(store, given)
        async with store.hold(name):
            yield store, reader, name


async def in_reader(settings: Settings, act: Callable[[Store, Graph], Any]) -> int:
    async with open_reader(settings) as (store, app):
        return int(await act(store, app))


async def check_resumable(store: Store, thread: str) -> None:
    """Refuse, loudly, a thread paused where this version cannot resume it."""
    from core.threads.threads import cannot_resume_message, view_thread

    view = await view_thread(reading_graph(store), thread)
    if view is not None and view.problem:
        raise StartupError(cannot_resume_message(view))


def require_store(location: str, name: str) -> None:
    from store import missing

    absent = missing(location)
    if absent is not None:
        raise ThreadError(f"no thread named '{name}': {absent.sentence}")
