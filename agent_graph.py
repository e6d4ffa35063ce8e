"""The approval graph: its state, its nodes and edges, and `build_graph`.

router ─► agent_<route> ─► after_agent ─┬─► END           (no tool calls)
                                         ├─► tools         (read calls only)
                                         ├─► ask           (any ask_person call)
                                         └─► approve       (any write call)
ask ── interrupt(question payload) ── Command(goto="judge" if writes else "tools")
judge ── the server's plan of each write; rules, mode, grants decide what they can
      ─► approve (someone must decide) or tools
approve ── interrupt(payload) for the rest; the decisions checked again ── Command(goto="tools")
tools ─► agent_<route>       (writes the audit rows, then runs what was approved)

Every model request goes through core.context.context: the same tools each time, the thread's
summary in place of older turns, compacted when it would not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

# State schemas are read at run time by LangGraph, so their types must be importable here.
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from core.approval import approval, questions
from core.approval.approval import ApprovalRecord, ToolCall
from core.approval.policy import Policy, other_grant
from core.changes import plans
from core.changes.other_calls import CANNOT_UNDO
from core.changes.undo_capture import capture
from core.context.context import (
    ContextKeeper,
    Sent,
    announce_compaction,
    announce_notice,
    answer_streamer,
    with_route,
)
from core.context.replies import mark_cut, was_cut
from core.context.summary import Summary
from core.servers import gate
from core.servers.routes import server_routes
from core.threads.audit import rows_for
from core.threads.ledger import run_write_once
from core.threads.messages import append_messages, content_text, last_ai_message
from core.threads.threads import MAX_MODEL_CALLS_PER_TURN, PERSON_UPDATE
from core.tools.merged_tools import server_calls
from core.tools.tool_groups import ASK_PERSON, ROUTES, WRITE_TOOLS, needs_approval, other_server
from core.tools.tool_schemas import offered_tools
from core.tools.tools import call_tool
from store.base import Store

# --- state ---------------------------------------------------------------------------------


class AgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(append_messages)]
    route: str
    model_calls: int
    # call id -> approval record, for the batch under review; `judge` writes what rules, mode
    # and grants decide, `approve` what the person does.
    approvals: dict[str, ApprovalRecord]
    # call id -> the server's plan of a write call, or why there is none, as kept
    # (core.changes.plans.CallPlan.kept): the paths it acts on, as the server reads them, and
    # their state. Written by `judge`, so a resume judges the same.
    plans: dict[str, Any]
    # The person's "a" answers: a tool and a folder each. Written by `approve` when granted,
    # and by `person_update` when revoked; they end with the thread.
    grants: list[dict[str, str]]
    # The thread's summary (core.context.context.Summary as a dict): what requests send in place of
    # the older turns. Written only when a request is compacted.
    summary: dict[str, Any]
    # The person's requests so far, counted by the router: write calls are kept for undo by
    # the turn they ran in (`fsagent undo NAME --turn N`).
    turn: int


def parse_route(text: str, routes: Sequence[str] = ROUTES) -> str:
    """The first route name in the model's answer; anything else is `general`."""
    for word in text.lower().replace("*", " ").replace("`", " ").split():
        word = word.strip(".,:;!\"'()[]{}")
        if word in routes:
            return word
    return "general"


# --- the graph -------------------------------------------------------------------------------


