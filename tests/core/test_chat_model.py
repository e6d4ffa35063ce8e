"""core.context.chat_model: what goes on the wire, request after request, against the stand-in.

Each message's JSON form is made once and sent again by the next request that repeats it
(the history grows within a turn). These tests hold it to what a server must receive: the
same body as a client that converts every message anew, and a changed history sent as it is
now, never as it was.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from core.context.chat_model import make_chat_model
from fake_llm import FakeLLM, reply, text
from terminal.interrupts import CtrlC, Interrupted

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


class CtrlCAsTheFirstWordsArrive(httpx2.AsyncBaseTransport):
    """The transport openai's client uses (httpx2's) to the stand-in, with Ctrl-C pressed (a
    real SIGINT, to the session's handler) while the bytes of the reply's first words are
    being read: the moment a person presses it while the model streams, in the one place a
    test can put it. It keeps what was read after that."""

    def __init__(self, llm: FakeLLM, words: bytes) -> None:
        self.llm = llm
        self.words = words
        self.inner = httpx2.AsyncHTTPTransport()
        self.pressed = False
        self.read_after: list[bytes] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Watched(self, response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Watched(httpx2.AsyncByteStream):
    def __init__(self, owner: CtrlCAsTheFirstWordsArrive, stream: Any) -> None:
        self.owner = owner
        self.stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self.stream:
            if self.owner.pressed:
                self.owner.read_after.append(part)
            elif self.owner.words in part:
                self.owner.pressed = True
                signal.raise_signal(signal.SIGINT)
                self.owner.llm.release()  # the server goes on with the rest, as one does
            yield part

    async def aclose(self) -> None:
        await self.stream.aclose()


def test_ctrl_c_while_a_chunk_is_read_stops_the_reply_there() -> None:
    # Python 3.11's asyncio.wait_for swallowed such a Ctrl-C (ChatOpenAI waited for each
    # chunk through it): the run read the whole reply, the server generating all along.
    answer = reply("First words, then the rest of a long answer.", hold=True)
    with FakeLLM([answer]) as llm:
        transport = CtrlCAsTheFirstWordsArrive(llm, b"First words")
        chat = make_chat_model(llm.base_url, "fake-model", transport=transport)

        async def ask() -> None:
            ctrl_c = CtrlC()
            with ctrl_c.installed(), pytest.raises(Interrupted):
                await ctrl_c.cancellable(chat.ainvoke([HumanMessage("go on")]))

        asyncio.run(ask())

    assert transport.pressed
    assert transport.read_after == []  # not one more byte of the reply once Ctrl-C was pressed
