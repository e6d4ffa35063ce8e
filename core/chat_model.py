"""The client that talks to LM Studio's chat model."""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI


class PlainJSONChatOpenAI(ChatOpenAI):
    """ChatOpenAI, sending the messages and tools as the plain JSON they already are.

    The openai client walks every request body through a type-driven transform before it
    sends it; with the whole history in every request, that walk was about half of our CPU
    per tool step, and it grows with the thread. `extra_body` is merged into the JSON as is,
    so the body on the wire is the same.
    """

    def _get_request_payload(self, input_: Any, *, stop: Any = None, **kwargs: Any) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        plain = {key: payload.pop(key) for key in ("messages", "tools") if key in payload}
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **plain}
        payload["messages"] = []  # required by the client's signature; extra_body wins
        return payload


def make_chat_model(
    base_url: str, model: str, callbacks: list[Any] | None = None
) -> PlainJSONChatOpenAI:
    return PlainJSONChatOpenAI(
        callbacks=callbacks,
        base_url=base_url,
        api_key="lm-studio",  # LM Studio ignores the key, the client insists on one
        model=model,
        streaming=True,
        temperature=0,
        max_retries=0,  # a local server that is down stays down; say so at once
        timeout=600,
    )
