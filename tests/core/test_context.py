"""core.context.context, core.tools.tool_schemas and core.context.replies: what a request
holds, against our real
MCP server's tools and the stand-in server's tokenizer and prompt cache."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from core.context.budget import SUMMARY_PREFIX, Budget, estimate_messages
from core.context.chat_model import make_chat_model
from core.context.context import ROUTE_KEY, ContextKeeper
from core.context.prompts import ROUTE_NOTES, ROUTE_QUESTION, SYSTEM_PROMPT
from core.context.reasoning import ThinkSplitter, split_reasoning
from core.context.replies import REASONING_KEY, mark_cut, separate_reasoning
from core.context.summary import Summary
from core.context.text_calls import ReplyStream, Shown
from core.tools.merged_tools import FOLDS
from core.tools.server_process import start_server, stop_server
from core.tools.tool_groups import ALLOWED_TOOLS
from core.tools.tool_schemas import HIDDEN_PARAMETERS, NOT_OFFERED, offered_tools
from core.tools.tools import open_tools
from fake_llm import FakeLLM, render_prompt, reply, text, tokenize
from local_model import LocalModel, request_kind


async def load_schemas(root: Path, read_only: bool) -> tuple[list[dict], list[dict]]:
    """(offered schemas, the server's own) of our MCP server."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    process = await start_server([root], read_only=read_only, verbose=False)
    try:
        async with open_tools(process) as tools:
            full = [convert_to_openai_tool(tool) for tool in tools]
            return offered_tools(tools, ALLOWED_TOOLS if read_only else None), full
    finally:
        await stop_server(process)


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[dict], list[dict]]]:
    root = tmp_path_factory.mktemp("root")

    async def both() -> dict[str, tuple[list[dict], list[dict]]]:
        return {
            "all": await load_schemas(root, read_only=False),
            "read": await load_schemas(root, read_only=True),
        }

    return asyncio.run(both())


def fixed_part(tools: list[dict]) -> int:
    """The stand-in's token count of the tools and the system prompt, before any message."""
    request = {"tools": tools, "messages": [{"role": "system", "content": SYSTEM_PROMPT}]}
    return len(tokenize(render_prompt(request))) - len(tokenize("<|assistant|>\n"))


# The stand-in's tokens against a real tokenizer and template: a real llama.cpp (the Hermes
# tool-use template, SmolLM2's tokenizer; bench/real_fixed.py) counted 982 tokens for the
# fixed part with every tool that the stand-in counts as 960 (issue 30, 2026-12-02).
REAL_PER_STAND_IN = 982 / 960


def test_the_fixed_part_is_at_most_1000_real_tokens_with_every_tool(schemas: dict) -> None:
    from core.approval.questions import ask_person_tool
    from core.tools.tool_schemas import model_tool

    offered, full = schemas["all"]
    read_offered, _ = schemas["read"]
    every = [*offered, model_tool(ask_person_tool())]  # what the agent offers
    assert len(every) == 7
    assert fixed_part(every) * REAL_PER_STAND_IN <= 1000 < 2048 // 2
    assert fixed_part(read_offered) * REAL_PER_STAND_IN < 600
    # What the server describes in full costs far more: the old fixed part.
    assert fixed_part(full) > 3000


def test_offered_schemas_are_short_and_a_subset_of_the_servers(schemas: dict) -> None:
    offered, full = schemas["all"]
    by_name = {tool["function"]["name"]: tool["function"] for tool in full}
    names = [tool["function"]["name"] for tool in offered]
    assert not set(names) & NOT_OFFERED
    assert set(names) | NOT_OFFERED == set(by_name)
    assert names == [n for n in by_name if n in names]  # the server's order, every time
    folds = {fold.tool: fold for fold in FOLDS}
    for tool in offered:
        function = tool["function"]
        assert "\n" not in function["description"] and len(function["description"]) <= 70
        schema = json.dumps(function["parameters"])
        assert not any(f'"{hidden}"' in schema for hidden in HIDDEN_PARAMETERS)
        assert '"title"' not in schema and '"null"' not in schema
        server = by_name[function["name"]]["parameters"]
        required = set(server.get("required", []))
        properties = set(server["properties"])
        if function["name"] in folds:  # a folded form: its own arguments and its fold's
            fold = folds[function["name"]]
            other = by_name[fold.server_tool]["parameters"]
            assert function["parameters"]["properties"][fold.argument] is not None
            properties |= {fold.argument}
            required &= set(other.get("required", []))  # only what both forms need
        assert set(function["parameters"]["properties"]) <= properties
        assert set(function["parameters"].get("required", [])) == required
    read_names = [tool["function"]["name"] for tool in schemas["read"][0]]
    assert set(read_names) <= ALLOWED_TOOLS and "read_file" in read_names


