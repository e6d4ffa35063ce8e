"""Every model request of a thread, built to fit the model's context and to extend the request
before it byte for byte.

A request is, in this order:

- the tools: the same schemas in every request of the thread, whatever the route
  (core.tools.tool_schemas); a chat template puts them before the conversation, so a changed
  list would make the server process the whole prompt again. Two exceptions: where every
  tool would be a large share of the context (a 2048 context), each route offers its own few
  (core.tools.tool_groups.SMALL_CONTEXT_TOOLS), and keeps offering them once the thread took
  the route while they leave room (ContextKeeper.offered); another MCP server's route offers
  its own tools and no other (core.tools.tool_groups.Routes.small_tools;
  bench/server_routes.py measured why they are in the one set otherwise); and a constrained request
  (core.context.constrained) lists them in the system prompt instead;
- the system prompt, with the thread's summary when it has one;
- the history the summary does not cover, as stored: each request from the person with its
  route's note after it (core.context.prompts.ROUTE_NOTES), replies without their reasoning, a tool
  result too large for the context cut with a note that says so, and earlier turns' results
  past a share of the room sent as their heads (ContextKeeper.old_results);
- for the router only, its question after the person's latest words.

Nothing in it changes once sent, so request N+1 begins with request N and the server's
prompt cache serves all but the new tokens, across route switches too. The exception: when a
turn starts, an earlier result may be shortened, and the server processes again from there
(on 4096 tokens, the last turn's tail).

Keeping within the context: the server's count of the request that made the last reply (its
usage) is the truth, and only the messages after that reply are estimated
(core.context.budget), scaled by how far the thread's estimates were off before
(core.context.counts); a reply's count holds only for a request with the same tools
(TOOLS_KEY); a large tool result, and the person's long words, are counted by the server
itself where it can (llama.cpp's /tokenize). Past the budget's mark the older turns are
replaced, in what is sent, by a summary the model writes; the summary is stored in the
thread's state and reused by every later request, after a restart too, until the next
compaction. The summary is asked for by the last request as it was sent and a question after
it, so the server reads only the question; everything that request sends is summarised, so a
compaction leaves the fixed part (cached: the summary comes after it), the summary and the
turn going on (issue 43), the summary cut if it leaves the turn no room. The stored history
is never changed. A request the server refuses as too long is compacted and cut by the
server's count of it and sent again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import message_chunk_to_message
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM

from core.context import constrained
from core.context.budget import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD,
    SUMMARY_PREFIX,
    WHAT_TO_DO,
    Budget,
    default_max_tokens,
    estimate_message,
    estimate_messages,
    estimate_text,
    is_context_overflow,
    overflow_sizes,
    plan_compaction,
    summary_tokens_for,
    too_big,
)
from core.context.constrained import CallMode, Protocol
from core.context.counts import LARGE_RESULT, SCALE_KEY, ServerCounter, ratio, thread_scale
from core.context.prompts import ROUTE_NOTES, SYSTEM_PROMPT, route_question
from core.context.replies import REASONING_KEY, separate_reasoning, without_reasoning
from core.context.server_errors import one_line, server_words
from core.context.summary import Summary, in_conversation, standalone, summary_text, trusted_replies
from core.context.text_calls import read_text_calls
from core.errors import ContextTooSmall
from core.threads.messages import content_text, messages_for_model
from core.tools.tool_groups import FILESYSTEM_ROUTES, SMALL_CONTEXT_TOOLS, Routes
from core.tools.tool_schemas import schema_text

ROUTE_KEY = "fsagent_route"  # a person's message's additional_kwargs: the route it was given
# A reply's additional_kwargs: how its request offered the tools (Shape.key), so its count is
# trusted only by a request that offers the same (ContextKeeper.parts).
TOOLS_KEY = "fsagent_tools"
COMPACTED = "compacted"  # the custom stream event of a compaction
NOTICE = "fsagent_notice"  # the custom stream event of a line of ours (core.session)
ANSWER_TEXT = "fsagent_answer"  # the custom stream event of a constrained reply's answer

# Tool schemas are JSON, which tokenizers cut finer than prose: about 2 characters a token
# (a real llama.cpp counted 2,900 tokens for 7,600 characters of schemas and prompt). Erring
# high only compacts a little early until the server's first count replaces the estimate.
SCHEMA_CHARS_PER_TOKEN = 2

# Tool results of earlier turns (file contents read turns ago, the bulk of a file agent's
# thread) are sent whole, newest first, while they fit this share of the room the prompt
# leaves the conversation (core.context.budget.Budget.room); older ones as their first
# OLD_RESULT_HEAD characters and a note. On 4096 tokens a 2 KB file is past a quarter of the
# room, so only the current turn's results are whole; on 32K, about 20 KB of recent results.
OLD_RESULTS_SHARE = 4
OLD_RESULT_HEAD = 120

# The router's reply limit: its one word, with room for a line of a reasoning model's
# thought. The route is read from whatever came back, cut or not (agent_graph.parse_route).
ROUTE_MAX_TOKENS = 32

# Where every tool and the system prompt take more than this share of what a request may
# hold, each route offers its own few (SMALL_CONTEXT_TOOLS): 2048 tokens, not 4096.
SMALL_CONTEXT_SHARE = 0.4

# The shares of its length a summary is cut to, in turn, when the request it makes does not
# fit; 0 is the note that turns were left out (ContextKeeper.shorter_summary).
SUMMARY_CUTS = (0.75, 0.5, 0.25, 0.0)

# Requests sent again after an overflow, each cut by the server's count of the one before.
OVERFLOW_RETRIES = 3
# How much more than the server's count a request sent again after an overflow is reckoned
# at, so it lands under the count rather than on it.
OVERFLOW_MARGIN = 1.05


@dataclass(frozen=True)
class Sent:
    """A reply, and the summary the request was compacted with if it was."""

    response: AIMessage
    compacted: Summary | None


@dataclass(frozen=True)
class Shape:
    """What a request holds besides the history: how its tools are offered (`protocol`,
    core.context.constrained) and which, the router's question, the schema its reply must
    fit, tool_choice, and its reply limit."""

    protocol: Protocol
    tools: tuple[dict[str, Any], ...]
    question: str | None = None
    schema: dict[str, Any] | None = None
    choice: str = "auto"
    limit: int | None = None

    @property
    def key(self) -> str:
        names = ",".join(str(t["function"]["name"]) for t in self.tools)
        return f"{self.protocol}|{names}"

    def replying(self, *, choice: str, limit: int | None, schema: dict[str, Any] | None) -> Shape:
        return Shape(self.protocol, self.tools, self.question, schema, choice, limit)


class ContextKeeper:
    """Builds a thread's requests, sends them, and keeps them within the context.

    model makes the chat model (it is built at the first prompt); tools are the schemas every
    request offers. budget is None while the context length is unknown: then nothing is
    compacted until the server refuses a request and names its context. calls says whether
    calls are constrained (--constrain-calls); counter counts large results with the
    server's tokenizer where it has one.
    """

    def __init__(
        self,
        model: Callable[[], BaseChatModel],
        tools: list[dict[str, Any]],
        *,
        budget: Budget | None,
        max_tokens: int | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        text_calls: bool = True,
        calls: CallMode | None = None,
        counter: ServerCounter | None = None,
        routes: Routes = FILESYSTEM_ROUTES,
    ) -> None:
        self.model = model
        # The routes the router chooses among, the person's other servers' too (set by
        # agent_graph.build_graph from the tools it runs).
        self.routes = routes
        # Read tool calls a model wrote as text into real ones (core.context.text_calls).
        self.text_calls = text_calls
        self.tool_names = frozenset(tool_name(schema) for schema in tools)
        self.tools = tools
        self.budget = budget
        self._max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.calls = calls or CallMode()
        self.counter = counter
        self.tool_tokens = tool_tokens(tools)
        # The server's count of each fixed part (tools and system prompt, per kind of
        # request) less our estimate of it, once a reply's usage says (learn_fixed).
        self._fixed_errors: dict[str, int] = {}
        # Tool results the server counted: message id -> (characters, tokens).
        self.counted: dict[str, tuple[int, int]] = {}
        # A thread's ratio as this process last learnt it (from a reply's usage, or an
        # overflow's count): thread -> ratio. A reply also keeps it, for after a restart.
        self._learnt_scale: dict[str, float] = {}
        self._bound: dict[str, Any] = {}

    # -- the fixed part ------------------------------------------------------------------------

    @property
    def max_tokens(self) -> int | None:
        """The reply limit every request carries: the budget's, once the context is known
        (it may be learnt from an overflow answer)."""
        return self.budget.max_tokens if self.budget is not None else self._max_tokens

    @property
    def estimated_fixed(self) -> int:
        """The estimated fixed part: every tool and the system prompt without a summary."""
        return self.tool_tokens + MESSAGE_OVERHEAD + estimate_text(self.system_prompt)

    @property
    def fixed_error(self) -> int | None:
        """The server's count of the fixed part of every tool less our estimate of it."""
        return self._fixed_errors.get(self.default_shape.key)

    @property
    def fixed_tokens(self) -> int:
        """The fixed part as the server counts it once a reply said, else the estimate: of
        every tool, or on a small context of the route that offers the most."""
        if self.small_context:
            return max(self.shape_fixed(shape) for shape in self.small_shapes())
        return self.estimated_fixed + (self.fixed_error or 0)

    def small_shapes(self) -> list[Shape]:
        """The agent requests' shapes on a small context: whatever routes a thread took
        before, each of our routes' (ContextKeeper.offered), and each other server's route's
        own."""
        routes = list(SMALL_CONTEXT_TOOLS)
        shapes: dict[str, Shape] = {}
        for mask in range(2 ** len(routes)):
            taken = {r for i, r in enumerate(routes) if mask >> i & 1}
            for route in routes:
                shape = Shape("native", self.offered_after(taken, route))
                shapes[shape.key] = shape
        for server in self.routes.servers:
            shape = Shape("native", self.route_tools(server.name))
            shapes[shape.key] = shape
        return list(shapes.values())

    def route_tools(self, route: str) -> tuple[dict[str, Any], ...]:
        """What an agent request on `route` offers on a small context: the route's own tools
        (core.tools.tool_groups.Routes.small_tools), never another server's."""
        wanted = self.routes.small_tools(route)
        return tuple(t for t in self.tools if tool_name(t) in wanted)

    def route_fixed(self) -> dict[str, int]:
        """Each route's fixed part (its tools and the system prompt) on a small context, where
        each offers its own; on a larger one every route sends every tool, one fixed part."""
        if not self.small_context:
            return dict.fromkeys(self.routes.names, self.fixed_tokens)
        return {
            route: self.shape_fixed(Shape("native", self.route_tools(route)))
            for route in self.routes.names
        }

    def router_question(self) -> str:
        """The router's question: our routes and the other servers' (the names alone on a
        small context, besides each server's own words)."""
        servers = [(route.name, route.description) for route in self.routes.servers]
        return route_question(servers, self.small_context)

    def shape_fixed(self, shape: Shape) -> int:
        """A request's fixed part (its tools, the system prompt), the server's count of it
        once known."""
        estimated = self.shape_tool_tokens(shape) + MESSAGE_OVERHEAD
        estimated += estimate_text(self.system_text(None, shape))
        return estimated + self._fixed_errors.get(shape.key, 0)

    def shape_tool_tokens(self, shape: Shape) -> int:
        """What the tools add outside the messages: nothing when they are in the prompt."""
        if shape.protocol != "native":
            return 0
        return self.tool_tokens if len(shape.tools) == len(self.tools) else tool_tokens(shape.tools)

    def learn_fixed(
        self, request: Sequence[BaseMessage], response: AIMessage, shape: Shape
    ) -> None:
        """Learn the fixed part's real size from the first reply to a request that is mostly
        the fixed part (a thread's first router request): the server's usage.prompt_tokens
        less our estimate of the few messages. Tool schemas are where the estimate is least
        sure (real templates add their own tool instructions; tokenizers differ)."""
        usage = response.usage_metadata
        counted = int(usage.get("input_tokens") or 0) if usage else 0
        if shape.key in self._fixed_errors or counted <= 0:
            return
        fixed = self.shape_fixed(shape)
        whole = self.shape_tool_tokens(shape) + estimate_messages(request)
        if whole - fixed > fixed // 4:
            return  # mostly conversation: its own estimate's error would swamp the count
        self._fixed_errors[shape.key] = counted - whole

    # -- the shape of a request ----------------------------------------------------------------

    @property
    def default_shape(self) -> Shape:
        return Shape("native", tuple(self.tools))

    @property
    def small_context(self) -> bool:
        """Whether every tool would be a large share of what a request may hold."""
        budget = self.budget
        return (
            budget is not None and self.estimated_fixed > SMALL_CONTEXT_SHARE * budget.prompt_limit
        )

    def shape(
        self, messages: Sequence[AnyMessage], *, route: str | None, route_question: bool
    ) -> Shape:
        """The shape of a request of this thread now: the router's (its question, no call
        may be made) or an agent step's on `route` (None: no routes, the read-only agent)."""
        protocol = self.calls.protocol(messages)
        tools = tuple(self.tools)
        if protocol == "native" and route is not None and self.small_context:
            tools = self.offered(messages, route)
        if not route_question:
            schema = constrained.step_schema(tools) if protocol == "schema" else None
            return Shape(protocol, tools, None, schema, "auto", self.max_tokens)
        question = self.router_question()
        schema = constrained.route_schema(self.routes.names) if protocol == "schema" else None
        # The router needs one word: a small model given the agent's reply limit answered
        # the whole request there, before the agent's request answered it again.
        return Shape(protocol, tools, question, schema, "none", ROUTE_MAX_TOKENS)

    def offered(self, messages: Sequence[AnyMessage], route: str) -> tuple[dict[str, Any], ...]:
        """The tools a small context's request offers: those of every route the thread has
        taken (each person's message keeps its route) and of `route`, in the one order.

        Once offered, a tool stays: the tools come before the conversation in a chat
        template, so a changed list makes the server read the whole history again (1,142
        and 1,321 tokens on two switches of a 2048 thread, issue 43), while keeping a
        route's tools costs their schemas once (general with filesystem's: ~350 tokens
        more), and a thread's list changes at most once a route. Only while they are no
        more than the largest route's own (by our estimate, which never changes, so neither
        does the choice): a fixed part that grows leaves the conversation less room, and on
        a 2048 context filesystem's and search's tools together (~900 real tokens against
        815 and 549) made every turn compact on a real llama.cpp, where each route's own
        compacted every third (docs/performance.md, issue 43). So general and search keep
        each other's tools, and a switch to or from filesystem offers the route's own."""
        taken = {
            str(message.additional_kwargs.get(ROUTE_KEY))
            for message in messages
            if isinstance(message, HumanMessage)
        }
        return self.offered_after(taken, route)

    def offered_after(self, taken: set[str], route: str) -> tuple[dict[str, Any], ...]:
        """ContextKeeper.offered, once the thread took the routes `taken`. Another server's
        route offers its own tools alone, and ours never keep its tools: they are a
        person's choice of server, sized as its author wrote them (git's 12 are ~1,500
        tokens, more than any route of ours), so no rule of ours could say they leave room."""
        if self.routes.server(route) is not None:
            return self.route_tools(route)
        wanted = {name for r in taken | {route} for name in SMALL_CONTEXT_TOOLS.get(r, ())}
        kept = tuple(t for t in self.tools if tool_name(t) in wanted)
        if tool_tokens(kept) <= self.largest_route_tools:
            return kept
        return self.route_tools(route)

    @property
    def largest_route_tools(self) -> int:
        """Our estimate of the largest tool set one route offers on a small context."""
        return max(
            tool_tokens([t for t in self.tools if tool_name(t) in own])
            for own in SMALL_CONTEXT_TOOLS.values()
        )

    def system_text(self, summary: Summary | None, shape: Shape | None = None) -> str:
        text = self.system_prompt
        if shape is not None and shape.protocol != "native":
            text += constrained.prompt_tools(shape.tools)
        if summary is None:
            return text
        return f"{text}\n\n{SUMMARY_PREFIX}\n{summary.text}"

    # -- the request ---------------------------------------------------------------------------

    def visible(
        self, messages: Sequence[AnyMessage], summary: Summary | None, *, result_cap: int | None
    ) -> list[tuple[int, BaseMessage]]:
        """The history the summary does not cover, each message as it is sent, with its
        index in the history."""
        old = self.old_results(messages, summary, result_cap)
        calls = calls_by_id(messages)
        shown: list[tuple[int, BaseMessage]] = []
        for index, message in enumerate(messages):
            if summary is not None and index < summary.upto and message.id not in summary.held:
                continue
            if index in old and isinstance(message, ToolMessage):
                tool = calls.get(message.tool_call_id) or message.name or "the tool"
                shown.append((index, shortened(message, tool)))
            else:
                shown.append((index, as_sent(message, result_cap, self.density(message))))
        return shown

    def old_results(
        self, messages: Sequence[AnyMessage], summary: Summary | None, result_cap: int | None
    ) -> set[int]:
        """The tool results of earlier turns sent as their first lines: those past the
        newest that fit a share of the room the prompt leaves the conversation.

        Earlier turns only (before the person's latest message), so what is sent changes
        when a turn starts, never within one; and once a result is shortened it stays so
        (newer results only add to those before it), so later requests extend the one
        before. The budget's room is reckoned with the estimated fixed part, never the
        count learnt from the server, for the same reason.
        """
        if self.budget is None:
            return set()
        latest = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            0,
        )
        allowance = self.budget.room(self.estimated_fixed) // OLD_RESULTS_SHARE
        used = 0
        for index in range(latest - 1, -1, -1):
            message = messages[index]
            if not isinstance(message, ToolMessage):
                continue
            if summary is not None and index < summary.upto and message.id not in summary.held:
                break  # the summary stands for it and for all before it
            used += estimate_message(as_sent(message, result_cap, self.density(message)))
            if used > allowance:
                return {i for i in range(index + 1) if isinstance(messages[i], ToolMessage)}
        return set()

    def request(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        *,
        question: str | None = None,
        result_cap: int | None = None,
        shape: Shape | None = None,
    ) -> list[BaseMessage]:
        shape = shape or self.default_shape
        question = question if question is not None else shape.question
        cap = self.result_cap() if result_cap is None else result_cap
        visible = self.visible(messages, summary, result_cap=cap)
        history = self.as_history([message for _, message in visible], shape)
        request: list[BaseMessage] = [SystemMessage(self.system_text(summary, shape))]
        request += history
        if question is not None and isinstance(request[-1], HumanMessage):
            latest = request[-1]
            request[-1] = HumanMessage(
                f"{content_text(latest.content)}\n\n{question}", id=latest.id
            )
        return request

    def as_history(self, messages: Sequence[BaseMessage], shape: Shape) -> list[BaseMessage]:
        """Messages as a well-formed request sends them, in the shape's protocol."""
        history: list[BaseMessage] = list(messages_for_model(cast(list[AnyMessage], messages)))
        if shape.protocol == "native":
            return history
        return constrained.as_text_protocol(history, calls_by_id(messages))

    def result_cap(self) -> int | None:
        """The most tokens one tool result may take in a request: what the prompt limit
        leaves after the fixed part, a summary and the turn's own messages."""
        if self.budget is None:
            return None
        # The estimated fixed part, not the learnt one: what is sent must not change with it.
        return max(100, self.budget.room(self.estimated_fixed) * 9 // 10)

    def density(self, message: BaseMessage) -> float | None:
        """Tokens a character of a result or of the person's words the server counted; None
        for any other message (a token per CHARS_PER_TOKEN characters, core.context.budget)."""
        if not isinstance(message, ToolMessage | HumanMessage) or message.id is None:
            return None
        counted = self.counted.get(str(message.id))
        return counted[1] / max(1, counted[0]) if counted else None

    def measure(self, scale: float) -> Callable[[BaseMessage], int]:
        """A message's tokens: the server's count where it made one, else our estimate times
        the thread's ratio (core.context.counts)."""

        def tokens(message: BaseMessage) -> int:
            density = self.density(message)
            if density is not None:
                return MESSAGE_OVERHEAD + math.ceil(len(content_text(message.content)) * density)
            return math.ceil(estimate_message(message) * scale)

        return tokens

    def parts(
        self,
        request: Sequence[BaseMessage],
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        shape: Shape | None = None,
    ) -> tuple[int, list[BaseMessage]]:
        """(what the server counted of the request, the messages after it, still to count):
        the server's count of the request up to the last reply it made with this summary,
        or the fixed part's when no reply counts.

        A reply's count holds only while what came before it is sent as it was then: an
        earlier result shortened since (old_results) makes it a count of a longer prompt,
        so the latest reply with nothing shortened before it is the one trusted. So too a
        reply to a request that offered other tools (a small context's route switch): the
        tools come first, so its count is of another start; read as this one's, the tools'
        difference was put on the new words (a ratio of 1.82 on a real llama.cpp, issue 43)
        and every later request seemed too big to send. A reply from before the tools were
        recorded is trusted as it was."""
        shape = shape or self.default_shape
        trusted = trusted_replies(messages, summary)
        cap = self.result_cap()
        old = self.old_results(messages, summary, cap)
        where = {str(message.id): index for index, message in enumerate(messages)}
        for position in range(len(request) - 1, 0, -1):
            message = request[position]
            usage = getattr(message, "usage_metadata", None)
            if isinstance(message, AIMessage) and message.id in trusted and usage:
                if message.additional_kwargs.get(TOOLS_KEY, shape.key) != shape.key:
                    continue  # counted with other tools before the history
                made = where.get(str(message.id), 0)
                then = self.old_results(messages[:made], summary, cap)
                if any(index < made for index in old - then):
                    continue  # shortened since this reply was made
                known = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
                return known, list(request[position + 1 :])
        known = self.shape_tool_tokens(shape) + self._fixed_errors.get(shape.key, 0)
        return known, list(request)

    def estimate(
        self,
        request: Sequence[BaseMessage],
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        shape: Shape | None = None,
    ) -> int:
        """The request's prompt tokens: the server's count where it has one, and for what
        came after, the server's count of a large result or our estimate times the
        thread's ratio."""
        known, rest = self.parts(request, messages, summary, shape)
        measure = self.measure(self.scale(messages))
        return known + sum(measure(message) for message in rest)

    def scale(self, messages: Sequence[AnyMessage]) -> float:
        """How many real tokens an estimated one is in this thread, as the server showed."""
        learnt = self._learnt_scale.get(thread_of(messages))
        return learnt if learnt is not None else thread_scale(messages)

    # -- sending -------------------------------------------------------------------------------

    async def send(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        *,
        route_question: bool = False,
        route: str | None = None,
        on_compacted: Callable[[Summary], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        on_text: Callable[[str, str], None] | None = None,
    ) -> Sent:
        """One request with the thread's history: the router's (its question after the
        latest words, no tool may be called) or an agent step's on `route`. on_compacted
        hears of a compaction as soon as it is made, before the request is sent; on_notice
        gets our one-line notices (calls constrained, a refusal worked around); on_text the
        answer and reasoning of a constrained reply as they stream (its JSON is not shown)."""
        thread = thread_of(messages)
        said = self.calls.notice(messages, thread)
        if said is not None and on_notice is not None:
            on_notice(said)
        await self.count_results(messages, summary)
        shape = self.shape(messages, route=route, route_question=route_question)
        compacted: Summary | None = None
        overflows = 0
        refusal: tuple[str, int | None] | None = None  # the last overflow's words and count
        # After an overflow: what a request may hold by our estimate, so that it fits by the
        # server's count (believed_limit); None: the budget's prompt limit.
        limit: int | None = None
        while True:
            request = self.request(messages, summary, shape=shape)
            tokens = self.estimate(request, messages, summary, shape)
            if (
                self.budget is not None
                and self.budget.needs_compaction(tokens)
                and not compacted
                # No summary is worth asking for when the fixed part and the person's latest
                # words alone are over the limit: fitting_request says so at once.
                and self.may_fit(messages, shape, limit)
            ):
                made = await self.compacting(
                    messages, summary, "budget", tokens, shape, on_compacted
                )
                if made is not None:
                    summary = compacted = made
            try:
                request = self.fitting_request(messages, summary, shape, limit=limit)
            except ContextTooSmall as error:
                if refusal is None:
                    raise
                # After an overflow, the server's count is what the person is told.
                raise ContextTooSmall(self.refusal(*refusal, shape)) from error
            try:
                response, answer = await self.invoke(shape, request, on_text)
                break
            except Exception as error:
                words = server_words(error)
                changed = self.refused(shape, words, messages, on_notice)
                if changed:
                    shape = self.shape(messages, route=route, route_question=route_question)
                    continue
                if not is_context_overflow(words):
                    raise
                overflows += 1
                counted = self.learn_overflow(words, request, messages, summary, shape)
                refusal = (words, counted)
                # Both sizes by the ratio just learnt, so "never grows" compares like with like.
                sent = self.estimate(request, messages, summary, shape)
                believed = self.believed_limit(counted, sent)
                if believed is not None:  # never loosened by a later refusal within the send
                    limit = believed if limit is None else min(limit, believed)
                if overflows > OVERFLOW_RETRIES or not self.may_fit(messages, shape, limit):
                    # Refused too often, or the fixed part and the latest words alone are
                    # over the limit by the server's count: no summary can help, so none is
                    # asked for.
                    raise ContextTooSmall(self.refusal(words, counted, shape)) from error
                made = await self.compacting(
                    messages, summary, "overflow", sent, shape, on_compacted, limit=limit
                )
                if made is not None:
                    summary = compacted = made
                try:
                    again = self.fitting_request(messages, summary, shape, limit=limit)
                except ContextTooSmall:
                    again = request  # cannot fit: say so by the server's count, not ours
                if made is None and again == request:
                    # Nothing left to summarise or to cut: say what the server counted.
                    raise ContextTooSmall(self.refusal(words, counted, shape)) from error
        self.learn_fixed(request, response, shape)
        self.calibrate(request, messages, summary, shape, response)
        response.additional_kwargs[TOOLS_KEY] = shape.key
        reply = separate_reasoning(response)
        if route_question:
            if shape.schema is not None:
                reply = reply.model_copy(
                    update={"content": constrained.read_route(content_text(reply.content))}
                )
            return Sent(reply, compacted)
        if shape.protocol != "native":
            names = {tool_name(tool) for tool in shape.tools}
            reply = constrained.read_step(reply, names, answer)
        if self.text_calls:
            reply = read_text_calls(reply, self.tool_names)
        return Sent(reply, compacted)

    async def compacting(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        why: str,
        before: int,
        shape: Shape,
        on_compacted: Callable[[Summary], None] | None,
        *,
        limit: int | None = None,
    ) -> Summary | None:
        """A compaction for `send`, told to on_compacted as soon as it is made."""
        made = await self.compact(
            messages, summary, why=why, before=before, shape=shape, limit=limit
        )
        if made is not None and on_compacted is not None:
            on_compacted(made)
        return made

    async def invoke(
        self,
        shape: Shape,
        request: list[BaseMessage],
        on_text: Callable[[str, str], None] | None,
    ) -> tuple[AIMessage, str]:
        """The reply to one request, and the text of its answer as it streamed when it was
        written to a schema. Such a reply is JSON, which is not for the screen: it is
        streamed here, out of LangGraph's sight, and its answer's text (with any reasoning)
        passed to on_text as it comes."""
        runnable = self.bound(shape)
        if shape.protocol == "native" or shape.question is not None:
            response: AIMessage = await runnable.ainvoke(request)
            return response, ""
        reader = constrained.AnswerStream()
        whole: Any = None
        async for chunk in runnable.astream(request, config={"tags": [TAG_NOSTREAM]}):
            whole = chunk if whole is None else whole + chunk
            piece = reader.feed(content_text(chunk.content))
            if shape.schema is None and not reader.raw.lstrip().startswith("{"):
                piece = content_text(chunk.content)  # no schema, and not JSON: plain text
            thought = chunk.additional_kwargs.get(REASONING_KEY) or ""
            if on_text is not None and (piece or thought):
                on_text(piece, thought if isinstance(thought, str) else "")
        message = message_chunk_to_message(whole) if whole is not None else AIMessage("")
        if not isinstance(message, AIMessage):
            message = AIMessage(content_text(message.content))
        # What streamed of the answer: all that is left of a reply cut before its JSON closed.
        return message, reader.text

    def refused(
        self,
        shape: Shape,
        words: str,
        messages: Sequence[AnyMessage],
        say: Callable[[str], None] | None,
    ) -> bool:
        """A refusal of how the request offered its tools, remembered for the life of the
        process and said in one line: True when the request should be made again."""
        if shape.protocol == "native" and shape.tools and constrained.refuses_tools(words):
            self.calls.no_tools = (
                f"the server says the model has no tool support ({one_line(words, 120)})"
            )
            line = self.calls.notice(messages, thread_of(messages))
            if line is None:  # --constrain-calls off, or the schema was refused too
                line = f"⚙ {self.calls.no_tools}: its tools are described in the prompt"
            self.calls.once("no-tools", line, say)
            return True
        if shape.schema is not None and constrained.refuses_schema(words):
            self.calls.no_schema = words
            self.calls.once(
                "no-schema",
                f"⚠ the server refused response_format ({one_line(words, 120)}): tool calls "
                "are not constrained on it",
                say,
            )
            return True
        return False

    def fitting_request(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        shape: Shape | None = None,
        *,
        limit: int | None = None,
    ) -> list[BaseMessage]:
        """The request, with tool results cut harder if it must; ContextTooSmall if even
        that does not fit. limit: what it may hold by our estimate (believed_limit), when
        not the budget's prompt limit."""
        request = self.request(messages, summary, shape=shape)
        if self.budget is None:
            return request
        limit = self.budget.prompt_limit if limit is None else limit
        cap = self.result_cap()
        tokens = self.estimate(request, messages, summary, shape)
        while tokens > limit and cap is not None and cap > 100:
            cap //= 2
            request = self.request(messages, summary, result_cap=cap, shape=shape)
            tokens = self.estimate(request, messages, summary, shape)
        if tokens > limit:
            raise ContextTooSmall(self.too_small(tokens, shape=shape))
        return request

    def shorter_summary(
        self,
        messages: Sequence[AnyMessage],
        made: Summary,
        shape: Shape,
        limit: int | None,
    ) -> Summary | None:
        """The summary cut (harder each time, down to the note that turns were left out)
        until the request fits; None when nothing fits."""
        whole = estimate_text(made.text)
        for share in SUMMARY_CUTS:
            text = shrunk_summary(made.text, int(whole * share)) if share else LEFT_OUT
            if text is None:
                continue
            candidate = Summary(**{**asdict(made), "text": text})
            try:
                request = self.fitting_request(messages, candidate, shape, limit=limit)
            except ContextTooSmall:
                continue
            after = self.estimate(request, messages, candidate, shape)
            return Summary(**{**asdict(candidate), "after": after})
        return None

    def bound(self, shape: Shape) -> Any:
        """The model with this request's tools (or none, when they are in the prompt), its
        tool_choice, reply limit and schema, made once per kind of request."""
        key = f"{shape.key}:{shape.choice}:{shape.limit}:{shape.schema is not None}"
        if key not in self._bound:
            runnable: Any = self.model()
            if shape.protocol == "native" and shape.tools:
                runnable = runnable.bind_tools(list(shape.tools), tool_choice=shape.choice)
            extra: dict[str, Any] = {}
            if shape.limit is not None:
                extra["max_tokens"] = shape.limit
            if shape.schema is not None:
                name = "route" if shape.question is not None else "step"
                extra["response_format"] = constrained.response_format(name, shape.schema)
            if extra:
                runnable = runnable.bind(**extra)
            self._bound[key] = runnable
        return self._bound[key]

    def learn_context(self, error_text: str) -> None:
        """An overflow answer that names the context: believe it over what we were told."""
        sizes = overflow_sizes(error_text)
        if sizes is None:
            return
        _, context = sizes
        if self.budget is not None and self.budget.context_length <= context:
            return
        reply = min(self.max_tokens or default_max_tokens(context), default_max_tokens(context))
        self.budget = Budget.for_context(context, reply)
        self._bound.clear()  # requests carry the new reply limit

    def learn_overflow(
        self,
        words: str,
        request: Sequence[BaseMessage],
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        shape: Shape,
    ) -> int | None:
        """What an overflow answer says: the context (believed over what we were told), and
        the server's count of the request, from which the thread's ratio is learnt. The
        count, when it gave one."""
        self.learn_context(words)
        sizes = overflow_sizes(words)
        if sizes is None:
            return None
        counted, _ = sizes
        known, rest = self.parts(request, messages, summary, shape)
        found = ratio(counted - known, estimate_messages(rest))
        thread = thread_of(messages)
        if found is not None:
            # A little over the count, so the request sent again is under it.
            self._learnt_scale[thread] = max(self.scale(messages), found * OVERFLOW_MARGIN)
        return counted

    def calibrate(
        self,
        request: Sequence[BaseMessage],
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        shape: Shape,
        response: AIMessage,
    ) -> None:
        """Keep on the reply how far our estimate of what the server had not counted before
        was off (core.context.counts): the thread's next estimates are scaled by it."""
        usage = response.usage_metadata
        counted = int(usage.get("input_tokens") or 0) if usage else 0
        known, rest = self.parts(request, messages, summary, shape)
        exact = self.measure(1.0)
        known += sum(exact(m) for m in rest if self.density(m) is not None)  # counted results
        found = ratio(
            counted - known, estimate_messages([m for m in rest if self.density(m) is None])
        )
        if found is None:
            return
        self._learnt_scale[thread_of(messages)] = found
        response.additional_kwargs[SCALE_KEY] = found

    async def count_results(self, messages: Sequence[AnyMessage], summary: Summary | None) -> None:
        """Count the large tool results of this turn, and the person's latest words when
        they are long, with the server's tokenizer where it has one, before they are sent:
        so results are cut by the room they really take, and a turn whose words our estimate
        puts over the room (it errs high on prose, never below the server's count) is judged
        by the server's count before it is refused or a summary is thought of no use."""
        if self.counter is None or not self.counter.available:
            return
        latest = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            0,
        )
        for message in messages[latest:]:
            if not isinstance(message, ToolMessage | HumanMessage) or message.id is None:
                continue
            text = content_text(message.content)
            if len(text) < LARGE_RESULT or str(message.id) in self.counted:
                continue
            tokens = await self.counter.count(text)
            if tokens is None:
                return
            self.counted[str(message.id)] = (len(text), tokens)

    def believed_limit(self, counted: int | None, estimated: int) -> int | None:
        """What a request may hold by our estimate once the server counted `counted` tokens
        for one we estimate at `estimated` (the thread's ratio learnt from it already
        applied): the prompt limit shrunk by how far the estimate still falls short, a
        little more, so the request sent again is under the count. The shortfall is of the
        whole request (the fixed part too), since what the server counts more is not said.
        None when the count is unknown or the estimate already holds it."""
        if self.budget is None or counted is None or counted <= estimated or estimated <= 0:
            return None
        short = counted / estimated * OVERFLOW_MARGIN
        return int(self.budget.prompt_limit / short)

    def may_fit(self, messages: Sequence[AnyMessage], shape: Shape, limit: int | None) -> bool:
        """Whether the fixed part and the person's latest words (and the router's question)
        could fit `limit` once everything else is summarised or cut: when not, no summary is
        worth asking for."""
        if self.budget is None:
            return True
        latest = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        words = self.measure(self.scale(messages))(as_sent(latest, None)) if latest else 0
        alone = self.shape_fixed(shape) + words + estimate_text(shape.question or "")
        return alone <= (self.budget.prompt_limit if limit is None else limit)

    def refusal(self, words: str, counted: int | None, shape: Shape) -> str:
        """The line for a request the server still refuses as too long once nothing is left
        to summarise or cut: its own count when it gave one, else its own words."""
        if counted is not None:
            return self.too_small(counted, counted=True, shape=shape)
        return (
            f"the server refused this request as too long for its context "
            f"({one_line(words, 160)}): {WHAT_TO_DO}"
        )

    def too_small(self, tokens: int, *, counted: bool = False, shape: Shape | None = None) -> str:
        budget = self.budget
        fixed = self.shape_fixed(shape) if shape is not None else self.fixed_tokens
        return too_big(
            tokens,
            fixed,
            budget.context_length if budget else None,
            budget.prompt_limit if budget else None,
            counted=counted,
        )

    def check_new_request(self, text: str) -> str | None:
        """Why a new request from the person cannot fit even alone (with the smallest fixed
        part a request of the thread may have and a summary), or None if it can."""
        if self.budget is None:
            return None
        fixed = self.smallest_fixed()
        question = self.router_question()
        tokens = fixed + self.budget.summary_tokens
        tokens += estimate_message(HumanMessage(text)) + estimate_text(question)
        if tokens <= self.budget.prompt_limit:
            return None
        return too_big(tokens, fixed, self.budget.context_length, self.budget.prompt_limit)

    def smallest_fixed(self) -> int:
        """The smallest fixed part a request may have: a small context's smallest route."""
        if not self.small_context:
            return self.fixed_tokens
        return min(self.shape_fixed(shape) for shape in self.small_shapes())

    # -- compaction ----------------------------------------------------------------------------

    async def compact(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        *,
        why: str,
        before: int | None = None,
        target: int | None = None,
        shape: Shape | None = None,
        limit: int | None = None,
    ) -> Summary | None:
        """A new summary standing for the older turns (and the old summary), or None when
        there is nothing older to summarise. The history is not changed. target: the
        tokens to bring the request under (core.context.budget.plan_compaction's default if None;
        0 summarises all it may). Sizes are the server's where it counted, else our
        estimates times the thread's ratio, so the target is reached by the server's count.
        limit: what a request may hold by our estimate after an overflow (believed_limit),
        when it is less than the budget's prompt limit: the target is set below it."""
        shape = shape or self.default_shape
        budget = self.budget
        if budget is None:  # the context is unknown: keep about half of what is there
            request = self.request(messages, summary, shape=shape)
            size = max(self.estimate(request, messages, summary, shape), 1200)
            budget = Budget(size + 300, 300)
        visible = self.visible(messages, summary, result_cap=self.result_cap())
        shown = [message for _, message in visible]
        fixed = self.shape_fixed(shape)
        measure = self.measure(self.scale(messages))
        if target is None and limit is not None:
            target = budget.compaction_target(fixed, limit=limit)
        # In steps as large as they come (issue 43): everything the summary request sends is
        # summarised, so what is kept is the turn still going on, whatever the target.
        through = replied_through(shown) if why != "overflow" else 0
        plan = plan_compaction(
            shown, budget, fixed_tokens=fixed, target=target, measure=measure, through=through
        )
        if not plan.summarise:
            return None
        if before is None:
            before = self.estimate(
                self.request(messages, summary, shape=shape), messages, summary, shape
            )
        text = await self.summarise(
            visible,
            plan.summarise,
            summary,
            why,
            shape,
            limit=limit,
            scale=self.scale(messages),
            thread=messages,
        )
        upto = max(visible[i][0] for i in plan.summarise) + 1
        held = tuple(str(visible[i][1].id) for i in plan.keep if visible[i][0] < upto)
        made = Summary(
            text=text,
            upto=upto,
            held=held,
            made_at=len(messages),
            count=(summary.count if summary else 0) + 1,
            summarised=len(plan.summarise),
            kept=len(plan.keep),
            before=before,
            after=0,
            why=why,
        )

        def after_of(candidate: Summary) -> int:
            request = self.request(messages, candidate, shape=shape)
            return self.estimate(request, messages, candidate, shape)

        after = after_of(made)
        if after >= before:
            # The model's summary is longer than the turns it stands for: cut it to what
            # leaves the request smaller than before, or say only that turns were left out.
            room = before - (after - estimate_text(text)) - 1
            shrunk = shrunk_summary(text, room)
            if shrunk is None:
                return None
            made = Summary(**{**asdict(made), "text": shrunk})
            after = after_of(made)
            if after >= before:
                return None
        made = Summary(**{**asdict(made), "after": after})
        # The model's summary runs to its reply limit in real tokens, which our estimate of
        # its prose may put over the room kept for it: when that leaves the turn no room, a
        # shorter summary rather than no answer.
        try:
            self.fitting_request(messages, made, shape, limit=limit)
        except ContextTooSmall:
            return self.shorter_summary(messages, made, shape, limit) or made
        return made

    async def summarise(
        self,
        visible: list[tuple[int, BaseMessage]],
        summarised: Sequence[int],
        summary: Summary | None,
        why: str,
        shape: Shape | None = None,
        *,
        limit: int | None = None,
        scale: float = 1.0,
        thread: Sequence[AnyMessage] = (),
    ) -> str:
        """The model's summary of the summarised messages and the old summary.

        Asked within the conversation when that fits: the last request as it was sent (its
        tools, system prompt and messages, through the last reply, which the server's cache
        holds too), then the question, so the server reads only the question (issue 43).
        The summary may then also tell of turns kept after it; it is cut to its room all the
        same. Else, and after an overflow, on its own, with the messages as a clipped
        transcript.
        """
        shape = shape or self.default_shape
        reply = self.budget.summary_tokens if self.budget else summary_tokens_for(4096)
        prefix = [message for _, message in visible[: max(summarised) + 1]]
        if why != "overflow":
            said = replied_through([m for _, m in visible])
            sent = [m for _, m in visible[: max(max(summarised) + 1, said)]]
            history = self.as_history(sent, shape)
            request = in_conversation(self.system_text(summary, shape), history)
            # By the server's count of the last request where it has one: our estimate of
            # the tools alone is far over it on a small context, and sent the summary on its
            # own, a new prompt the server read whole.
            tokens = self.estimate(request, thread, summary, shape)
            room = self.budget.context_length - reply if self.budget else None
            if room is None or tokens <= room:
                try:
                    asked = shape.replying(choice="none", limit=reply, schema=None)
                    response = await self.bound(asked).ainvoke(
                        request, config={"tags": [TAG_NOSTREAM]}
                    )
                    return summary_text(separate_reasoning(response), prefix, reply)
                except Exception as error:
                    if not is_context_overflow(server_words(error)):
                        raise
        # The transcript gets what a request may hold, less the instructions and the old
        # summary (no tools are sent with it), by the server's count: scaled by the thread's
        # ratio, and after an overflow held to what a request may hold by its count.
        holds = limit if limit is not None else self.budget.prompt_limit if self.budget else None
        room = int(((holds if holds is not None else 4 * reply) - reply) / max(scale, 1.0))
        alone = standalone(summary, [visible[i][1] for i in summarised], room)
        # Not a reply to show: the front-end streams only what it should.
        model = self.model().bind(max_tokens=reply)
        response = await model.ainvoke(alone, config={"tags": [TAG_NOSTREAM]})
        return summary_text(separate_reasoning(response), prefix, reply)


LEFT_OUT = "(Earlier turns were left out to fit the model's context; no summary of them fits.)"


def replied_through(shown: Sequence[BaseMessage]) -> int:
    """How many of the messages a request sends come before what is new since the model's
    last reply: through that reply and the results of its calls. The server's cache holds
    them, so a summary request sends them as they are."""
    end = max((i + 1 for i, m in enumerate(shown) if isinstance(m, AIMessage)), default=0)
    while end < len(shown) and isinstance(shown[end], ToolMessage):
        end += 1
    return end


def shrunk_summary(text: str, room: int) -> str | None:
    """The summary cut to about `room` tokens at a word, marked as cut; the short note that
    turns were left out when not even a few sentences fit; None when nothing fits."""
    if room < estimate_text(LEFT_OUT):
        return None
    if room < 40:
        return LEFT_OUT
    keep = (room - 2) * CHARS_PER_TOKEN
    cut = text[:keep].rsplit(" ", 1)[0].rstrip()
    return f"{cut} […]"


def shortened(message: ToolMessage, tool: str) -> ToolMessage:
    """An earlier turn's tool result as later requests send it: its head, and a note that
    the rest is left out and how to see it again (the stored message stays whole)."""
    text = content_text(message.content)
    if len(text) <= 2 * OLD_RESULT_HEAD:
        return message
    head = text[:OLD_RESULT_HEAD]
    cut = max(head.rfind("\n"), head.rfind(" "))
    head = head[:cut] if cut > OLD_RESULT_HEAD // 2 else head
    left = len(text) - len(head)
    note = f"\n[fsagent: {left:,} more characters left out; call {tool} again for all]"
    return message.model_copy(update={"content": head + note})


def tool_name(schema: dict[str, Any]) -> str:
    function = schema.get("function")
    return str(function.get("name") if isinstance(function, dict) else schema.get("name"))


def tool_tokens(tools: Sequence[dict[str, Any]]) -> int:
    return -(-len(schema_text(list(tools))) // SCHEMA_CHARS_PER_TOKEN) if tools else 0


def calls_by_id(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """call id -> the tool it called, over a history."""
    return {
        str(call["id"]): call["name"]
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }


def thread_of(messages: Sequence[AnyMessage]) -> str:
    """A name for a thread the keeper serves: its first message's id (ours, unique)."""
    return str(messages[0].id) if messages else ""


def announce_compaction(summary: Summary) -> None:
    """For a graph node's `send`: tell the front-end at once, as a custom stream event
    ({"compacted": summary}), before the compacted request is sent rather than when the
    step ends."""
    get_stream_writer()({COMPACTED: summary.as_state()})


def announce_notice(text: str) -> None:
    """For a graph node's `send`: a line of ours for the front-end ({"fsagent_notice": text})."""
    get_stream_writer()({NOTICE: text})


def answer_streamer(node: str) -> Callable[[str, str], None]:
    """For a graph node's `send`: a constrained reply's answer and reasoning as they stream,
    as custom stream events ({"fsagent_answer": {"node", "text", "reasoning"}})."""
    writer = get_stream_writer()

    def stream(text: str, reasoning: str) -> None:
        writer({ANSWER_TEXT: {"node": node, "text": text, "reasoning": reasoning}})

    return stream


def as_sent(
    message: AnyMessage | BaseMessage, result_cap: int | None, density: float | None = None
) -> BaseMessage:
    """A stored message as a request carries it."""
    if isinstance(message, HumanMessage):
        note = ROUTE_NOTES.get(str(message.additional_kwargs.get(ROUTE_KEY, "")))
        if not note:
            return message
        return HumanMessage(f"{content_text(message.content)}\n\n{note}", id=message.id)
    if isinstance(message, AIMessage):
        return without_reasoning(message)
    if isinstance(message, ToolMessage) and result_cap is not None:
        return clipped(message, result_cap, density)
    return message


def clipped(message: ToolMessage, cap: int, density: float | None = None) -> ToolMessage:
    """A result cut to about `cap` tokens, saying how much was left out and how to read on.
    density is the server's tokens a character, where it counted the result."""
    text = content_text(message.content)
    tokens = estimate_text(text) if density is None else math.ceil(len(text) * density)
    if tokens + MESSAGE_OVERHEAD <= cap:
        return message
    if density is None:
        keep = max(0, (cap - 40) * CHARS_PER_TOKEN)
    else:
        keep = max(0, int((cap - 40) / max(density, 1e-6)))
    left = len(text) - keep
    note = (
        f"\n[fsagent: {left:,} more characters of this result were left out to fit the "
        "model's context; read a file in parts with start_line and end_line]"
    )
    return message.model_copy(update={"content": text[:keep] + note})


def with_route(message: HumanMessage, route: str) -> HumanMessage:
    """The person's message, marked with the route the router gave it (stored: later
    requests send it with the same note)."""
    return message.model_copy(
        update={"additional_kwargs": {**message.additional_kwargs, ROUTE_KEY: route}}
    )
