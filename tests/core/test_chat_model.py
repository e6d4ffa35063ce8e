"""core.context.chat_model: what goes on the wire, request after request, against the stand-in.

Each message's JSON form is made once and sent again by the next request that repeats it
(the history grows within a turn). These tests hold it to what a server must receive: the
same body as a client that converts every message anew, and a changed history sent as it is
now, never as it was.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from core.context.chat_model import make_chat_model
from fake_llm import FakeLLM, text

WHOLE_FILE = "a line a person keeps\n" * 200  # a write call's arguments: the costly form


def write_call(n: int, content: str) -> AIMessage:
    args = {"path": f"notes{n}.md", "content": content}
    return AIMessage(
        "", id=f"ai{n}", tool_calls=[{"name": "write_file", "args": args, "id": f"c{n}"}]
    )


def turn(steps: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("write the notes", id="h0")]
    for n in range(steps):
        history += [write_call(n, WHOLE_FILE), ToolMessage("written", tool_call_id=f"c{n}")]
    return history


def sent(requests: list[list[BaseMessage]], replies: int) -> list[list[dict[str, Any]]]:
    """The messages each request carried, as the stand-in received them."""
    with FakeLLM([text("ok")] * replies) as llm:
        chat = make_chat_model(llm.base_url, "fake-model")

        async def send_all() -> None:
            for request in requests:
                await chat.ainvoke(request)

        asyncio.run(send_all())
        return [body["messages"] for body in llm.requests]


def test_a_growing_history_is_sent_as_a_fresh_client_sends_it() -> None:
    history = turn(4)
    # Request k repeats the first 2k+1 messages, as a turn's steps do.
    growing = [history[: 2 * k + 1] for k in range(1, 5)]
    reused = sent(growing, 4)
    each_fresh = [sent([request], 1)[0] for request in growing]
    assert reused == each_fresh
    assert reused[-1][1]["tool_calls"][0]["function"]["name"] == "write_file"


def test_a_message_made_anew_is_sent_as_it_is_now() -> None:
    first = turn(2)
    # The same ids, new objects with other content: an earlier result shortened, a call the
    # person edited. What was sent before must not stand in for them.
    second = [*first[:1], write_call(0, "edited\n"), ToolMessage("shortened", tool_call_id="c0")]
    second += first[3:]
    bodies = sent([first, second], 2)
    assert '"content": "edited\\n"' in bodies[1][1]["tool_calls"][0]["function"]["arguments"]
    assert bodies[1][2]["content"] == "shortened"
    assert bodies[1][3:] == bodies[0][3:]  # the untouched messages, the same as before
