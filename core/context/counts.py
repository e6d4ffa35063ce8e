"""What the server counts, where it says: a thread's requests are budgeted by the server's
tokens, not only by ours.

Our estimate is a token per three characters (core.context.budget), which errs high on
English and low on CJK text (about a token per character) and on code dense with symbols. The
server's own count arrives in several places, and each is used:

- `usage.prompt_tokens` on every answer: the request's real size. Beside the count the budget
  already trusts (core.context.context.ContextKeeper.estimate), the answer says how far our
  estimate of the messages after the last count was off: that ratio (`Calibration.ratio`,
  never below 1) scales the estimates of the thread's next messages, and is kept on the reply
  (`SCALE_KEY`), so a thread read again after a restart knows it too.
- An overflow answer's count (llama.cpp's `n_prompt_tokens`, LM Studio's `n_keep`, LM Studio
  0.4's "The input has N tokens"): the same ratio, from a request that did not fit, before it
  is compacted and cut harder and sent again.
- llama.cpp's `POST /tokenize`: a large tool result is counted there before it is sent
  (`ServerCounter`), so it is cut to the room it really takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from langchain_core.messages import AIMessage, AnyMessage

from core.context.tls import verify_for

SCALE_KEY = "fsagent_count_scale"  # additional_kwargs of a reply: the thread's ratio then
MAX_SCALE = 6.0  # the most a ratio is believed: more is an estimate too small to judge by
# Estimated tokens a ratio is read from, at least. A template wraps each message in tokens
# our estimate does not see (role markers, a call's JSON): on a turn of short messages (a
# request, a call, a one-line answer, ~80 estimated tokens) they made a ratio of 1.9, which
# then doubled the estimate of the next turn's long prose and refused it as too long.
MIN_SAMPLE = 256

# A tool result this long (characters) is counted by the server before it is sent.
LARGE_RESULT = 1200

_TIMEOUT = httpx.Timeout(10.0, connect=2.0)


def ratio(counted: int, estimated: int) -> float | None:
    """How many real tokens each estimated one was, when the sample is large enough to say;
    never below 1 (our estimate errs high on purpose) and never above MAX_SCALE."""
    if estimated < MIN_SAMPLE or counted <= 0:
        return None
    return round(min(MAX_SCALE, max(1.0, counted / estimated)), 3)


def thread_scale(messages: Sequence[AnyMessage]) -> float:
    """The ratio the thread's latest counted reply found, 1 when none did."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            value = message.additional_kwargs.get(SCALE_KEY)
            if isinstance(value, int | float) and value >= 1:
                return float(value)
    return 1.0


class ServerCounter:
    """Counts text with the server's own tokenizer where the server offers one (llama.cpp's
    `POST /tokenize`); None everywhere else, and for good after one failure."""

    def __init__(self, base_url: str, server: str) -> None:
        self.url = f"{base_url.rstrip('/').removesuffix('/v1')}/tokenize"
        self.available = server == "llamacpp"
        self._client: httpx.AsyncClient | None = None

    async def count(self, text: str) -> int | None:
        if not self.available:
            return None
        try:
            if self._client is None:
                self._client = httpx.AsyncClient(timeout=_TIMEOUT, verify=verify_for(self.url))
            answer = await self._client.post(self.url, json={"content": text})
            tokens = answer.json().get("tokens") if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            tokens = None
        if not isinstance(tokens, list):
            self.available = False  # a proxy without it, an old build: ask no more
            return None
        return len(tokens)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
