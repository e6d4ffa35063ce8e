"""The approval graph (router, agent_<group>, after_agent, approve, tools), its checkpointer,
and the `fsagent` command line.

    router ─► agent_<route> ─► after_agent ─┬─► END           (no tool calls)
                                             ├─► tools         (read calls only)
                                             └─► approve       (any write call)
    approve ── rules, mode, grants; interrupt(payload) for the rest ── Command(goto="tools")
    tools ─► agent_<route>       (writes the audit rows, then runs what was approved)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

# State schemas are read at run time by LangGraph, so their types must be importable here.
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.managed import RemainingSteps

from agent import (
    ROUTES,
    SYSTEM_PROMPT,
    WRITE_TOOLS,
    StartupError,
    ThreadError,
    content_text,
    tools_for_group,
)

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from audit import AuditLog
    from policy import Policy
    from threads import Store

# The node whose name updates made between turns (revoking a grant) are recorded under. It
# never runs; it leads to END, so an update as it schedules nothing.
PERSON_UPDATE = "person_update"

# One request may take this many model calls before the turn is stopped for the person.
MAX_MODEL_CALLS_PER_TURN = 25

ROUTER_PROMPT = (
    "Sort the person's request into one group and answer with its name only, one word:\n"
    "filesystem: read, create, change, copy, move or delete files and folders\n"
    "search: find files by name or find text inside files\n"
    "general: anything else"
)


# --- state ---------------------------------------------------------------------------------


def append_messages(current: list[Any], writes: Sequence[Any]) -> list[Any]:
    """The message reducer for DeltaChannel: apply a batch of writes in order.

    It is `add_messages` folded over the batch, which is batching-invariant as DeltaChannel
    needs, but with the id index built once: folding `add_messages` re-indexes the whole
    history for every write, which made a turn's cost grow with the thread. Anything
    `add_messages` treats specially (a removal, a chunk, no id, a dict) goes through it.
    Every message we write carries an id already, so replaying never invents new ones.
    """
    from langchain_core.messages import BaseMessage, BaseMessageChunk, RemoveMessage
    from langgraph.graph.message import add_messages

    merged = list(current)
    index = {message.id: n for n, message in enumerate(merged)}
    for write in writes:
        batch = write if isinstance(write, list) else [write]
        if not all(_plain_message(m, BaseMessage, BaseMessageChunk, RemoveMessage) for m in batch):
            merged = add_messages(merged, write)
            index = {message.id: n for n, message in enumerate(merged)}
            continue
        for message in batch:
            if message.id in index:
                merged[index[message.id]] = message
            else:
                index[message.id] = len(merged)
                merged.append(message)
    return merged


def _plain_message(message: Any, base: type, chunk: type, remove: type) -> bool:
    return (
        isinstance(message, base) and not isinstance(message, chunk | remove) and bool(message.id)
    )


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]
    route: str
    model_calls: int
    # call id -> approval record, for the batch under review; only `approve` writes it.
    approvals: dict[str, dict[str, Any]]
    # The person's "a" answers: a tool and a folder each. Written by `approve` when granted,
    # and by `person_update` when revoked; they end with the thread.
    grants: list[dict[str, str]]


class ReadOnlyState(TypedDict, total=False):
    """The prebuilt read-only agent's state, stored the same way as ours."""

    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]
    remaining_steps: RemainingSteps


# --- what the model is sent ------------------------------------------------------------------


def messages_for_model(messages: list[Any]) -> list[Any]:
    """The history as a well-formed request.

    Calls whose arguments did not parse are sent as calls with empty arguments (the bad text
    is never sent back), and a call left without an answer by a cut-off run gets one, right
    after its message, so the request never has a tool call without a result.
    """
    from langchain_core.messages import ToolMessage

    request: list[Any] = []
    unanswered: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            request += [_cancelled_answer(call) for call in unanswered]
            unanswered = []
        if isinstance(message, AIMessage):
            message = _without_invalid_arguments(message)
            unanswered = list(message.tool_calls)
        elif isinstance(message, ToolMessage):
            unanswered = [c for c in unanswered if c["id"] != message.tool_call_id]
        request.append(message)
    return request + [_cancelled_answer(call) for call in unanswered]


