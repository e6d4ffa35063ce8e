"""Everything the person sees and types: the banner, streamed steps, the approval review, and
the loop that runs a turn, pauses for a decision and resumes the same thread."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

CLIP_AT = 300
RESULT_LINES = 3
QUIT_WORDS = frozenset({"quit", "exit"})


# --- text helpers ----------------------------------------------------------------------------


def _clip(text: str, limit: int = CLIP_AT) -> str:
    """Cut long text visibly: the person always sees that, and how much, was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def format_call(name: str, args: Any, limit: int = CLIP_AT) -> str:
    if not isinstance(args, dict):
        return f"{name}({_clip(repr(args), limit)})"
    shown = ", ".join(f"{key}={_clip(repr(value), limit)}" for key, value in args.items())
    return f"{name}({shown})"


def format_result(text: str) -> str:
    """A tool result in a few lines: JSON on one line, text by its first lines."""
    import json

    try:
        return _clip(json.dumps(json.loads(text), ensure_ascii=False), 200)
    except ValueError:
        pass
    lines = text.splitlines() or [""]
    shown = [_clip(line, 200) for line in lines[:RESULT_LINES]]
    if len(lines) > RESULT_LINES:
        shown.append(f"… (+{len(lines) - RESULT_LINES} more lines)")
    return "\n  ".join(shown)


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


# --- the terminal ----------------------------------------------------------------------------


@dataclass
class Terminal:
    """Reads the person's lines (a TTY or a pipe) and writes what happened."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    piped: bool = field(default_factory=lambda: not sys.stdin.isatty())
    streaming: bool = False  # in the middle of a line of model text
    # Where `event()` records what happened, for --transcript; None records nothing.
    transcript: TextIO | None = None

    def event(self, kind: str, **fields: Any) -> None:
        """One transcript event: `prompt`, `route`, `tool_call`, `approval_request`,
        `decision`, `tool_result`, `answer`, `warning` or `error`. Fields hold what a
        regression compares, so no timestamps and no ids."""
        if self.transcript is None:
            return
        import json

        record = {"event": kind, **fields}
        self.transcript.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        self.transcript.flush()

    def say(self, text: str = "") -> None:
        self.end_stream()
        print(text, file=self.out, flush=True)

    def stream(self, text: str) -> None:
        if not self.streaming:
            self.out.write("agent> ")
            self.streaming = True
        self.out.write(text)
        self.out.flush()

    def end_stream(self) -> None:
        if self.streaming:
            self.out.write("\n")
            self.streaming = False

    def ask(self, prompt: str) -> str | None:
        """One line from the person; None at end of input. A pipe's line is echoed so a
        transcript shows both what was asked and what was answered."""
        self.end_stream()
        if not self.piped:
            try:
                return input(prompt)
            except EOFError:
                self.out.write("\n")
                return None
        line = self.stdin.readline()
        if not line:
            return None
        line = line.rstrip("\r\n")
        print(f"{prompt}{line}", file=self.out, flush=True)
        return line


# --- what a step shows -----------------------------------------------------------------------


def show_update(term: Terminal, node: str, update: Any) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    if not isinstance(update, dict):
        return
    if node == "router" and "route" in update:
        term.say(f"⇢ route: {update['route']}")
    for message in update.get("messages") or []:
        if isinstance(message, AIMessage):
            # Model text was already streamed; our own messages (the step limit) were not.
            if message.content and not term.streaming:
                term.say(f"agent> {message.content}")
            for call in message.tool_calls:
                term.say(f"→ {format_call(call['name'], call['args'])}")
            for invalid in message.invalid_tool_calls:
                term.say(f"→ {invalid.get('name') or '?'}(…) ✗ arguments are not valid JSON")
        elif isinstance(message, ToolMessage):
            from agent_graph import content_text

            mark = "✗ " if message.status == "error" else ""
            term.say(f"← {mark}{format_result(content_text(message.content))}")
    term.end_stream()


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
    for interrupt in snapshot.interrupts:
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


# --- review ----------------------------------------------------------------------------------


def review(term: Terminal, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Ask the person about the batch; None leaves the thread paused (end of input)."""
    term.say("⚠ Approval needed. The agent wants to run:")
    for number, call in enumerate(payload["calls"], 1):
        term.say(f"  {number}. {format_call(call['name'], call['args'])}")
    answer = term.ask("Approve? [y/N] ")
    if answer is None:
        return None
    approved = answer.strip().lower() in ("y", "yes")
    decision = (
        {"type": "approve"} if approved else {"type": "reject", "message": "the person said no"}
    )
    return {"decisions": {call["id"]: dict(decision) for call in payload["calls"]}}


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
    errors: int = 0
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
            if self.verbose:
                raise
            self.errors += 1
            self.term.say(f"error: {describe_error(error, self.base_url)}")
            await self.close_cut_off_run("the run was cut off by an error")
            return False
        finally:
            self.interrupter.turn = None

    async def close_cut_off_run(self, why: str) -> None:
        """Store an answer for every call the cut-off run left without one, so the thread is
        idle and consistent now rather than repaired only in the next request."""
        if self.store is None:
            return
        from threads import close_run

        thread = str(self.config["configurable"]["thread_id"])
        for answer in await close_run(self.app, self.store, thread, why):
            show_update(self.term, "tools", {"messages": [answer]})

    async def _stream(self, graph_input: Any) -> None:
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
                    if node != "__interrupt__":
                        show_update(self.term, node, update)

    async def settle_approvals(self) -> bool:
        """Ask about every pending approval in turn; False if the thread is left paused."""
        from langgraph.types import Command

        while payload := pending_approval(await self.app.aget_state(self.config)):
            decisions = review(self.term, payload)
            if decisions is None:
                self.term.say("Left paused: nothing was run. Open this thread again to answer.")
                return False
            if not await self.stream(Command(resume=decisions)):
                return True
        return True

    async def turn(self, prompt: str) -> bool:
        from langchain_core.messages import HumanMessage

        from approval import new_id

        message = HumanMessage(content=prompt, id=new_id("human"))
        if not await self.stream({"messages": [message]}):
            return True
        return await self.settle_approvals()