def test_every_tool_is_offered_and_on_a_small_context_each_is_on_a_route_that_runs_it(
    schemas: dict,
) -> None:
    from core.approval.questions import ask_person_tool
    from core.tools.tool_groups import SMALL_CONTEXT_TOOLS, in_group
    from core.tools.tool_schemas import model_tool

    offered, _ = schemas["all"]
    every = [*offered, model_tool(ask_person_tool())]
    names = {tool["function"]["name"] for tool in every}
    # Nothing only one tool does is left out: a rename, a find by name (list_directory's
    # pattern), a change in place (write_file's edits), a folder's delete.
    assert {"move", "list_directory", "write_file", "delete", "ask_person"} <= names
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in offered}
    assert "recursive" in by_name["delete"]["properties"]
    assert "pattern" in by_name["list_directory"]["properties"]
    assert "edits" in by_name["write_file"]["properties"]
    # On a small context each route offers a few, and together they offer every tool, each
    # on a route that lets it run.
    assert set().union(*SMALL_CONTEXT_TOOLS.values()) == names
    for route, tools in SMALL_CONTEXT_TOOLS.items():
        assert all(in_group(route, tool) for tool in tools), route


# -- replies -------------------------------------------------------------------------------


def split_stream(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    reasoning = answer = ""
    for piece in pieces:
        thought, said = splitter.feed(piece)
        reasoning, answer = reasoning + thought, answer + said
    thought, said = splitter.flush()
    return reasoning + thought, answer + said


def test_think_tags_are_told_apart_however_the_stream_cuts_them() -> None:
    whole = "  <think>weigh it</think>\n\nThe answer."
    for size in (1, 2, 3, 5, 8, len(whole)):
        pieces = [whole[i : i + size] for i in range(0, len(whole), size)]
        assert split_stream(pieces) == ("weigh it", "The answer.")
    assert split_stream(["<thi", "nk>cut off while thinki", "ng"]) == ("cut off while thinking", "")
    assert split_stream(["Plain ", "<b>text</b>"]) == ("", "Plain <b>text</b>")
    assert split_stream(["<", "p>"]) == ("", "<p>")


def shown_stream(pieces: list[str], *, hold_calls: bool = True) -> list[Shown]:
    stream = ReplyStream(plain=False, hold_calls=hold_calls)
    return [stream.feed(piece) for piece in pieces] + [stream.finish(read_as_calls=False)]


def test_a_first_reply_with_no_think_tag_streams_as_unsure_and_is_taken_back_as_what_it_was():
    # The answer: shown for now as it comes, then taken back once, and given whole.
    answer = shown_stream(["Hello", " there", ", friend."])
    assert [s.unsure for s in answer] == ["Hello", " there", ", friend.", ""]
    assert [s.take_back for s in answer] == [False, False, False, True]
    assert "".join(s.answer for s in answer) == "Hello there, friend."
    # Reasoning with a bare </think>: taken back when the tag comes, split across pieces.
    thought = shown_stream(["I should ", "greet them.</th", "ink>Hello ", "there."])
    assert "".join(s.unsure for s in thought) == "I should greet them."
    assert [s.take_back for s in thought] == [False, False, True, False, False]
    assert "".join(s.reasoning for s in thought) == "I should greet them."
    assert "".join(s.answer for s in thought) == "Hello there."


def test_unsure_text_never_shows_a_call_written_as_text():
    call = '<tool_call>{"name": "write_file", "arguments": {"path": "a"}}</tool_call>'
    held = shown_stream([call[:12], call[12:]])
    assert all(s.unsure == "" and not s.take_back for s in held)
    # Without the hold (--no-text-calls) it is only text, shown for now like any other.
    assert shown_stream([call], hold_calls=False)[0].unsure == call


def test_a_model_known_to_be_plain_streams_its_answer_as_the_answer():
    stream = ReplyStream(plain=True, hold_calls=True)
    assert stream.feed("Hello") == Shown(answer="Hello")
    assert stream.finish(read_as_calls=False) == Shown()


def test_a_plain_model_that_closes_a_think_block_after_all_is_told_once():
    # What streamed before the tag was shown as the answer; what is left of it is reasoning,
    # as split_reasoning stores it, and late_close says so once.
    stream = ReplyStream(plain=True, hold_calls=True)
    pieces = ("They say ", "thanks.</think>You're", " welcome.")
    shown = [stream.feed(p) for p in pieces] + [stream.finish(read_as_calls=False)]
    assert "".join(s.answer for s in shown) == "They say You're welcome."
    assert "".join(s.reasoning for s in shown) == "thanks."
    assert [s.late_close for s in shown] == [False, True, False, False]
    assert split_reasoning("".join(pieces)) == ("They say thanks.", "You're welcome.")


def test_a_reply_keeps_its_reasoning_apart_and_a_cut_reply_runs_no_call() -> None:
    reply = AIMessage(
        "<think>hmm</think>Done.", additional_kwargs={REASONING_KEY: "streamed thought"}
    )
    separated = separate_reasoning(reply)
    assert separated.content == "Done."
    assert separated.additional_kwargs[REASONING_KEY] == "streamed thought\nhmm"
    call = {"name": "write_file", "args": {"path": "a", "content": "par"}, "id": "c1"}
    cut = mark_cut(AIMessage("", tool_calls=[call]), 64)
    assert cut.tool_calls == [] and cut.invalid_tool_calls[0]["id"] == "c1"
    assert cut.content == "[fsagent: this reply was cut off at the 64-token reply limit.]"


# -- the request ---------------------------------------------------------------------------


def keeper(budget: Budget | None = None, model: object = None) -> ContextKeeper:
    return ContextKeeper(lambda: model, [], budget=budget)  # type: ignore[arg-type,return-value]


def test_a_request_sends_notes_no_reasoning_and_results_that_fit() -> None:
    history: list[BaseMessage] = [
        HumanMessage("find milk", id="h1", additional_kwargs={ROUTE_KEY: "search"}),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "grep", "args": {"pattern": "milk"}, "id": "c1"}],
            additional_kwargs={REASONING_KEY: "I should grep."},
        ),
        ToolMessage("notes.md:1:milk\n" * 2000, tool_call_id="c1", id="t1"),
        AIMessage("In notes.md.", id="a2"),
        HumanMessage("thanks", id="h2"),
    ]
    keep = keeper(Budget.for_context(4096))
    # While its turn goes on, the result is cut only to what the context can hold.
    during = keep.request(history[:3], None)
    assert "more characters of this result were left out" in str(during[3].content)
    assert len(str(during[3].content)) < 3 * keep.budget.context_length  # type: ignore[union-attr]
    request = keep.request(history, None)
    assert request[0].content == SYSTEM_PROMPT
    assert request[1].content == f"find milk\n\n{ROUTE_NOTES['search']}"
    assert REASONING_KEY not in request[2].additional_kwargs
    # Once the turn is over, its head only, and how to see it all again.
    whole = "notes.md:1:milk\n" * 2000
    head, note = str(request[3].content).split("\n[fsagent: ")
    assert whole.startswith(head) and head.endswith("milk") and len(head) <= 120
    assert note == f"{len(whole) - len(head):,} more characters left out; call grep again for all]"
    assert history[2].content == whole  # the stored result is whole
    assert request[5].content == "thanks"
    # The same history makes the same request, every time.
    assert keep.request(history, None) == request
    # A summary stands for what it covers, in the system prompt; held messages stay.
    summary = Summary("They found milk.", 4, ("h1",), 5, 1, 3, 2, 900, 300, "budget")
    compacted = keep.request(history, summary)
    assert compacted[0].content == f"{SYSTEM_PROMPT}\n\n{SUMMARY_PREFIX}\nThey found milk."
    assert [m.id for m in compacted[1:]] == ["h1", "h2"]


