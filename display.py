"""What the person sees of a session, and its loop: the banner, each step as it streams,
the approvals it pauses for (asked through review.py), and the run/resume of one thread."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from review import ANSWER_WORDS, PIPED_ANSWERS, NotAnAnswer, review, show_automatic_decisions
from terminal import Terminal, _clip, format_call, format_result

QUIT_WORDS = frozenset({"quit", "exit"})
PERSON_COMMANDS = ("/grants", "/revoke")  # at the prompt: the thread's grants


def describe_error(error: BaseException, base_url: str) -> str:
    """One line for an error the person can act on."""
    import openai

    from agent import unreachable_message

    if isinstance(error, openai.APIConnectionError | openai.APITimeoutError):
        return unreachable_message(base_url)
    if isinstance(error, openai.APIStatusError):
        detail = _clip(str(error.message), 200)
        return f"LM Studio at {base_url} answered {error.status_code}: {detail}"
    from langgraph.errors import GraphRecursionError

    if isinstance(error, GraphRecursionError):
        return "the request took too many steps and was stopped; ask for something smaller"
    return f"{type(error).__name__}: {_clip(str(error), 200)} (run with --verbose for details)"


# --- what a step shows -----------------------------------------------------------------------


def _is_model_text(message: Any, node: str) -> bool:
    """Tokens of a model reply as they stream: not the router's one word, and not whole
    messages (LangGraph also emits those when a node returns them)."""
    from langchain_core.messages import AIMessageChunk

    return (
        isinstance(message, AIMessageChunk)
        and node != "router"
        and isinstance(message.content, str)
        and bool(message.content)
    )


def pending_approval(snapshot: Any) -> dict[str, Any] | None:
    return approval_among(snapshot.interrupts)


def approval_among(interrupts: Any) -> dict[str, Any] | None:
    for interrupt in interrupts:
        if isinstance(interrupt.value, dict) and interrupt.value.get("kind") == "approval":
            return interrupt.value
    return None


def banner(snapshot: Any, tool_count: int, thread: str) -> str:
    head = f"Loaded {tool_count} tools. Thread '{thread}': "
    payload = pending_approval(snapshot)
    if payload:
        calls = ", ".join(format_call(c["name"], c["args"], 60) for c in payload["calls"])
        return head + f"paused: waiting for your approval of {calls}."
    messages = snapshot.values.get("messages") or [] if snapshot.values else []
    if messages:
        return head + f"resuming, {len(messages)} messages."
    return head + "new conversation."


def approval_summary(mode: str, policy: Any, grants: list[dict[str, str]]) -> list[str]:
    """Whatever decides writes without asking, said up front."""
    lines = []
    if mode == "yes":
        lines.append("--approve yes: every write that no rule denies runs without asking.")
    elif mode == "no":
        lines.append("--approve no: every write is refused; reads still run.")
    if policy is not None and policy.rules:
        lines.append(f"Rules: {len(policy.rules)} from {policy.source}.")
    if grants:
        lines += grant_lines(grants)
    return lines


def grant_lines(grants: list[dict[str, str]]) -> list[str]:
    from approval import describe_grant

    if not grants:
        return ["No grants in this thread."]
    lines = ["Grants in this thread (approved without asking; /revoke N removes one):"]
    return lines + [f"  {n}. {describe_grant(grant)}" for n, grant in enumerate(grants, 1)]


# --- the session -----------------------------------------------------------------------------


class TurnInterrupter:
    """Ctrl-C cancels the running turn; at a prompt it ends the session.

    asyncio's own SIGINT handling only cancels the main task, which cannot interrupt a
    blocking `input()`; this handler decides by what is running now.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.turn: asyncio.Task[Any] | None = None
        self.previous: Any = None

    def __enter__(self) -> TurnInterrupter:
        self.previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.turn is not None and not self.turn.done():
            self.loop.call_soon_threadsafe(self.turn.cancel)
            return
        raise KeyboardInterrupt