def _without_invalid_arguments(message: AIMessage) -> AIMessage:
    if not message.invalid_tool_calls:
        return message
    repaired = [
        {"name": call.get("name") or "unknown", "args": {}, "id": call["id"], "type": "tool_call"}
        for call in message.invalid_tool_calls
    ]
    return AIMessage(
        content=message.content, id=message.id, tool_calls=[*message.tool_calls, *repaired]
    )


def _cancelled_answer(call: dict[str, Any]) -> Any:
    from approval import cut_off_answer

    return cut_off_answer(call, "the run was cut off")


def last_ai_message(state: AgentState) -> AIMessage | None:
    messages = state.get("messages") or []
    if messages and isinstance(messages[-1], AIMessage):
        return messages[-1]
    return None


def parse_route(text: str) -> str:
    """The first group name in the model's answer; anything else is `general`."""
    for word in text.lower().replace("*", " ").replace("`", " ").split():
        word = word.strip(".,:;!\"'()")
        if word in ROUTES:
            return word
    return "general"


# --- the graph -------------------------------------------------------------------------------


def build_graph(
    model: Callable[[], BaseChatModel],
    tools: list[BaseTool],
    checkpointer: AsyncSqliteSaver | None,
    *,
    policy: Policy | None = None,
    mode: str = "ask",
    audit: AuditLog | None = None,
    ledger: Store | None = None,
    max_model_calls: int = MAX_MODEL_CALLS_PER_TURN,
) -> Any:
    """The approval graph. With a `ledger`, every write call runs at most once per thread,
    however often the tools step itself runs again (a resume after a crash)."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    import approval
    from audit import rows_for
    from policy import Policy

    policy = policy or Policy(roots=(Path.cwd().resolve(),))  # no rules: every write asks
    tools_by_name = {tool.name: tool for tool in tools}
    schemas = {tool.name: _input_schema(tool) for tool in tools}

    async def router(state: AgentState) -> dict[str, Any]:
        question = _last_human_text(state)
        answer = await model().ainvoke([SystemMessage(ROUTER_PROMPT), HumanMessage(question)])
        return {"route": parse_route(str(answer.content)), "model_calls": 0, "approvals": {}}

    def make_agent(group: str) -> Any:
        bound: list[Any] = []  # bound on first use: the model is built at the first prompt

        async def agent(state: AgentState) -> dict[str, Any]:
            if not bound:
                bound.append(model().bind_tools(tools_for_group(tools, group), tool_choice="auto"))
            calls = state.get("model_calls", 0)
            if calls >= max_model_calls:
                return {"messages": [_step_limit_message(max_model_calls)]}
            request = [SystemMessage(SYSTEM_PROMPT)]
            request += messages_for_model(state.get("messages", []))
            response = await bound[0].ainvoke(request)
            _give_ids(response)
            return {"messages": [response], "model_calls": calls + 1}

        agent.__name__ = f"agent_{group}"
        return agent

    def after_agent(state: AgentState) -> str:
        # Decided by tool name, never by route: no group can reach a write without `approve`.
        message = last_ai_message(state)
        if message is None or not (message.tool_calls or message.invalid_tool_calls):
            return END
        if approval.writes_to_review(message, schemas):
            return "approve"
        return "tools"

    def approve(state: AgentState) -> Command:
        # Runs again from the top on resume: nothing before interrupt() may have an effect,
        # and what rules, mode and grants decide must come out the same both times.
        message = last_ai_message(state)
        assert message is not None, "approve is only reached after a model message"
        grants = list(state.get("grants") or [])
        calls = approval.writes_to_review(message, schemas)
        approvals = {}
        for call in calls:
            record = approval.decide_without_person(call, policy, mode, grants)
            if record is not None:
                approvals[call["id"]] = record
        for_person = [call for call in calls if call["id"] not in approvals]
        if for_person:
            payload = approval.approval_payload(state.get("route", "general"), for_person)
            decided = approval.record_decisions(interrupt(payload), for_person, schemas)
            approvals |= decided
            grants += new_grants(for_person, decided, grants)
        # Always through `tools`: it records every decision in the audit log, answers each
        # call (rejections included) and runs the reads beside them.
        return Command(goto="tools", update={"approvals": approvals, "grants": grants})

    def new_grants(
        calls: list[dict[str, Any]], decided: dict[str, Any], grants: list[dict[str, str]]
    ) -> list[dict[str, str]]:
        added: list[dict[str, str]] = []
        for call in calls:
            if decided[call["id"]].get("decision") != "grant":
                continue
            grant = policy.grant_for(call)
            if grant is not None and grant not in grants + added:
                added.append(grant)
        return added

    async def run_tools(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        message = last_ai_message(state)
        assert message is not None, "tools is only reached after a model message"
        approvals = state.get("approvals") or {}
        thread = str(config["configurable"]["thread_id"])
        if audit is not None:
            await audit.record(rows_for(thread, message, approvals))
        results = []
        for call in message.tool_calls:
            refusal = approval.answer_without_running(call, approvals, schemas)
            results.append(refusal or await run_call(call, approvals, str(message.id), thread))
        results += [approval.answer_invalid_call(c) for c in message.invalid_tool_calls]
        return {"messages": results, "approvals": {}}

    async def run_call(
        call: dict[str, Any], approvals: dict[str, Any], message_id: str, thread: str
    ) -> Any:
        def run() -> Any:
            return _run_call(call, approvals, tools_by_name)

        if ledger is None or call["name"] not in WRITE_TOOLS:
            return await run()
        from threads import run_write_once

        args = _call_args(call, approvals)
        return await run_write_once(ledger, thread, message_id, call, args, run)

    def back_to_agent(state: AgentState) -> str:
        return f"agent_{state.get('route', 'general')}"

    graph = StateGraph(AgentState)
    graph.add_node("router", router)
    for group in ROUTES:
        graph.add_node(f"agent_{group}", make_agent(group))
        graph.add_conditional_edges(f"agent_{group}", after_agent, ["approve", "tools", END])
    graph.add_node("approve", approve, destinations=("tools",))
    graph.add_node("tools", run_tools)
    graph.add_node(PERSON_UPDATE, lambda state: {})
    graph.add_edge(PERSON_UPDATE, END)
    graph.add_edge(START, "router")
    graph.add_conditional_edges(
        "router", lambda state: f"agent_{state['route']}", [f"agent_{g}" for g in ROUTES]
    )
    graph.add_conditional_edges("tools", back_to_agent, [f"agent_{g}" for g in ROUTES])
    return graph.compile(checkpointer=checkpointer)


def run_config(thread: str) -> dict[str, Any]:
    """The config a run of the graph on `thread` takes, whoever starts it."""
    return {"configurable": {"thread_id": thread}, "recursion_limit": recursion_limit()}


def recursion_limit(max_model_calls: int = MAX_MODEL_CALLS_PER_TURN) -> int:
    """LangGraph's own step cap, set above ours so the person gets our clear message."""
    return 4 * max_model_calls + 10