def test_a_summary_from_another_version_is_ignored_not_fatal() -> None:
    assert Summary.from_state(None) is None
    assert Summary.from_state({"text": "x", "unknown": 1}) is None
    made = Summary("x", 3, ("h",), 4, 1, 2, 1, 10, 5, "budget")
    assert Summary.from_state(made.as_state()) == made


def test_compaction_summarises_older_turns_within_the_conversation() -> None:
    history: list[BaseMessage] = []
    for n in range(6):
        history += [HumanMessage(f"read note{n}.md " + "x" * 1500, id=f"h{n}"), AIMessage("ok")]
        history[-1].id = f"a{n}"
    model = LocalModel()
    with FakeLLM(model, flavour="llamacpp", context=4096) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=512)
        budget = Budget.for_context(4096, 512, threshold=0.75)
        keep = ContextKeeper(lambda: chat, [], budget=budget)
        sent = asyncio.run(keep.send(history, None))
        requests = llm.requests

    made = sent.compacted
    assert made is not None and made.why == "budget" and made.count == 1
    assert made.after < made.before and made.held == ()
    # Asked within the conversation: the summary request begins as the history does.
    [summary_request] = [r for r in requests if request_kind(r) == "summary"]
    assert summary_request["messages"][1]["content"].startswith("read note0.md")
    assert summary_request["max_tokens"] == 300
    # It sends every turn the server's cache holds, so its summary stands for them all, and
    # the request then sent holds the summary and the turn going on, under the limit.
    said = [m["content"] for m in summary_request["messages"][1:-1]]
    assert said == [m.content for m in history]
    final = requests[-1]
    assert final["messages"][0]["content"].endswith(model_summary(1, 6))
    kept = [m["content"][:13] for m in final["messages"] if m["role"] == "user"]
    assert kept == ["read note5.md"]
    assert llm.prompt_tokens(final) + 512 <= 4096