def build_graph(
    model: Callable[[], BaseChatModel],
    tools: list[BaseTool],
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    policy: Policy | None = None,
    mode: str = "ask",
    store: Store | None = None,
    context: ContextKeeper | None = None,
    max_model_calls: int = MAX_MODEL_CALLS_PER_TURN,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The approval graph. With a `store`, every decision is audited there, every write
    call runs at most once per thread, however often the tools step itself runs again (a
    resume after a crash), and what each write replaces is kept there first, for undo.
    `context` builds and sends the model requests; without one, the requests offer every
    tool and nothing is compacted."""
    policy = policy or Policy(roots=(Path.cwd().resolve(),))  # no rules: every write asks
    tools = questions.with_ask_person(tools)  # the model may always ask the person
    # Our filesystem groups, and a route of its own for each other server (core.servers.routes).
    routes = server_routes(tools)
    context = context or ContextKeeper(model, offered_tools(tools), budget=None)
    context.routes = routes  # the router's question and a small context's offers name them
    names = routes.names
    tools_by_name = {tool.name: tool for tool in tools}
    first_root = str(policy.roots[0])  # relative paths in undo records are read against it
    schemas = {tool.name: approval.tool_schema(tool) for tool in tools}
    # Other servers' tools: which are proven read-only (core.servers.gate), and their facts.
    others = gate.others(tools)
    read_only = gate.read_only_names(tools)

    async def router(state: AgentState) -> dict[str, Any]:
        messages = state.get("messages", [])
        # The router's request offers the tools the last turn's agent requests offered, which
        # extend it (on a small context, the tools of every route the thread has taken).
        sent = await context.send(
            messages,
            _summary(state),
            route_question=True,
            route=state.get("route", "general"),
            on_compacted=announce_compaction,
            on_notice=announce_notice,
        )
        # The reply's reasoning was set apart already: only its answer names the route.
        route = parse_route(content_text(sent.response.content), names)
        update: dict[str, Any] = {
            "route": route,
            "model_calls": 0,
            "approvals": {},
            "turn": state.get("turn", 0) + 1,
        }
        latest = messages[-1] if messages else None
        if isinstance(latest, HumanMessage):
            # Stored with the message, so every later request sends it with the same note,
            # and a small context keeps offering the route's tools (ContextKeeper.offered).
            update["messages"] = [with_route(latest, route)]
        return update | _compacted(sent)

    def make_agent(group: str) -> Any:
        async def agent(state: AgentState) -> dict[str, Any]:
            calls = state.get("model_calls", 0)
            if calls >= max_model_calls:
                return {"messages": [_step_limit_message(max_model_calls)]}
            sent = await context.send(
                state.get("messages", []),
                _summary(state),
                route=group,
                on_compacted=announce_compaction,
                on_notice=announce_notice,
                on_text=answer_streamer(f"agent_{group}"),
            )
            response = sent.response
            if was_cut(response):
                response = mark_cut(response, context.max_tokens)
            response = server_calls(response)  # a folded form is its server tool from here on
            _give_ids(response)
            return {"messages": [response], "model_calls": calls + 1} | _compacted(sent)

        agent.__name__ = f"agent_{group}"
        return agent

    def after_agent(state: AgentState) -> str:
        # Decided by tool name, never by route: no group can reach a write without `approve`.
        message = last_ai_message(state.get("messages", []))
        if message is None or not (message.tool_calls or message.invalid_tool_calls):
            return END
        if questions.questions_to_ask(message, schemas):
            return "ask"
        if approval.writes_to_review(message, schemas, state.get("route"), read_only):
            return "judge"
        return "tools"

    def ask(state: AgentState) -> Command[str]:
        # Like approve: pure before interrupt(), so running again on resume changes nothing.
        # A question is not a write: --approve yes does not answer it, --approve no means
        # no one is asked.
        message = last_ai_message(state.get("messages", []))
        assert message is not None, "ask is only reached after a model message"
        calls = questions.questions_to_ask(message, schemas)
        if mode == "no":
            answers = questions.unanswered_by_mode(calls)
        else:
            payload = questions.question_payload(state.get("route", "general"), calls)
            answers = questions.record_answers(interrupt(payload), calls)
        writes = approval.writes_to_review(message, schemas, state.get("route"), read_only)
        return Command(goto="judge" if writes else "tools", update={"approvals": answers})

    async def judge_node(state: AgentState) -> Command[str]:
        return await judge(state, schemas=schemas, policy=policy, mode=mode, tools=tools_by_name)

    def approve_node(state: AgentState) -> Command[str]:
        return approve(state, schemas=schemas, policy=policy, mode=mode, others=others)

    async def tools_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        thread = str(config["configurable"]["thread_id"])
        return await run_tools(
            state, thread, tools=tools_by_name, schemas=schemas, store=store, root=first_root
        )

    def back_to_agent(state: AgentState) -> str:
        # A route of a server no longer configured (a thread paused on it, resumed in a run
        # without it) goes on as general: its calls are judged by name all the same.
        route = state.get("route", "general")
        return f"agent_{route if route in names else 'general'}"

    graph = StateGraph(AgentState)
    graph.add_node("router", router)
    for group in names:
        graph.add_node(f"agent_{group}", make_agent(group))
        graph.add_conditional_edges(f"agent_{group}", after_agent, ["ask", "judge", "tools", END])
    graph.add_node("ask", ask, destinations=("judge", "tools"))
    graph.add_node("judge", judge_node, destinations=("approve", "tools"))
    graph.add_node("approve", approve_node, destinations=("tools",))
    graph.add_node("tools", tools_node)
    graph.add_node(PERSON_UPDATE, lambda state: {})
    graph.add_edge(PERSON_UPDATE, END)
    graph.add_edge(START, "router")
    graph.add_conditional_edges(
        "router", lambda state: f"agent_{state['route']}", [f"agent_{g}" for g in names]
    )
    graph.add_conditional_edges("tools", back_to_agent, [f"agent_{g}" for g in names])
    return graph.compile(checkpointer=checkpointer)


# --- the judge, approve and tools steps, as plain functions of their inputs ---------------


def decide_now(
    call: ToolCall,
    plan: plans.CallPlan,
    grants: list[Any],
    *,
    policy: Policy,
    mode: str,
    asked: bool = False,
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> ApprovalRecord | None:
    """What the rules, the mode and the grants decide for a call, on the paths of its plan
    (the server's reading of them, raw), and only on those: a call without a plan is never
    judged on its text. None when a person must decide. `asked`: the person has decided
    the call already (see approval.decide_without_person). Another server's call is
    judged by its server and tool (approval.decide_other); `others` holds its pin."""
    if other_server(call["name"]) is not None:
        pin = (others or {}).get(call["name"], {}).get("pin")
        return approval.decide_other(call, policy, mode, grants, pin)
    read = plans.judged(call, plan, policy.roots)
    return approval.decide_without_person(
        call,
        policy,
        mode,
        grants,
        read.places,
        refused=read.refused,
        unplanned=read.unplanned,
        asked=asked,
    )


async def judge(
    state: AgentState,
    *,
    schemas: dict[str, Any],
    policy: Policy,
    mode: str,
    tools: dict[str, BaseTool],
) -> Command[str]:
    """The judge step: the server's plan of each write call, and what the rules, the mode and
    the grants decide on it, recorded in state before anyone is asked: a resume (a day later,
    in another process, with other rules) starts from what was decided and shown here."""
    message = last_ai_message(state.get("messages", []))
    assert message is not None, "judge is only reached after a model message"
    grants = list(state.get("grants") or [])
    others = gate.others(tools.values())
    read_only = gate.read_only_names(tools.values())
    calls = approval.writes_to_review(message, schemas, state.get("route"), read_only)
    approvals = dict(state.get("approvals") or {})  # the answers to questions, if any
    planned: dict[str, Any] = {}
    for call in calls:
        if other_server(call["name"]) is not None:
            # Another server's call has no plan of ours: its arguments are what it does.
            plan = plans.CallPlan(error=OTHER_SERVER_PLAN)
        else:
            plan = await plans.plan_call(call, tools)
            planned[call["id"]] = plan.kept()
        record = decide_now(call, plan, grants, policy=policy, mode=mode, others=others)
        if record is not None:
            approvals[call["id"]] = record
    # Nothing for the person (every call decided by rules, mode or grants): straight to
    # `tools`, one step and one checkpoint fewer, as before the plan was asked.
    waits = any(call["id"] not in approvals for call in calls)
    update = {"approvals": approvals, "plans": planned}
    return Command(goto="approve" if waits else "tools", update=update)


OTHER_SERVER_PLAN = "another server's call: its arguments are what it does"


def approve(
    state: AgentState,
    *,
    schemas: dict[str, Any],
    policy: Policy,
    mode: str,
    ask: Callable[[Any], Any] = interrupt,
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> Command[str]:
    """The approve step: the calls `judge` left to a person go to them in one `ask`
    (LangGraph's interrupt in the graph), whose answer is the resume value; then every
    decision is checked against the rules in force now, which may only make it stricter.
    Always on to `tools`."""
    # Runs again from the top on resume: nothing before interrupt() may have an effect.
    # What `judge` decided is read from state, never decided again here, so rules that
    # changed while the thread waited cannot turn the person's answer into another.
    message = last_ai_message(state.get("messages", []))
    assert message is not None, "approve is only reached after a model message"
    grants = list(state.get("grants") or [])
    others = others or {}
    read_only = frozenset(name for name, facts in others.items() if facts.get("read_only"))
    calls = approval.writes_to_review(message, schemas, state.get("route"), read_only)
    planned = state.get("plans") or {}
    approvals = dict(state.get("approvals") or {})
    for_person = [call for call in calls if call["id"] not in approvals]
    route = state.get("route", "general")
    unplanned = {
        call["id"]: plans.read_kept(planned.get(call["id"])).error
        for call in calls
        if other_server(call["name"]) is None
    }
    if for_person:
        said = {call["id"]: approval.policy_said(None) for call in for_person}
        payload = approval.approval_payload(route, for_person, said, unplanned)
        decided = approval.record_decisions(ask(payload), for_person, schemas)
        approvals |= decided
        grants += new_grants(policy, for_person, decided, grants, planned, others)
    # The rules, mode and grants in force now may only make a decision stricter; an
    # approval they gave that they would no longer give is asked of the person again.
    again = []
    for call in calls:
        record = approvals[call["id"]]
        checked = {**call, "args": record.get("args", call["args"])}
        # An edit is judged on its own plan (made when the person decided), never on the
        # original call's, and never on its text: one that could not be planned is refused.
        edited = checked["args"] != call["args"]
        plan = plans.read_kept(record.get("plan") if edited else planned.get(call["id"]))
        if edited and plan.paths is None and approval.is_approved(record):
            approvals[call["id"]] = approval.edit_unplanned(call, plan.error)
            continue
        asked = record.get("by") not in approval.AUTOMATIC
        now = decide_now(
            checked, plan, grants, policy=policy, mode=mode, asked=asked, others=others
        )
        kept = approval.recheck(record, now)
        if kept is None:
            again.append(call)
        else:
            approvals[call["id"]] = kept
    if again:
        said = {c["id"]: approval.policy_said(approvals[c["id"]]) for c in again}
        payload = approval.approval_payload(route, again, said, unplanned)
        approvals |= approval.record_decisions(ask(payload), again, schemas)
    # Always through `tools`: it records every decision in the audit log, answers each
    # call (rejections included) and runs the reads beside them.
    return Command(goto="tools", update={"approvals": approvals, "grants": grants})


def new_grants(
    policy: Policy,
    calls: list[ToolCall],
    decided: dict[str, Any],
    grants: list[dict[str, str]],
    planned: dict[str, Any],
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, str]]:
    added: list[dict[str, str]] = []
    for call in calls:
        if decided[call["id"]].get("decision") != "grant":
            continue
        grant: dict[str, str] | None
        if other_server(call["name"]) is not None:
            # Bound to the tool's definition as pinned now: a change voids it.
            pin = (others or {}).get(call["name"], {}).get("pin")
            grant = other_grant(call, str(pin)) if pin else None
            if grant is not None and grant not in grants + added:
                added.append(grant)
            continue
        read = plans.judged(call, plans.read_kept(planned.get(call["id"])), policy.roots)
        grant = policy.grant_for(call, read.places) if read.places is not None else None
        if grant is not None and grant not in grants + added:
            added.append(grant)
    return added


async def run_tools(
    state: AgentState,
    thread: str,
    *,
    tools: dict[str, BaseTool],
    schemas: dict[str, Any],
    store: Store | None,
    root: str,
) -> dict[str, Any]:
    """The tools step: the audit rows of the batch's decisions, then one answer for every
    call of the last model message: reads run, approved writes run (at most once per thread,
    with a `store`), the rest are answered without running."""
    message = last_ai_message(state.get("messages", []))
    assert message is not None, "tools is only reached after a model message"
    approvals = state.get("approvals") or {}
    read_only = gate.read_only_names(tools.values())
    if store is not None:
        await store.record_audit(rows_for(thread, message, approvals))
    results = []
    route = state.get("route")
    turn = state.get("turn", 0)
    # The judge's plans are as fresh as can be until a write runs, unless the batch waited
    # for a person (for days, perhaps): then the undo records ask the server again.
    planned = {} if approval.someone_decided(approvals) else state.get("plans") or {}
    for call in message.tool_calls:
        refusal = approval.answer_without_running(call, approvals, schemas, route, read_only)
        if refusal is None and call["name"] == ASK_PERSON:
            refusal = questions.answer_message(call, approvals.get(str(call["id"])))
        fresh = plans.read_kept(planned.get(str(call["id"]))).paths
        ran = refusal or await run_call(
            call, approvals, str(message.id), thread, turn, tools, store, root, fresh
        )
        if refusal is None and needs_approval(call["name"], read_only):
            planned = {}
        results.append(ran)
    results += [approval.answer_invalid_call(c) for c in message.invalid_tool_calls]
    return {"messages": results, "approvals": {}}


async def run_call(
    call: ToolCall,
    approvals: dict[str, ApprovalRecord],
    message_id: str,
    thread: str,
    turn: int,
    tools: dict[str, BaseTool],
    store: Store | None,
    root: str,
    fresh_plan: Any = None,
) -> Any:
    def run() -> Any:
        return _run_call(call, approvals, tools)

    if store is None or not needs_approval(call["name"], gate.read_only_names(tools.values())):
        return await run()
    args = _call_args(call, approvals)
    if other_server(call["name"]) is not None:
        # At most once, as ours. Its undo record says it cannot be undone, so `fsagent undo`
        # says so plainly (core/undo.py) rather than pass over it.

        async def cannot_undo() -> None:
            record = {"undoable": False, "why": CANNOT_UNDO}
            await store.keep_undo(
                thread, message_id, call["id"], turn, call["name"], args, record, 0
            )

        return await run_write_once(store, thread, message_id, call, args, run, cannot_undo)

    async def keep() -> None:
        used = await store.undo_bytes(thread)
        record, size = await capture(call["name"], args, tools, root, used, fresh_plan)
        await store.keep_undo(
            thread, message_id, call["id"], turn, call["name"], args, record, size
        )

    return await run_write_once(store, thread, message_id, call, args, run, keep)


def _summary(state: AgentState) -> Summary | None:
    return Summary.from_state(state.get("summary"))


def _compacted(sent: Sent) -> dict[str, Any]:
    """The state update that stores a summary the request was compacted with."""
    return {"summary": sent.compacted.as_state()} if sent.compacted else {}


def _give_ids(response: AIMessage) -> None:
    """Our own message id (servers reuse theirs) and an id for every unparseable call."""
    response.id = approval.new_id("ai")
    for invalid in response.invalid_tool_calls:
        invalid["id"] = invalid.get("id") or approval.new_id("call")


def _step_limit_message(limit: int) -> AIMessage:
    return AIMessage(
        content=f"Stopped: this request used {limit} model calls without finishing. "
        "Say how to go on, or ask for something smaller.",
        id=approval.new_id("ai"),
    )


def _call_args(call: ToolCall, approvals: dict[str, ApprovalRecord]) -> Any:
    """The arguments a call runs with: the person's, when they edited a write."""
    record = approvals.get(call["id"])
    if call["name"] not in WRITE_TOOLS or record is None or "args" not in record:
        return call["args"]
    return record["args"]


async def _run_call(
    call: ToolCall, approvals: dict[str, ApprovalRecord], tools_by_name: dict[str, BaseTool]
) -> Any:
    record = approvals.get(call["id"])
    args = _call_args(call, approvals)
    # An approved write carries what its preview showed; the server refuses it, changing
    # nothing, if that is no longer what is there.
    expect = record.get("expect") if record is not None else None
    sent = {**args, "expect": expect} if expect else args
    try:
        content, failed = await call_tool(tools_by_name[call["name"]], sent, str(call["id"]))
        text = content_text(content)
    except Exception as error:  # a broken pipe to the server must not lose the whole turn
        text, failed = f"Error: {call['name']} failed: {error}", True
    if record is not None and record.get("edited"):
        text = approval.edited_preamble(call, args) + text
    return approval.tool_message(call["id"], text, error=failed)