def _input_schema(tool: BaseTool) -> dict[str, Any]:
    schema = tool.args_schema
    if isinstance(schema, dict):
        return schema
    return tool.get_input_schema().model_json_schema()


def _last_human_text(state: AgentState) -> str:
    from langchain_core.messages import HumanMessage

    for message in reversed(state.get("messages", [])):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


def _give_ids(response: AIMessage) -> None:
    """Our own message id (servers reuse theirs) and an id for every unparseable call."""
    import approval

    response.id = approval.new_id("ai")
    for invalid in response.invalid_tool_calls:
        invalid["id"] = invalid.get("id") or approval.new_id("call")


def _step_limit_message(limit: int) -> Any:
    import approval

    return AIMessage(
        content=f"Stopped: this request used {limit} model calls without finishing. "
        "Say how to go on, or ask for something smaller.",
        id=approval.new_id("ai"),
    )


def _call_args(call: dict[str, Any], approvals: dict[str, Any]) -> Any:
    """The arguments a call runs with: the person's, when they edited a write."""
    if call["name"] not in WRITE_TOOLS:
        return call["args"]
    return (approvals.get(call["id"]) or {}).get("args", call["args"])


async def _run_call(
    call: dict[str, Any], approvals: dict[str, Any], tools_by_name: dict[str, BaseTool]
) -> Any:
    import approval

    record = approvals.get(call["id"]) or {}
    args = _call_args(call, approvals)
    try:
        result = await tools_by_name[call["name"]].ainvoke(
            {"type": "tool_call", "name": call["name"], "args": args, "id": call["id"]}
        )
        text, failed = content_text(result.content), result.status == "error"
    except Exception as error:  # a broken pipe to the server must not lose the whole turn
        text, failed = f"Error: {call['name']} failed: {error}", True
    if record.get("edited"):
        text = approval.edited_preamble(call, args) + text
    return approval.tool_message(call["id"], text, error=failed)


