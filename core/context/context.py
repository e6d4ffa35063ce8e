"""Every model request of a thread, built to fit the model's context and to extend the request
before it byte for byte.

A request is, in this order:

- the tools: the same schemas in every request of the thread, whatever the route
  (core.tools.tool_schemas); a chat template puts them before the conversation, so a changed
  list would make the server process the whole prompt again;
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
usage) is the truth, and only the messages after that reply are estimated (core.context.budget).
Past the budget's mark the older turns are replaced, in what is sent, by a summary the model
writes; the summary is stored in the thread's state and reused by every later request, after
a restart too, until the next compaction. The stored history is never changed. A request the
server refuses as too long is compacted and sent once more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM

from core.context.budget import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD,
    SUMMARY_PREFIX,
    SUMMARY_TOKENS,
    WHAT_TO_DO,
    Budget,
    default_max_tokens,
    estimate_message,
    estimate_messages,
    estimate_text,
    is_context_overflow,
    overflow_sizes,
    plan_compaction,
)
from core.context.prompts import ROUTE_NOTES, ROUTE_QUESTION, SYSTEM_PROMPT
from core.context.replies import separate_reasoning, without_reasoning
from core.context.server_errors import server_words
from core.context.summary import Summary, in_conversation, standalone, summary_text, trusted_replies
from core.context.text_calls import read_text_calls
from core.errors import ContextTooSmall
from core.threads.messages import content_text, messages_for_model
from core.tools.tool_schemas import schema_text

ROUTE_KEY = "fsagent_route"  # a person's message's additional_kwargs: the route it was given
COMPACTED = "compacted"  # the custom stream event of a compaction

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


@dataclass(frozen=True)
class Sent:
    """A reply, and the summary the request was compacted with if it was."""

    response: AIMessage
    compacted: Summary | None


class ContextKeeper:
    """Builds a thread's requests, sends them, and keeps them within the context.

    model makes the chat model (it is built at the first prompt); tools are the schemas every
    request offers. budget is None while the context length is unknown: then nothing is
    compacted until the server refuses a request and names its context.
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
    ) -> None:
        self.model = model
        # Read tool calls a model wrote as text into real ones (core.context.text_calls).
        self.text_calls = text_calls
        self.tool_names = frozenset(tool_name(schema) for schema in tools)
        self.tools = tools
        self.budget = budget
        self._max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.tool_tokens = -(-len(schema_text(tools)) // SCHEMA_CHARS_PER_TOKEN) if tools else 0
        # The server's count of the fixed part less our estimate of it, once a reply's usage
        # says (learn_fixed): every thread of the agent sends the same fixed part.
        self.fixed_error: int | None = None
        self._bound: dict[str, Any] = {}

    # -- the request ---------------------------------------------------------------------------

    @property
    def max_tokens(self) -> int | None:
        """The reply limit every request carries: the budget's, once the context is known
        (it may be learnt from an overflow answer)."""
        return self.budget.max_tokens if self.budget is not None else self._max_tokens

    @property
    def estimated_fixed(self) -> int:
        """The estimated fixed part: tools and the system prompt without a summary."""
        return self.tool_tokens + MESSAGE_OVERHEAD + estimate_text(self.system_prompt)

    @property
    def fixed_tokens(self) -> int:
        """The fixed part as the server counts it once a reply said, else the estimate."""
        return self.estimated_fixed + (self.fixed_error or 0)

    def learn_fixed(self, request: Sequence[BaseMessage], response: AIMessage) -> None:
        """Learn the fixed part's real size from the first reply to a request that is mostly
        the fixed part (a thread's first router request): the server's usage.prompt_tokens
        less our estimate of the few messages. Tool schemas are where the estimate is least
        sure (real templates add their own tool instructions; tokenizers differ)."""
        usage = response.usage_metadata
        counted = int(usage.get("input_tokens") or 0) if usage else 0
        if self.fixed_error is not None or counted <= 0:
            return
        whole = self.tool_tokens + estimate_messages(request)
        conversation = whole - self.estimated_fixed
        if conversation > self.estimated_fixed // 4:
            return  # mostly conversation: its own estimate's error would swamp the count
        self.fixed_error = counted - whole

    def system_text(self, summary: Summary | None) -> str:
        if summary is None:
            return self.system_prompt
        return f"{self.system_prompt}\n\n{SUMMARY_PREFIX}\n{summary.text}"

    def visible(
        self, messages: Sequence[AnyMessage], summary: Summary | None, *, result_cap: int | None
    ) -> list[tuple[int, BaseMessage]]:
        """The history the summary does not cover, each message as it is sent, with its
        index in the history."""
        old = self.old_results(messages, summary, result_cap)
        calls = {
            call["id"]: call["name"]
            for message in messages
            if isinstance(message, AIMessage)
            for call in message.tool_calls
        }
        shown: list[tuple[int, BaseMessage]] = []
        for index, message in enumerate(messages):
            if summary is not None and index < summary.upto and message.id not in summary.held:
                continue
            if index in old and isinstance(message, ToolMessage):
                tool = calls.get(message.tool_call_id) or message.name or "the tool"
                shown.append((index, shortened(message, tool)))
            else:
                shown.append((index, as_sent(message, result_cap)))
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
            used += estimate_message(as_sent(message, result_cap))
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
    ) -> list[BaseMessage]:
        cap = self.result_cap() if result_cap is None else result_cap
        history = [message for _, message in self.visible(messages, summary, result_cap=cap)]
        request: list[BaseMessage] = [SystemMessage(self.system_text(summary))]
        request += messages_for_model(history)  # type: ignore[arg-type]
        if question is not None and isinstance(request[-1], HumanMessage):
            latest = request[-1]
            request[-1] = HumanMessage(
                f"{content_text(latest.content)}\n\n{question}", id=latest.id
            )
        return request

    def result_cap(self) -> int | None:
        """The most tokens one tool result may take in a request: what the prompt limit
        leaves after the fixed part, a summary and the turn's own messages."""
        if self.budget is None:
            return None
        # The estimated fixed part, not the learnt one: what is sent must not change with it.
        return max(100, self.budget.room(self.estimated_fixed) * 9 // 10)

    def estimate(
        self,
        request: Sequence[BaseMessage],
        messages: Sequence[AnyMessage],
        summary: Summary | None,
    ) -> int:
        """The request's prompt tokens: the server's count up to the last reply it made with
        this summary, and estimates for what came after.

        A reply's count holds only while what came before it is sent as it was then: an
        earlier result shortened since (old_results) makes it a count of a longer prompt,
        so the latest reply with nothing shortened before it is the one trusted."""
        trusted = trusted_replies(messages, summary)
        cap = self.result_cap()
        old = self.old_results(messages, summary, cap)
        where = {str(message.id): index for index, message in enumerate(messages)}
        for position in range(len(request) - 1, 0, -1):
            message = request[position]
            usage = getattr(message, "usage_metadata", None)
            if isinstance(message, AIMessage) and message.id in trusted and usage:
                made = where.get(str(message.id), 0)
                then = self.old_results(messages[:made], summary, cap)
                if any(index < made for index in old - then):
                    continue  # shortened since this reply was made
                known = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
                return known + estimate_messages(request[position + 1 :])
        return self.tool_tokens + (self.fixed_error or 0) + estimate_messages(request)

    # -- sending -------------------------------------------------------------------------------

    async def send(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        *,
        route_question: bool = False,
        on_compacted: Callable[[Summary], None] | None = None,
    ) -> Sent:
        """One request with the thread's history: the router's (its question after the
        latest words, no tool may be called) or an agent step's. on_compacted hears of a
        compaction as soon as it is made, before the request is sent."""
        question = ROUTE_QUESTION if route_question else None
        choice = "none" if route_question else "auto"
        # The router needs one word: a small model given the agent's reply limit answered
        # the whole request there, before the agent's request answered it again.
        limit = ROUTE_MAX_TOKENS if route_question else None
        compacted: Summary | None = None
        request = self.request(messages, summary, question=question)
        tokens = self.estimate(request, messages, summary)
        if self.budget is not None and self.budget.needs_compaction(tokens):
            made = await self.compact(messages, summary, why="budget", before=tokens)
            if made is not None:
                summary = compacted = made
                if on_compacted is not None:
                    on_compacted(made)
        request = self.fitting_request(messages, summary, question)
        try:
            response = await self.bound(choice, limit or self.max_tokens).ainvoke(request)
        except Exception as error:
            words = server_words(error)
            if not is_context_overflow(words):
                raise
            self.learn_context(words)
            made = await self.compact(
                messages, summary, why="overflow", before=self.estimate(request, messages, summary)
            )
            if made is None:
                tokens = self.estimate(request, messages, summary)
                raise ContextTooSmall(self.too_small(tokens)) from error
            summary = compacted = made
            if on_compacted is not None:
                on_compacted(made)
            request = self.fitting_request(messages, summary, question)
            response = await self.bound(choice, limit or self.max_tokens).ainvoke(request)
        self.learn_fixed(request, response)
        reply = separate_reasoning(response)
        if self.text_calls and not route_question:
            reply = read_text_calls(reply, self.tool_names)
        return Sent(reply, compacted)

    def fitting_request(
        self, messages: Sequence[AnyMessage], summary: Summary | None, question: str | None
    ) -> list[BaseMessage]:
        """The request, with tool results cut harder if it must; ContextTooSmall if even
        that does not fit."""
        request = self.request(messages, summary, question=question)
        if self.budget is None:
            return request
        cap = self.result_cap()
        tokens = self.estimate(request, messages, summary)
        while tokens > self.budget.prompt_limit and cap is not None and cap > 100:
            cap //= 2
            request = self.request(messages, summary, question=question, result_cap=cap)
            tokens = self.estimate(request, messages, summary)
        if tokens > self.budget.prompt_limit:
            raise ContextTooSmall(self.too_small(tokens))
        return request

    def bound(self, tool_choice: str, max_tokens: int | None = None) -> Any:
        """The model with this thread's tools, made once per choice: every request offers the
        same tools, the router's too (it may not call them)."""
        key = f"{tool_choice}:{max_tokens}"
        if key not in self._bound:
            model = self.model()
            runnable: Any = model.bind_tools(self.tools, tool_choice=tool_choice)
            if max_tokens is not None:
                runnable = runnable.bind(max_tokens=max_tokens)
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

    def too_small(self, tokens: int) -> str:
        budget = self.budget
        if budget is None:
            return (
                f"this request does not fit the model's context: it needs ~{tokens} tokens "
                f"({self.fixed_tokens} of them system prompt and tools): {WHAT_TO_DO}"
            )
        return (
            f"this request does not fit the model's context: it needs ~{tokens} tokens "
            f"({self.fixed_tokens} of them system prompt and tools) but the context is "
            f"{budget.context_length} tokens with {budget.max_tokens} kept for the reply: "
            f"{WHAT_TO_DO}"
        )

    def check_new_request(self, text: str) -> str | None:
        """Why a new request from the person cannot fit even alone (with the fixed part and
        a summary), or None if it can."""
        if self.budget is None:
            return None
        tokens = self.fixed_tokens + SUMMARY_TOKENS
        tokens += estimate_message(HumanMessage(text)) + estimate_text(ROUTE_QUESTION)
        if tokens <= self.budget.prompt_limit:
            return None
        return self.too_small(tokens)

    # -- compaction ----------------------------------------------------------------------------

    async def compact(
        self,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        *,
        why: str,
        before: int | None = None,
        target: int | None = None,
    ) -> Summary | None:
        """A new summary standing for the older turns (and the old summary), or None when
        there is nothing older to summarise. The history is not changed. target: the
        tokens to bring the request under (core.context.budget.plan_compaction's default if None;
        0 summarises all it may)."""
        budget = self.budget
        if budget is None:  # the context is unknown: keep about half of what is there
            request = self.request(messages, summary)
            size = max(self.estimate(request, messages, summary), 4 * SUMMARY_TOKENS)
            budget = Budget(size + SUMMARY_TOKENS, SUMMARY_TOKENS)
        visible = self.visible(messages, summary, result_cap=self.result_cap())
        shown = [message for _, message in visible]
        fixed = self.fixed_tokens
        plan = plan_compaction(shown, budget, fixed_tokens=fixed, target=target)
        if not plan.summarise:
            return None
        if before is None:
            before = self.estimate(self.request(messages, summary), messages, summary)
        text = await self.summarise(visible, plan.summarise, summary, why)
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
        after = self.estimate(self.request(messages, made), messages, made)
        if after >= before:
            # The model's summary is longer than the turns it stands for: cut it to what
            # leaves the request smaller than before, or say only that turns were left out.
            room = before - (after - estimate_text(text)) - 1
            shrunk = shrunk_summary(text, room)
            if shrunk is None:
                return None
            made = Summary(**{**asdict(made), "text": shrunk})
            after = self.estimate(self.request(messages, made), messages, made)
            if after >= before:
                return None
        return Summary(**{**asdict(made), "after": after})

    async def summarise(
        self,
        visible: list[tuple[int, BaseMessage]],
        summarised: Sequence[int],
        summary: Summary | None,
        why: str,
    ) -> str:
        """The model's summary of the summarised messages and the old summary.

        Asked within the conversation when that fits (the server's cache already holds that
        prefix, so only the question is new); else, and after an overflow, on its own, with
        the messages as a clipped transcript.
        """
        prefix = [message for _, message in visible[: max(summarised) + 1]]
        if why != "overflow":
            request = in_conversation(self.system_text(summary), prefix)
            tokens = self.tool_tokens + estimate_messages(request)
            room = self.budget.context_length - SUMMARY_TOKENS if self.budget else None
            if room is None or tokens <= room:
                try:
                    response = await self.bound("none", SUMMARY_TOKENS).ainvoke(
                        request, config={"tags": [TAG_NOSTREAM]}
                    )
                    return summary_text(separate_reasoning(response), prefix)
                except Exception as error:
                    if not is_context_overflow(server_words(error)):
                        raise
        # The transcript gets what a request may hold, less the instructions and the old
        # summary (no tools are sent with it).
        limit = (self.budget.prompt_limit if self.budget else 4 * SUMMARY_TOKENS) - SUMMARY_TOKENS
        request = standalone(summary, [visible[i][1] for i in summarised], limit)
        # Not a reply to show: the front-end streams only what it should.
        model = self.model().bind(max_tokens=SUMMARY_TOKENS)
        response = await model.ainvoke(request, config={"tags": [TAG_NOSTREAM]})
        return summary_text(separate_reasoning(response), prefix)


LEFT_OUT = "(Earlier turns were left out to fit the model's context; no summary of them fits.)"


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


def announce_compaction(summary: Summary) -> None:
    """For a graph node's `send`: tell the front-end at once, as a custom stream event
    ({"compacted": summary}), before the compacted request is sent rather than when the
    step ends."""
    get_stream_writer()({COMPACTED: summary.as_state()})


def as_sent(message: AnyMessage, result_cap: int | None) -> BaseMessage:
    """A stored message as a request carries it."""
    if isinstance(message, HumanMessage):
        note = ROUTE_NOTES.get(str(message.additional_kwargs.get(ROUTE_KEY, "")))
        if not note:
            return message
        return HumanMessage(f"{content_text(message.content)}\n\n{note}", id=message.id)
    if isinstance(message, AIMessage):
        return without_reasoning(message)
    if isinstance(message, ToolMessage) and result_cap is not None:
        return clipped(message, result_cap)
    return message


def clipped(message: ToolMessage, cap: int) -> ToolMessage:
    """A result cut to about `cap` tokens, saying how much was left out and how to read on."""
    text = content_text(message.content)
    if estimate_text(text) + MESSAGE_OVERHEAD <= cap:
        return message
    keep = max(0, (cap - 40) * CHARS_PER_TOKEN)
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