def test_no_summary_is_asked_for_when_the_latest_words_alone_cannot_fit() -> None:
    # The thread's ratio (3x, as a server counting CJK text more than our estimate) puts the
    # person's latest words alone over what a request may hold: a summary cannot help, so
    # none is asked for before the one line that says so (it was, on the budget path).
    from core.context.counts import SCALE_KEY
    from core.errors import ContextTooSmall

    history: list[BaseMessage] = []
    for n in range(3):
        history += [HumanMessage(f"note {n} " + "x" * 1500, id=f"h{n}"), AIMessage("ok")]
        history[-1].id = f"a{n}"
    history[-1].additional_kwargs[SCALE_KEY] = 3.0
    history.append(HumanMessage("y" * 4000, id="h3"))
    model = LocalModel()
    with FakeLLM(model, flavour="llamacpp", context=4096) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=512)
        keep = ContextKeeper(lambda: chat, [], budget=Budget.for_context(4096, 512))
        with pytest.raises(ContextTooSmall, match="does not fit the model's context"):
            asyncio.run(keep.send(history, None))
        requests = llm.requests

    assert requests == [] and model.summaries == []


def model_summary(number: int, files: int) -> str:
    names = ", ".join(f"note{n}.md" for n in range(files))
    return f"Summary {number}: the person asked to read {names}; each file was read and reported."


def test_the_server_count_is_trusted_over_the_estimate() -> None:
    usage = {"input_tokens": 3000, "output_tokens": 20, "total_tokens": 3020}
    history: list[BaseMessage] = [
        HumanMessage("hi", id="h1"),
        AIMessage("hello", id="a1", usage_metadata=usage),
        HumanMessage("and?", id="h2"),
    ]
    keep = keeper(Budget.for_context(8192))
    request = keep.request(history, None)
    assert keep.estimate(request, history, None) == 3020 + 4 + 2  # "and?" is estimated
    # A reply counted before the summary was written counts a request that is gone.
    summary = Summary("s", 0, (), 3, 1, 0, 3, 0, 0, "budget")
    assert keep.estimate(request, history, summary) < 200