# --- storage ---------------------------------------------------------------------------------


@asynccontextmanager
async def open_checkpointer(db: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """The thread file: WAL so readers do not block the writer, a busy timeout for the rest."""
    import sqlite3

    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if not db.parent.is_dir():
        raise StartupError(
            f"--db {db}: folder {db.parent} does not exist; create it or pick another"
        )
    try:
        conn = await aiosqlite.connect(str(db), timeout=10.0)
    except sqlite3.Error as error:
        raise StartupError(f"cannot open {db}: {error}; pass another --db") from error
    try:
        saver = AsyncSqliteSaver(conn)
        try:
            await conn.execute("PRAGMA busy_timeout = 10000")
            # With WAL, NORMAL keeps every commit through a killed process (what we promise);
            # only a power cut can lose the last ones. FULL costs an fsync per checkpoint.
            await conn.execute("PRAGMA synchronous = NORMAL")
            await saver.setup()
        except sqlite3.DatabaseError as error:
            raise StartupError(
                f"{db} is not a usable fsagent threads file ({error}); it was left untouched. "
                "Pass another --db"
            ) from error
        yield saver
    finally:
        await conn.close()


class _NoModel:
    """Stands in for the chat model in a graph that is only read or updated, never run."""

    def bind_tools(self, *args: Any, **kwargs: Any) -> _NoModel:
        return self

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this graph only reads threads; it has no model")


def reading_graph(checkpointer: AsyncSqliteSaver) -> Any:
    """The graph's shape without LM Studio or the MCP server, for commands that read or
    reset threads: the state's channels rebuild messages from stored deltas, and its node
    names tell which paused steps this version can resume."""
    return build_graph(_NoModel(), [], checkpointer)  # type: ignore[arg-type]


# --- the command line ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    from agent import build_parser, settings_from_args

    args = build_parser().parse_args(argv)
    settings = settings_from_args(args)
    try:
        if args.command:
            return run_command(args, settings)
        return asyncio.run(_run(settings))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as raised:
        error = first_leaf(raised)
        if isinstance(error, StartupError):
            print(f"fsagent: {error}", file=sys.stderr)
            return 2
        if type(error).__name__ == "ReplayMismatch":  # not imported unless --replay ran
            print(f"fsagent: replay mismatch at {error}", file=sys.stderr)
            return 4
        if isinstance(error, ThreadError):
            print(f"fsagent: {error}", file=sys.stderr)
            return 1
        if settings.verbose:
            raise
        from display import describe_error

        print(f"fsagent: {describe_error(error, settings.base_url)}", file=sys.stderr)
        return 1


def cli() -> None:
    """The `fsagent` command: `main`, then exit without the interpreter's teardown.

    When `main` returns, the thread file, the transcript and the server are closed already;
    tearing down the hundreds of modules langchain imports costs ~0.4 s on every run (a
    piped regression run pays it each time) and does nothing for the person.
    """
    import os

    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_command(args: Any, settings: Any) -> int:
    from agent import COMMANDS

    [command] = [command for command in COMMANDS if command.name == args.command]
    return int(command.load("run")(args, settings))


def first_leaf(error: BaseException) -> BaseException:
    """The MCP client runs in task groups, which wrap what was raised in ExceptionGroups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def _run(settings: Any) -> int:
    import display
    from threads import open_store

    async with open_store(settings.db) as store, store.hold(settings.thread):
        if not settings.read_only:
            # Before LM Studio and the tools: a thread that cannot go on is the news.
            await check_resumable(settings.db, settings.thread)
        async with open_agent(settings, store) as (app, tools, policy):
            return await display.run_session(app, settings, tools, store, policy)


async def check_resumable(db: Path, thread: str) -> None:
    """Refuse, loudly, a thread paused where this version cannot resume it."""
    from threads import cannot_resume_message, view_thread

    async with open_checkpointer(db) as saver:
        view = await view_thread(reading_graph(saver), thread)
    if view is not None and view.problem:
        raise StartupError(cannot_resume_message(view))


@asynccontextmanager
async def open_agent(
    settings: Any, store: Store
) -> AsyncIterator[tuple[Any, list[BaseTool], Policy]]:
    """Everything a run needs: the rules, the model, our MCP server's tools, and the graph on
    the thread file, whose write calls go through `store`'s ledger."""
    from agent import check_roots, open_tools
    from policy import load_policy

    roots = check_roots(settings.roots)
    # Rules are read once, before anything starts: a bad file stops fsagent here.
    policy = load_policy(settings.policy, roots)
    # Ask LM Studio for its models while our server starts: both are waits, neither needs
    # the other.
    model_ready = asyncio.ensure_future(load_model(settings))
    try:
        async with open_tools(
            roots, read_only=settings.read_only, verbose=settings.verbose
        ) as tools:
            model = await model_ready
            async with open_checkpointer(settings.db) as saver:
                if settings.read_only:
                    from agent import build_read_only_agent

                    app = build_read_only_agent(model(), tools, saver, ReadOnlyState)
                else:
                    from audit import AuditLog

                    audit = AuditLog(saver)
                    await audit.create_table()
                    app = build_graph(
                        model,
                        tools,
                        saver,
                        policy=policy,
                        mode=settings.approve,
                        audit=audit,
                        ledger=store,
                    )
                yield app, tools, policy
    finally:
        model_ready.cancel()


async def load_model(settings: Any) -> Callable[[], BaseChatModel]:
    """The chat model, as a function that builds it at the first prompt.

    LM Studio is checked reachable now rather than at the first prompt; the client itself
    (langchain_openai imports all of the openai SDK) is imported at the first prompt, or on a
    terminal in the background while the person types. Under --replay the model is a
    cassette's and touches no network.
    """
    import functools

    from agent import first_listed_model, make_chat_model

    if settings.replay:
        from cassette import ReplayChatModel, load_cassette

        name, steps = load_cassette(settings.replay)
        replay = ReplayChatModel(steps=steps, model_name=name)
        return lambda: replay
    listed = await first_listed_model(settings.base_url)
    name = settings.model or listed
    if sys.stdin.isatty():
        # A person reads the banner and types; a pipe's first line is there at once, and a
        # `quit` would only wait for the import to finish.
        import_in_background("langchain_openai")

    @functools.cache
    def chat_model() -> BaseChatModel:
        callbacks = None
        if settings.record:
            from cassette import Recorder

            callbacks = [Recorder(settings.record, name)]
        return make_chat_model(settings.base_url, name, callbacks)

    return chat_model


def import_in_background(module: str) -> None:
    """Import a module on a thread; a later import of it waits for this one to finish."""
    import importlib
    import threading

    threading.Thread(target=importlib.import_module, args=(module,), daemon=True).start()


if __name__ == "__main__":
    # Run the importable module's main, not this __main__ copy: LangGraph resolves the state
    # schemas' annotations through their module, which must be `agent_graph`.
    from agent_graph import cli

    cli()
