"""core.context.counts: the server's counts of a thread's requests (a reply's usage, the ratio
it gives our estimates, llama.cpp's /tokenize), against the stand-in (tests/fake_llm.py)."""

from __future__ import annotations

import asyncio
import math

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from core.context.budget import Budget, estimate_message, summary_tokens_for
from core.context.chat_model import make_chat_model
from core.context.context import ContextKeeper
from core.context.counts import SCALE_KEY, ServerCounter, ratio, thread_scale
from fake_llm import FakeLLM, text, tokenize


def test_a_ratio_is_read_only_from_a_sample_and_never_below_one() -> None:
    assert ratio(900, 300) == 3.0 and ratio(150, 300) == 1.0
    # Too few tokens estimated to judge by: a turn of short messages, where the template's
    # own tokens around each message are most of what the server counted.
    assert ratio(160, 82) is None
    assert ratio(10_000, 300) == 6.0  # an estimate that far off is not believed further
    replies: list[BaseMessage] = [
        AIMessage("a", additional_kwargs={SCALE_KEY: 2.5}),
        HumanMessage("b"),
        AIMessage("c"),
    ]
    assert thread_scale(replies) == 2.5 and thread_scale([]) == 1.0


def test_a_reply_keeps_the_ratio_and_the_next_estimate_is_scaled_by_it() -> None:
    cjk = "日本語の文章です。" * 120  # 1,080 characters: ~360 tokens by our estimate, 1,080 real
    with FakeLLM([text("OK.")], flavour="llamacpp", context=8192) as llm:
        chat = make_chat_model(llm.base_url, "fake-model", max_tokens=64)
        keep = ContextKeeper(lambda: chat, [], budget=Budget.for_context(8192))
        history: list[BaseMessage] = [HumanMessage(cjk, id="h0")]
        sent = asyncio.run(keep.send(history, None))
        counted = llm.cache_stats[0].prompt_tokens
    found = sent.response.additional_kwargs[SCALE_KEY]
    assert 2.0 < found <= 3.2
    later: list[BaseMessage] = [*history, sent.response, HumanMessage(cjk, id="h1")]
    request = keep.request(later, None)
    # The new message's estimate times the thread's ratio; the rest the server's count.
    usage = sent.response.usage_metadata
    assert usage is not None and usage["input_tokens"] == counted
    known = usage["input_tokens"] + usage["output_tokens"]
    assert keep.estimate(request, later, None) == known + math.ceil(
        estimate_message(request[-1]) * found
    )


def test_llama_cpp_counts_text_with_its_own_tokenizer() -> None:
    text = "日本語" * 100
    with FakeLLM([], flavour="llamacpp") as llm:
        counter = ServerCounter(llm.base_url, "llamacpp")
        assert asyncio.run(counter.count(text)) == len(tokenize(text)) == 300
    # Nowhere else: no request is made.
    elsewhere = ServerCounter("http://127.0.0.1:9/v1", "lmstudio")
    assert asyncio.run(elsewhere.count(text)) is None
    with FakeLLM([], flavour="openai") as llm:
        gone = ServerCounter(llm.base_url, "llamacpp")  # a proxy without /tokenize
        assert asyncio.run(gone.count(text)) is None and not gone.available


def test_a_small_context_keeps_a_smaller_room_for_its_summary() -> None:
    assert summary_tokens_for(2048) == 170 and summary_tokens_for(4096) == 300
    assert summary_tokens_for(512) == 96 and summary_tokens_for(131072) == 300
    assert Budget.for_context(2048).room(900) == 2048 - 256 - 900 - 170