@dataclass
class Session:
    app: Any
    config: dict[str, Any]
    term: Terminal
    base_url: str
    interrupter: TurnInterrupter
    verbose: bool = False
    strict: bool = False
    errors: int = 0
    call_names: dict[str, str] = field(default_factory=dict)
    paused_on: dict[str, Any] | None = None  # the approval the last run stopped at
    tools: dict[str, Any] = field(default_factory=dict)  # by name, for previews
    store: Any = None  # threads.Store: the ledger that knows what a cut-off run did

    async def stream(self, graph_input: Any) -> bool:
        """Run the graph until it ends or pauses; False if it was cut off or failed."""
        task = asyncio.ensure_future(self._stream(graph_input))
        self.interrupter.turn = task
        try:
            await task
            return True
        except asyncio.CancelledError:
            await self.close_cut_off_run("the run was cut off (Ctrl-C)")
            self.term.say("⨯ interrupted: what finished is kept; the thread takes a new prompt.")
            return False
        except Exception as error:
            if self.verbose or type(error).__name__ == "ReplayMismatch":
                self.term.event("error", text=str(error))
                raise  # a replay that drifted ends the run (exit 4); see agent_graph.main
            self.errors += 1
            line = describe_error(error, self.base_url)
            self.term.say(f"error: {line}")
            self.term.event("error", text=line)
            await self.close_cut_off_run("the run was cut off by an error")
            return False
        finally:
            self.interrupter.turn = None

    def show(self, node: str, update: Any) -> None:
        """What one step added: the route, tool calls, results, and model text not yet shown."""
        from langchain_core.messages import AIMessage, ToolMessage

        if not isinstance(update, dict):
            return
        if node == "router" and "route" in update:
            self.term.say(f"⇢ route: {update['route']}")
            self.term.event("route", route=update["route"])
        if node == "approve":
            show_automatic_decisions(self.term, update.get("approvals") or {})
        for message in update.get("messages") or []:
            if isinstance(message, AIMessage):
                self.show_model_message(message)
            elif isinstance(message, ToolMessage):
                self.show_tool_result(message)
        self.term.end_stream()

    def show_model_message(self, message: Any) -> None:
        # Model text was already streamed; our own messages (the step limit) were not.
        if message.content and not self.term.streaming:
            self.term.say(f"agent> {message.content}")
        if message.content:
            self.term.event("answer", text=str(message.content))
        for call in message.tool_calls:
            self.call_names[call["id"]] = call["name"]
            self.term.say(f"→ {format_call(call['name'], call['args'])}")
            self.term.event("tool_call", tool=call["name"], args=call["args"])
        for invalid in message.invalid_tool_calls:
            name = invalid.get("name") or "?"
            self.call_names[invalid.get("id") or ""] = name
            self.term.say(f"→ {name}(…) ✗ arguments are not valid JSON")
            self.term.event("tool_call", tool=name, args=None, error="arguments are not valid JSON")

    def show_tool_result(self, message: Any) -> None:
        from agent import content_text

        text = content_text(message.content)
        failed = message.status == "error"
        self.term.say(f"← {'✗ ' if failed else ''}{format_result(text)}")
        self.term.event(
            "tool_result",
            tool=self.call_names.get(message.tool_call_id, "?"),
            status="error" if failed else "ok",
            text=text,
        )

    async def close_cut_off_run(self, why: str) -> None:
        """Store an answer for every call the cut-off run left without one, so the thread is
        idle and consistent now rather than repaired only in the next request."""
        if self.store is None:
            return
        from threads import close_run

        thread = str(self.config["configurable"]["thread_id"])
        for answer in await close_run(self.app, self.store, thread, why):
            self.show("tools", {"messages": [answer]})

    async def _stream(self, graph_input: Any) -> None:
        self.paused_on = None
        async for mode, chunk in self.app.astream(
            graph_input,
            self.config,
            stream_mode=["updates", "messages"],
            durability="sync",
        ):
            if mode == "messages":
                message, meta = chunk
                if _is_model_text(message, str(meta.get("langgraph_node", ""))):
                    self.term.stream(message.content)
            else:
                for node, update in chunk.items():
                    if node == "__interrupt__":
                        self.paused_on = approval_among(update)
                    else:
                        self.show(node, update)

    async def settle_approvals(self, payload: dict[str, Any] | None) -> bool:
        """Ask about the pending approval, and any the resumed run pauses at next; False if
        the thread is left paused. The payload comes from the run that paused, or from the
        state of a thread just opened: loading the state again would cost a whole-history
        read."""
        from langgraph.types import Command

        while payload:
            try:
                decisions = await review(self.term, payload, self.tools)
            except NotAnAnswer as refused:
                line = (
                    f"not an answer at the approval: {refused} (answer {PIPED_ANSWERS}); "
                    "nothing was run, the thread stays paused"
                )
                print(f"fsagent: {line}", file=sys.stderr, flush=True)
                self.term.event("error", text=line)
                return False
            if decisions is None:
                self.term.say("Left paused: nothing was run. Open this thread again to answer.")
                return False
            if not await self.stream(Command(resume=decisions)):
                return True
            payload = self.paused_on
        return True

    async def grants(self) -> list[dict[str, str]]:
        snapshot = await self.app.aget_state(self.config)
        return list((snapshot.values or {}).get("grants") or [])

    async def person_command(self, line: str) -> None:
        """`/grants` lists the thread's grants; `/revoke N` removes one."""
        from agent_graph import PERSON_UPDATE

        word, _, argument = line.strip().partition(" ")
        grants = await self.grants()
        if word == "/grants":
            for text in grant_lines(grants):
                self.term.say(text)
            return
        if not argument.strip().isdigit() or not 1 <= int(argument) <= len(grants):
            self.term.say(f"no grant {argument.strip()!r}; /grants lists them")
            return
        gone = grants.pop(int(argument) - 1)
        # Recorded as an update by a node that leads to END, so it schedules nothing.
        await self.app.aupdate_state(self.config, {"grants": grants}, as_node=PERSON_UPDATE)
        from approval import describe_grant

        self.term.say(f"Revoked: {describe_grant(gone)}. It will be asked about again.")

    async def turn(self, prompt: str) -> bool:
        from langchain_core.messages import HumanMessage

        from approval import new_id

        self.term.event("prompt", text=prompt)
        message = HumanMessage(content=prompt, id=new_id("human"))
        if not await self.stream({"messages": [message]}):
            return True
        return await self.settle_approvals(self.paused_on)