async def run_session(app: Any, settings: Any, tools: list[Any], store: Any = None) -> int:
    """The read-eval loop. Returns the exit code: 0, 1 after an error, 3 if left paused."""
    import threads
    from agent import StartupError
    from agent_graph import recursion_limit

    term = Terminal()
    config: dict[str, Any] = {
        "configurable": {"thread_id": settings.thread},
        "recursion_limit": recursion_limit(),
    }
    view = await threads.view_thread(app, settings.thread)
    if view is not None and view.problem:
        raise StartupError(threads.cannot_resume_message(view))
    snapshot = await app.aget_state(config)
    term.say(banner(snapshot, len(tools), settings.thread))
    term.say("Type a prompt, or 'quit'.")
    with TurnInterrupter(asyncio.get_running_loop()) as interrupter:
        session = Session(
            app, config, term, settings.base_url, interrupter, settings.verbose, store=store
        )
        if view is not None and view.status == threads.INTERRUPTED:
            # A crash mid-run: finish it, so nothing approved is lost; the ledger keeps every
            # write that already ran (or may have) from running again.
            term.say(f"⟳ The last run was cut off at {', '.join(view.steps)}; finishing it now.")
            await session.stream(None)
        if not await session.settle_approvals():
            return 3
        return await _prompt_loop(session, term.ask)


async def _prompt_loop(session: Session, ask: Callable[[str], str | None]) -> int:
    while True:
        try:
            line = ask("you> ")
        except KeyboardInterrupt:
            session.term.say()
            return 130
        if line is None or line.strip().lower() in QUIT_WORDS:
            return 1 if session.errors else 0
        if not line.strip():
            continue
        if not await session.turn(line.strip()):
            return 3
