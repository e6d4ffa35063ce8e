"""A thread, as a front-end drives it: start a turn, stream its events, pause for approval,
resume with decisions, close a run that was cut off, the thread's grants, and undo.

A front-end iterates a run (`turn`, `resume`, `finish_cut_off_run`, `compact`) and shows
its events; the last event of a run that paused is `Paused`. A run that fails yields `Failed`
and leaves the thread consistent. A run the front-end cancels (Ctrl-C, a client gone,
SIGTERM) raises CancelledError out of the iteration; the front-end then calls
`close_cut_off_run`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from core.approval.approval import CUT_CALL, ApprovalRecord, describe_grant, new_id
from core.approval.policy import Grant
from core.approval.questions import Pause
from core.changes.binding import Bound, Preview, bound_edit, bound_expect, shown
from core.changes.intraline import shown_lines
from core.changes.marks import mark
from core.changes.plans import CallPlan, expect_of, plan_of
from core.changes.preview import preview, undo_note, whole_preview
from core.context.constrained import CONSTRAINED_KEY
from core.context.context import ANSWER_TEXT, COMPACTED, NOTICE, ContextKeeper
from core.context.replies import CUT_KEY, REASONING_KEY, cut_note
from core.context.summary import Summary
from core.context.text_calls import TEXT_CALL_KEY, ReplyStream, Shown
from core.error_lines import describe_error
from core.errors import ContextTooSmall, ReplayMismatch, first_leaf
from core.threads import events
from core.threads.messages import content_text
from core.threads.threads import (
    PERSON_UPDATE,
    ThreadView,
    approval_among,
    close_run,
    pending_approval,
    run_config,
    view_thread,
)
from core.tools.tool_groups import ASK_PERSON, WRITE_TOOLS
from core.undo import (
    NOTE_PREFIX,
    Outcome,
    UndoError,
    UndoPlan,
    begin,
    model_note,
    plan_undo,
    run_steps,
)
from store.base import Store, UndoRun
from store.errors import failure_of


class ThreadSession:
    """One thread of one graph, held open by one front-end."""

    def __init__(
        self,
        app: CompiledStateGraph[Any, Any, Any, Any],
        thread: str,
        store: Store,
        *,
        base_url: str,
        tools: list[BaseTool] | None = None,
        context: ContextKeeper | None = None,
        verbose: bool = False,
    ) -> None:
        self.app = app
        self.thread = thread
        self.store = store
        self.base_url = base_url
        self.tools = {tool.name: tool for tool in tools or []}
        self.context = context
        self.verbose = verbose
        self.config = run_config(thread)
        self.paused_on: Pause | None = None  # the approval or question it stopped at
        self._call_names: dict[str, str] = {}
        # Per node, the reply streaming now: reasoning told apart, a call written as text held.
        self._streams: dict[str, ReplyStream] = {}
        # A reply of this model came with no think tag at all: later replies stream at once
        # (until then, text that might be reasoning closed by a bare `</think>` is held).
        self._plain_model = False
        # Set by a front-end that no one watches as it streams (a pipe): every reply that
        # does not open with <think> is held until it is known, so what it writes is what
        # the thread stores, even if a model known to be plain closes a think block after all.
        self.hold_until_known = False
        self._compactions_shown = 0  # the count of the last summary reported

    # -- reading the thread ----------------------------------------------------------------------

    async def view(self) -> ThreadView | None:
        return await view_thread(self.app, self.thread)

    async def pending(self) -> Pause | None:
        """The approval or question the thread waits on, if any: what a front-end asks
        about."""
        return pending_approval(await self.app.aget_state(self.config))

    async def preview(self, call: Mapping[str, Any]) -> Preview:
        """What a pending write call would change, worked out without changing anything,
        whether it could be undone when it could not, and the binding of what it shows
        (core.changes.binding): an approval of it carries that, never a cache."""
        # The plan first: a file changed between it and the diff is refused at the write,
        # never written over unseen.
        plan = await plan_of(call, self.tools)
        drawn = mark(await preview(call, self.tools, plan))
        note = await undo_note(call, self.tools, await self.store.undo_bytes(self.thread))
        return shown(self.thread, call, plan, drawn.lines + note, drawn.flags)

    async def whole_preview(self, call: Mapping[str, Any]) -> Preview:
        """Every line of what `call` would change (a reviewer pages through a big diff), a
        changed long line by its changes, with the binding of what it shows."""
        plan = await plan_of(call, self.tools)
        drawn = mark(shown_lines(await whole_preview(call, self.tools, plan)))
        return shown(self.thread, call, plan, drawn.lines, drawn.flags)

    async def bind(self, decisions: Mapping[str, Any] | Bound) -> Bound:
        """The resume value with each approval and edit bound to the preview it answers: the
        expect its preview_id stands for (core.changes.binding; Unbound without one, Foreign
        for another call's, Stale when what is there now is not what it showed); an edit
        runs with the state its own arguments find now, once its preview is bound. Never
        from anything kept in this process."""
        if isinstance(decisions, Bound):
            return decisions
        given = decisions.get("decisions")
        if not isinstance(given, dict):
            return Bound(dict(decisions))  # answers to a question: nothing to bind
        pending = await self.pending()
        calls = {c["id"]: c for c in (pending["calls"] if pending else [])}
        bound = {}
        for call_id, decision in given.items():
            decision = dict(decision) if isinstance(decision, dict) else decision
            call = calls.get(call_id)
            if isinstance(decision, dict) and decision.get("type") == "edit":
                await self.bind_edit(decision, call)
            elif (
                isinstance(decision, dict)
                and call is not None
                and decision.get("type") == "approve"
            ):
                expect = await bound_expect(self.thread, call, decision, self.tools)
                decision.pop("expect", None)
                if expect is not None:
                    decision["expect"] = expect
            bound[call_id] = decision
        return Bound({**decisions, "decisions": bound})

    async def bind_edit(self, decision: dict[str, Any], call: Mapping[str, Any] | None) -> None:
        """An edit gets the server's plan of its own arguments (`plan`), which the graph
        judges it on (agent_graph.approve), never the original call's plan nor its text, and
        the state that plan reads (`expect`), once the preview it was decided on is bound
        (core.changes.binding.bound_edit): both always made here, never taken from the
        decision."""
        decision.pop("expect", None)
        if call is None:
            decision["plan"] = CallPlan(error="no such call").kept()
            return
        made = await bound_edit(
            self.thread, call, decision.get("args"), decision.get("preview_id"), self.tools
        )
        decision["plan"] = made.kept()
        if made.paths is not None:
            decision["expect"] = expect_of(made.paths)

    # -- runs ------------------------------------------------------------------------------------

    def turn(self, text: str) -> AsyncIterator[events.Event]:
        """A new request from the person. One that could not fit the model's context even
        alone is refused before anything is stored or sent."""
        too_big = self.context.check_new_request(text) if self.context else None
        if too_big is not None:
            return _refused(too_big)
        return self.run({"messages": [HumanMessage(content=text, id=new_id("human"))]})

    async def resume(self, bound: Bound) -> AsyncIterator[events.Event]:
        """Answer what the thread waits on and run on: an approval with the contract's
        `{"decisions": {call_id: ...}}`, a question with `{"answers": {call_id: text}}`
        (see core.approval.questions). Only a Bound value, made by `bind` (which raises
        core.changes.binding.BindingError before anything runs): no way into a resume takes
        an approval that is not bound to the preview it answers."""
        async for event in self.run(Command(resume=bound.value)):
            yield event

    def finish_cut_off_run(self) -> AsyncIterator[events.Event]:
        """Run on from where a crash stopped the last run. The ledger keeps every write that
        already ran (or may have) from running again."""
        return self.run(None)

    async def run(self, graph_input: Any) -> AsyncIterator[events.Event]:
        self.paused_on = None
        # A reply a Ctrl-C or an error cut off never reached its node's end, so its stream was
        # never flushed: what it held back (text that might have been reasoning) would be
        # shown again at the start of this run's first reply, which the model never said.
        self._streams.clear()
        try:
            async for mode, chunk in self.app.astream(
                graph_input,
                self.config,
                stream_mode=["updates", "messages", "custom"],
                durability="sync",
            ):
                for event in self._events(mode, chunk):
                    yield event
        except Exception as error:
            failure = failure_of(first_leaf(error), self.store.location)
            if failure is not None:
                # The thread file itself failed (a full disk): nothing more can be kept, so
                # the session ends with the store's one line; what it committed stays whole.
                raise failure from error
            if self.verbose or isinstance(error, ReplayMismatch):
                yield events.Failed(str(error), fatal=True)
                raise  # the front-end shows the traceback, or ends the replay (exit 4)
            yield events.Failed(describe_error(error, self.base_url))
            for result in await self.close_cut_off_run("the run was cut off by an error"):
                yield result
            return
        if self.paused_on is not None:
            yield events.Paused(self.paused_on)

    async def compact(self) -> AsyncIterator[events.Event]:
        """Summarise the older turns now (`/compact`): the summary is stored in the thread
        and sent in their place from the next request on. Only for a thread that waits on
        nothing; yields one Compacted event (summarised=0 when there was nothing to do)."""
        if self.context is None:
            return
        snapshot = await self.app.aget_state(self.config)
        values = snapshot.values or {}
        messages = list(values.get("messages") or [])
        summary = Summary.from_state(values.get("summary"))
        try:
            made = await self.context.compact(messages, summary, why="requested", target=0)
        except ContextTooSmall as error:
            yield events.Failed(str(error))
            return
        except Exception as error:
            if self.verbose or isinstance(error, ReplayMismatch):
                yield events.Failed(str(error), fatal=True)
                raise
            yield events.Failed(describe_error(error, self.base_url))
            return
        if made is None:
            covered = summary.covers if summary else 0
            yield events.Compacted(0, covered, len(messages) - covered, 0, 0, self._ctx(), "")
            return
        # Recorded as an update by a node that leads to END, so it schedules nothing.
        await self.app.aupdate_state(
            self.config, {"summary": made.as_state()}, as_node=PERSON_UPDATE
        )
        yield self._compacted(made)

    async def close_cut_off_run(self, why: str) -> list[events.ToolResult]:
        """Store an answer for every call a cut-off run left without one, so the thread is
        idle and consistent now rather than repaired only in the next request."""
        self.paused_on = None
        answers = await close_run(self.app, self.store, self.thread, why)
        return [self._result(answer) for answer in answers]

    # -- grants ------------------------------------------------------------------------------------

    async def grants(self) -> list[Grant]:
        snapshot = await self.app.aget_state(self.config)
        return list((snapshot.values or {}).get("grants") or [])

    async def revoke(self, number: int) -> str | None:
        """Remove grant `number` (from 1); its description, or None if there is none."""
        grants = await self.grants()
        if not 1 <= number <= len(grants):
            return None
        gone = grants.pop(number - 1)
        # Recorded as an update by a node that leads to END, so it schedules nothing.
        await self.app.aupdate_state(self.config, {"grants": grants}, as_node=PERSON_UPDATE)
        return describe_grant(gone)

    # -- undo ------------------------------------------------------------------------------------

    async def plan_undo(
        self, *, call: str | None = None, turn: int | None = None, force: bool = False
    ) -> UndoPlan:
        """What undoing the last turn's writes (or a call's, or a turn's) would restore,
        checked against the files now; nothing runs. Raises core.undo.NothingToUndo."""
        if not self.can_write:
            raise UndoError("this session has no write tools (--read-only); undo elsewhere")
        return await plan_undo(
            self.store, self.thread, self.tools, call=call, turn=turn, force=force
        )

    def undo(self, plan: UndoPlan, by: str) -> AsyncIterator[events.Event]:
        """Run a plan the person approved (`by`: person or piped): each step a write of
        its own, through the ledger and the audit; the model is told what was undone."""

        async def run() -> AsyncIterator[events.Event]:
            async for event in self._run_undo(await begin(self.store, self.thread, plan, by)):
                yield event

        return run()

    @property
    def can_write(self) -> bool:
        """Whether the server's write tools are here (not with --read-only)."""
        return set(self.tools) >= WRITE_TOOLS

    async def unfinished_undo(self) -> UndoRun | None:
        """An undo the person approved that a crash cut off; `finish_undo` finishes it.
        None in a session without write tools, which could not finish it."""
        if not self.can_write:
            return None
        return await self.store.unfinished_undo(self.thread)

    def finish_undo(self, run: UndoRun) -> AsyncIterator[events.Event]:
        """Finish a cut-off undo: steps that ran (or may have) are not run again."""
        return self._run_undo(run)

    async def _run_undo(self, run: UndoRun) -> AsyncIterator[events.Event]:
        outcome = Outcome()
        async for step in run_steps(self.store, self.tools, run, outcome):
            call_id, tool = step.call["id"], step.call["name"]
            yield events.ToolCall(call_id, tool, step.call["args"])
            yield events.ToolResult(call_id, tool, step.text, step.failed)
        note = model_note(run, outcome)
        # The model's picture of the files must stay true: it reads this with the history.
        # A fixed id, so a finish after a crash adds it once.
        told = HumanMessage(content=note, id=NOTE_PREFIX + run.undo_id)
        await self.app.aupdate_state(self.config, {"messages": [told]}, as_node=PERSON_UPDATE)
        await self.store.finish_undo(self.thread, run.undo_id)
        yield events.Undone(note, outcome.complete)

    # -- from graph updates to events --------------------------------------------------------------

    def _events(self, mode: str, chunk: Any) -> Iterator[events.Event]:
        if mode == "custom":
            if isinstance(chunk, dict):
                yield from self._new_summary(chunk.get(COMPACTED))
                if isinstance(chunk.get(NOTICE), str):
                    yield events.Notice(chunk[NOTICE])
                yield from self._constrained(chunk.get(ANSWER_TEXT))
            return
        if mode == "messages":
            message, meta = chunk
            node = str(meta.get("langgraph_node", ""))
            if _is_model_reply(message, node):
                yield from self._streamed(node, message)
            return
        for node, update in chunk.items():
            if node == "__interrupt__":
                self.paused_on = approval_among(update)
            else:
                yield from self._flush(node, update)
                yield from self._step(node, update)

    def _streamed(self, node: str, chunk: AIMessageChunk) -> Iterator[events.Event]:
        """A piece of a reply: its reasoning and its answer, told apart as they arrive."""
        thought = chunk.additional_kwargs.get(REASONING_KEY)
        if isinstance(thought, str) and thought:
            yield events.Reasoning(thought)
        if isinstance(chunk.content, str) and chunk.content:
            stream = self._streams.get(node)
            if stream is None:
                hold = self.context.text_calls if self.context is not None else False
                plain = self._plain_model and not self.hold_until_known
                stream = self._streams[node] = ReplyStream(plain=plain, hold_calls=hold)
            yield from _pieces(stream.feed(chunk.content))

    def _constrained(self, said: Any) -> Iterator[events.Event]:
        """A piece of a reply written to a schema (core.context.constrained): the text of its
        answer, which the keeper read out of the JSON as it came, and any reasoning."""
        if not isinstance(said, dict):
            return
        if isinstance(said.get("reasoning"), str) and said["reasoning"]:
            yield events.Reasoning(said["reasoning"])
        text, node = said.get("text"), str(said.get("node", ""))
        if isinstance(text, str) and text:
            stream = self._streams.get(node)
            if stream is None:  # JSON is neither thinking nor a call written as text
                stream = self._streams[node] = ReplyStream(plain=True, hold_calls=False)
            yield from _pieces(stream.feed(text))

    def _flush(self, node: str, update: Any = None) -> Iterator[events.Event]:
        stream = self._streams.pop(node, None)
        if stream is None:
            return
        messages = update.get("messages") if isinstance(update, dict) else None
        read = any(
            isinstance(m, AIMessage) and TEXT_CALL_KEY in m.additional_kwargs
            for m in messages or []
        )
        # A reply written to a schema says nothing of the think tags either.
        read = read or any(
            isinstance(m, AIMessage) and CONSTRAINED_KEY in m.additional_kwargs
            for m in messages or []
        )
        yield from _pieces(stream.finish(read_as_calls=read))
        if stream.splitter.saw_bare_close:
            self._plain_model = False
        elif stream.splitter.saw_plain and not read:
            # A call written as text is not an answer: it says nothing of the think tags.
            self._plain_model = True

    def _ctx(self) -> int | None:
        budget = self.context.budget if self.context else None
        return budget.context_length if budget else None

    def _new_summary(self, value: Any) -> Iterator[events.Event]:
        """A compaction, reported once: as it is made, or when its step ends."""
        made = Summary.from_state(value)
        if made is not None and made.count != self._compactions_shown:
            self._compactions_shown = made.count
            yield self._compacted(made)

    def _compacted(self, summary: Summary) -> events.Compacted:
        return events.Compacted(
            summarised=summary.summarised,
            covered=summary.covers,
            kept=summary.kept,
            tokens_before=summary.before,
            tokens_after=summary.after,
            context_length=self._ctx(),
            why=summary.why,
        )

    def _step(self, node: str, update: Any) -> Iterator[events.Event]:
        """What one step added: a compaction, the route, decisions made without a person,
        tool calls, results and the model's text."""
        if not isinstance(update, dict):
            return
        yield from self._new_summary(update.get("summary"))
        if node == "router" and "route" in update:
            yield events.Route(update["route"])
        if node in ("judge", "approve", "ask"):
            records = update.get("approvals") or {}
            if node != "ask":  # they carry the ask step's records on; shown there already
                records = {k: r for k, r in records.items() if r.get("tool") != ASK_PERSON}
            if node == "approve":  # judge showed its own; approve adds only its re-checks
                records = {k: r for k, r in records.items() if r.get("recheck")}
            yield from automatic_decisions(records)
        for message in update.get("messages") or []:
            if isinstance(message, AIMessage):
                yield from self._model_message(message)
            elif isinstance(message, ToolMessage):
                yield self._result(message)

    def _model_message(self, message: AIMessage) -> Iterator[events.Event]:
        text = content_text(message.content)
        cut = message.additional_kwargs.get(CUT_KEY)
        if cut is not None:  # the note is for the model; the person gets ReplyCut
            text = text.removesuffix(cut_note(int(cut))).rstrip()
        if text:
            yield events.Answer(text)
        if cut is not None:
            yield events.ReplyCut(int(cut))
        from_text = message.additional_kwargs.get(TEXT_CALL_KEY)
        for call in message.tool_calls:
            call_id = call["id"] or ""  # langchain's id is optional; a model's call has one
            self._call_names[call_id] = call["name"]
            yield events.ToolCall(call_id, call["name"], call["args"], from_text=from_text)
        for invalid in message.invalid_tool_calls:
            name = invalid.get("name") or "?"
            call_id = invalid.get("id") or ""
            self._call_names[call_id] = name
            error = CUT_CALL if invalid.get("error") == CUT_CALL else "arguments are not valid JSON"
            yield events.ToolCall(call_id, name, None, error=error)

    def _result(self, message: ToolMessage) -> events.ToolResult:
        return events.ToolResult(
            call_id=message.tool_call_id,
            tool=self._call_names.get(message.tool_call_id, "?"),
            text=content_text(message.content),
            failed=message.status == "error",
        )


def automatic_decisions(approvals: Mapping[str, ApprovalRecord]) -> Iterator[events.Decision]:
    """Decisions a rule, the mode or a grant made: reported, so nothing passes unseen."""
    for call_id, record in approvals.items():
        if record.get("by") not in ("rule", "mode", "grant"):
            continue
        yield events.Decision(
            call_id=call_id,
            tool=str(record.get("tool")),
            decision=str(record.get("decision")),
            reason=str(record.get("reason", "")),
            by=str(record.get("by")),
        )


def _is_model_reply(message: Any, node: str) -> bool:
    """Pieces of a model reply as they stream: not the router's one word, and not whole
    messages (LangGraph also emits those when a node returns them). Summaries are asked for
    with LangGraph's `nostream` tag, so they never arrive here."""
    return isinstance(message, AIMessageChunk) and node != "router"


LATE_THINKING = (
    "⚠ the model closed a think block it had not opened: the text above was its thinking, "
    "kept apart from its answer, which follows"
)


def _pieces(shown: Shown) -> Iterator[events.Event]:
    if shown.take_back:
        yield events.Settled()
    if shown.late_close:
        yield events.Notice(LATE_THINKING)
    if shown.reasoning:
        yield events.Reasoning(shown.reasoning)
    if shown.answer:
        yield events.TextDelta(shown.answer)
    if shown.unsure:
        yield events.Unsure(shown.unsure)


async def _refused(line: str) -> AsyncIterator[events.Event]:
    yield events.Failed(line)