async def run_session(
    app: Any, settings: Any, tools: list[Any], store: Any = None, policy: Any = None
) -> int:
    """The read-eval loop. Returns the exit code (see agent.EXIT_CODES)."""
    import threads
    from agent import StartupError
    from agent_graph import run_config

    config = run_config(settings.thread)
    view = await threads.view_thread(app, settings.thread)
    if view is not None and view.problem:
        raise StartupError(threads.cannot_resume_message(view))
    snapshot = view.snapshot if view is not None else await app.aget_state(config)
    with open_transcript(settings) as transcript:
        term = Terminal(transcript=transcript, redactions=root_redactions(settings.roots))
        term.say(banner(snapshot, len(tools), settings.thread))
        grants = list((snapshot.values or {}).get("grants") or [])
        for line in approval_summary(settings.approve, policy, grants):
            term.say(line)
        term.say("Type a prompt, or 'quit'.")
        with TurnInterrupter(asyncio.get_running_loop()) as interrupter:
            session = Session(
                app,
                config,
                term,
                settings.base_url,
                interrupter,
                verbose=settings.verbose,
                strict=settings.strict,
                tools={tool.name: tool for tool in tools},
                store=store,
            )
            if view is not None and view.status == threads.INTERRUPTED:
                # A crash mid-run: finish it, so nothing approved is lost; the ledger keeps
                # every write that already ran (or may have) from running again.
                steps = ", ".join(view.steps)
                term.say(f"⟳ The last run was cut off at {steps}; finishing it now.")
                await session.stream(None)
                pending = session.paused_on
            else:
                pending = pending_approval(snapshot)
            if not await session.settle_approvals(pending):
                return 3
            return await _prompt_loop(session, term.ask)


def open_transcript(settings: Any) -> Any:
    from contextlib import nullcontext

    from agent import StartupError

    if settings.transcript is None:
        return nullcontext(None)
    try:
        return settings.transcript.open("w", encoding="utf-8")
    except OSError as error:
        raise StartupError(f"--transcript {settings.transcript}: {error.strerror}") from error


def root_redactions(roots: list[Any]) -> list[tuple[str, str]]:
    """Temp folders differ from run to run; a transcript names them by role instead."""

    names = ["<root>"] + [f"<root{n}>" for n in range(2, len(roots) + 1)]
    pairs = [(os.path.realpath(root), name) for root, name in zip(roots, names, strict=True)]
    pairs += [(str(root), name) for root, name in zip(roots, names, strict=True)]
    return sorted(set(pairs), key=lambda pair: -len(pair[0]))


# A bare answer typed at the prompt almost always belongs to an approval that did not come
# (the model skipped the call): sending it to the model could make it act on its own.
def looks_like_an_answer(line: str) -> bool:
    word, colon, _ = line.strip().lower().partition(":")
    return word.strip() in ANSWER_WORDS and (not colon or word.strip() in ("n", "no", "e"))


async def _prompt_loop(session: Session, ask: Callable[[str], str | None]) -> int:
    term = session.term
    while True:
        try:
            line = ask("you> ")
        except KeyboardInterrupt:
            term.say()
            return 130
        if line is None or line.strip().lower() in QUIT_WORDS:
            return 1 if session.errors else 0
        if not line.strip():
            continue
        if line.split()[0] in PERSON_COMMANDS:
            await session.person_command(line)
            continue
        if looks_like_an_answer(line):
            warning = f"not sent to the model: {line.strip()!r} looks like an approval answer, "
            warning += "but nothing is waiting for approval"
            term.say(f"⚠ {warning}")
            term.event("warning", text=warning)
            if session.strict:
                return 3
            continue
        if not await session.turn(line.strip()):
            return 3