def long_winded_model(text: str) -> object:
    """A model whose summaries run past what they stand for (langchain's own fake chat model:
    it ignores max_tokens, as a server that does not honour it would)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    return GenericFakeChatModel(messages=iter([AIMessage(text)] * 4))


def short_turns(count: int) -> list[BaseMessage]:
    history: list[BaseMessage] = []
    for n in range(count):
        history += [HumanMessage(f"hi {n}", id=f"h{n}"), AIMessage(f"hello {n}", id=f"a{n}")]
    return [*history, HumanMessage("and now?", id="last")]


def test_a_summary_longer_than_its_turns_is_cut_so_the_request_shrinks() -> None:
    # On a real llama.cpp run, 8 of 62 compactions grew the request they were meant to
    # shrink (issue 21: turn 8, ~2,370 -> ~2,592 tokens).
    history = short_turns(30)
    keep = keeper(Budget(2048, 256), long_winded_model("the person said hi again. " * 200))
    before = keep.estimate(keep.request(history, None), history, None)
    made = asyncio.run(keep.compact(history, None, why="overflow", before=before, target=0))
    assert made is not None
    assert made.after < before
    assert made.text.endswith("[…]")
    after = keep.estimate(keep.request(history, made), history, made)
    assert after == made.after < before


def test_a_summary_that_cannot_shrink_the_request_is_dropped() -> None:
    history = short_turns(2)  # fewer tokens than even a few words of summary
    keep = keeper(Budget(2048, 256), long_winded_model("the person said hi again. " * 200))
    before = keep.estimate(keep.request(history, None), history, None)
    made = asyncio.run(keep.compact(history, None, why="overflow", before=before, target=0))
    assert made is None


# -- earlier results, and the fixed part as the server counts it ---------------------------


def read_turns(count: int, size: int = 2048) -> list[BaseMessage]:
    """`count` turns that each read a file of `size` characters, then the next request."""
    history: list[BaseMessage] = []
    for n in range(count):
        call = {"name": "read_file", "args": {"path": f"n{n}.md"}, "id": f"c{n}"}
        history += [
            HumanMessage(f"read n{n}.md", id=f"h{n}"),
            AIMessage("", id=f"a{n}", tool_calls=[call]),
            ToolMessage(f"file {n}\n" + "words " * (size // 6), tool_call_id=f"c{n}", id=f"t{n}"),
            AIMessage(f"Read n{n}.md.", id=f"r{n}"),
        ]
    return [*history, HumanMessage(f"read n{count}.md", id=f"h{count}")]


def sent_results(request: list[BaseMessage]) -> list[int]:
    return [len(str(m.content)) for m in request if isinstance(m, ToolMessage)]


def test_earlier_results_are_shortened_newest_last_and_only_when_a_turn_starts() -> None:
    # No tools: the fixed part is ~90 tokens, so a quarter of the room on 4096 holds one 2 KB
    # result but not two.
    keep = keeper(Budget.for_context(4096))
    for turns in range(1, 6):
        history = read_turns(turns)
        lengths = sent_results(keep.request(history, None))
        assert lengths[-1] > 2000  # the latest earlier result is whole
        assert all(length < 200 for length in lengths[:-1])  # older ones are heads
        # Within the next turn nothing changes: its requests extend this one.
        call = {"name": "read_file", "args": {"path": "x.md"}, "id": "cx"}
        going = [*history, AIMessage("", id="ax", tool_calls=[call])]
        going += [ToolMessage("new " * 500, tool_call_id="cx", id="tx")]
        assert keep.request(going, None)[: len(lengths) * 4 + 2] == keep.request(history, None)
    # The stored messages are never changed.
    assert all(len(str(m.content)) > 2000 for m in history if isinstance(m, ToolMessage))
    # With room to spare (32K) every result is sent whole.
    roomy = keeper(Budget.for_context(32768))
    assert all(length > 2000 for length in sent_results(roomy.request(read_turns(5), None)))


def test_a_count_made_before_a_result_was_shortened_is_not_trusted() -> None:
    history = read_turns(2)
    # The server counted each reply's request; the last reply's request held t1 whole.
    history[1].usage_metadata = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
    history[3].usage_metadata = {"input_tokens": 800, "output_tokens": 5, "total_tokens": 805}
    history[5].usage_metadata = {"input_tokens": 850, "output_tokens": 10, "total_tokens": 860}
    history[7].usage_metadata = {"input_tokens": 1550, "output_tokens": 5, "total_tokens": 1555}
    keep = keeper(Budget.for_context(4096))
    request = keep.request(history, None)
    assert sent_results(request)[0] < 200  # t0 is sent as its head now
    # Trusted: the count of a1's request (nothing before a1 was shortened since), then the
    # estimates of what follows, t0 as it is sent now; not r1's count, which held t0 whole.
    after_a0 = request[3:]
    assert keep.estimate(request, history, None) == 110 + estimate_messages(after_a0)
    assert keep.estimate(request, history, None) < 1555


def test_the_fixed_part_is_learnt_from_the_first_reply(schemas: dict) -> None:
    offered, _ = schemas["all"]
    with FakeLLM([text("filesystem")], flavour="llamacpp", context=4096) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=512)
        keep = ContextKeeper(lambda: chat, offered, budget=Budget.for_context(4096))
        estimated = keep.fixed_tokens
        history: list[BaseMessage] = [HumanMessage("read notes.md", id="h0")]
        asyncio.run(keep.send(history, None, route_question=True))
        [request] = llm.requests
    counted = llm.prompt_tokens(request)
    assert keep.fixed_error is not None
    assert keep.fixed_tokens == estimated + keep.fixed_error
    # The whole request, estimated again, is now what the server counted.
    sent = keep.request(history, None, question=ROUTE_QUESTION)
    assert keep.tool_tokens + keep.fixed_error + estimate_messages(sent) == counted
    # What is sent never depends on it: results are cut by the estimated fixed part.
    assert keep.result_cap() == Budget.for_context(4096).room(keep.estimated_fixed) * 9 // 10


def test_the_fixed_part_is_not_learnt_from_a_request_that_is_mostly_conversation() -> None:
    with FakeLLM([text("Done.")], flavour="llamacpp", context=8192) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=512)
        keep = ContextKeeper(lambda: chat, [], budget=Budget.for_context(8192))
        asyncio.run(keep.send(read_turns(3), None))
    assert keep.fixed_error is None


# -- a server that counts more than our estimate (issue 43) ---------------------------------


def test_after_an_overflow_a_request_is_held_under_the_servers_count_with_room_to_spare() -> None:
    keep = keeper(Budget.for_context(4096))
    # LM Studio counted 4,097 tokens for a request we estimate at 1,643.
    limit = keep.believed_limit(4097, 1643)
    assert limit is not None
    assert limit * 4097 / 1643 <= 3584 / 1.05 + 1  # at the limit, 5% under by its count
    assert keep.believed_limit(1500, 1643) is None  # the estimate already holds the count
    assert keep.believed_limit(None, 1643) is None  # a refusal that gave no count


@pytest.mark.parametrize("counted", [False, True], ids=["nothing-counted", "counted-before"])
def test_the_summary_asked_for_after_an_overflow_fits_by_the_servers_count(counted: bool) -> None:
    history: list[BaseMessage] = []
    for n in range(6):
        history += [HumanMessage(f"read note{n}.md " + "x" * 1500, id=f"h{n}"), AIMessage("ok")]
        history[-1].id = f"a{n}"
    if counted:
        # The last reply's count is trusted, and the words after it are too few to read a
        # ratio from: the count's shortfall is the whole request's (believed_limit).
        usage = {"input_tokens": 2500, "output_tokens": 1, "total_tokens": 2501}
        history[-1] = AIMessage("ok", id="a5", usage_metadata=usage)
        history.append(HumanMessage("and now?", id="h6"))
    model = LocalModel()
    script = [reply(overflow=8000), *[model] * 3]
    with FakeLLM(script, flavour="llamacpp", context=4096) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=512)
        keep = ContextKeeper(lambda: chat, [], budget=Budget.for_context(4096, 512))
        estimated = keep.estimate(keep.request(history, None), history, None)
        sent = asyncio.run(keep.send(history, None))
        requests = llm.requests

    assert sent.compacted is not None and sent.compacted.why == "overflow"
    assert [request_kind(r) for r in requests] == ["agent", "summary", "agent"]
    # A server that counts 8,000 tokens for what we estimate at `estimated` counts each later
    # request at that ratio: by it, the summary request and the request sent again each fit
    # what a request may hold.
    summary, again = (ours(r) for r in requests[1:])
    assert summary * 8000 / estimated <= 4096 - 512
    assert again * 8000 / estimated <= 4096 - 512


def ours(request: dict) -> int:
    """Our estimate of a request of plain messages, as the stand-in received it."""
    messages = [HumanMessage(m["content"]) for m in request["messages"]]
    return estimate_messages(messages)
