"""The client that talks to LM Studio's chat model (or llama.cpp's, or any OpenAI-compatible
server's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr, SecretStr

from core.context.replies import REASONING_FIELDS, REASONING_KEY
from core.context.tls import verify_for

if TYPE_CHECKING:
    import httpx2

# A local model may think for minutes before its first token.
REQUEST_SECONDS = 600


class PlainJSONChatOpenAI(ChatOpenAI):
    """ChatOpenAI, sending the messages and tools as the plain JSON they already are, and
    keeping what local servers send that ChatOpenAI does not read.

    The openai client walks every request body through a type-driven transform before it
    sends it; with the whole history in every request, that walk was about half of our CPU
    per tool step, and it grows with the thread. `extra_body` is merged into the JSON as is,
    so the body on the wire is the same.

    Each message is also turned into its JSON form once, not once per request: within a
    turn, every step's request repeats the history before it, and a write call's arguments
    (a whole file) were encoded again at every step. The forms are kept from one request to
    the next by the message object's identity: messages are never changed once made, a
    history that changes holds new objects, and an object kept here cannot be freed, so its
    id cannot name another while it is kept.
    """

    _forms: dict[int, tuple[BaseMessage, dict[str, Any]]] = PrivateAttr(default_factory=dict)

    def _get_request_payload(
        self, input_: Any, *, stop: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        messages = self._convert_input(input_).to_messages()
        kept = [_form_of(self._forms, m) for m in messages]
        new = [m for m, form in zip(messages, kept, strict=True) if form is None]
        payload = super()._get_request_payload(new, stop=stop, **kwargs)
        made = iter(payload["messages"])  # one form per message given, in order
        forms = [next(made) if form is None else form for form in kept]
        # Only this request's: the next one repeats it.
        self._forms = {id(m): (m, form) for m, form in zip(messages, forms, strict=True)}
        payload["messages"] = forms
        # response_format too: ChatOpenAI sends a request that has one through the SDK's
        # structured-output stream helper, which parses the reply itself; a schema here is
        # ours to read (core.context.constrained), as plain JSON like the rest.
        plain = {
            key: payload.pop(key)
            for key in ("messages", "tools", "response_format")
            if key in payload
        }
        # ChatOpenAI renames the reply limit to OpenAI's newer max_completion_tokens; LM
        # Studio documents only max_tokens (llama.cpp reads both), so send the one all read.
        if "max_completion_tokens" in payload:
            plain["max_tokens"] = payload.pop("max_completion_tokens")
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **plain}
        payload["messages"] = []  # required by the client's signature; extra_body wins
        return payload

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> Any:
        """A streamed delta, with the reasoning text ChatOpenAI would drop kept in the
        message's additional_kwargs (merged like any other string as chunks add up)."""
        generation = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        choices = chunk.get("choices") or []
        if generation is None or not choices:
            return generation
        delta = choices[0].get("delta") or {}
        thought = next((delta[f] for f in REASONING_FIELDS if isinstance(delta.get(f), str)), "")
        if thought:
            generation.message.additional_kwargs[REASONING_KEY] = thought
        return generation


def _form_of(
    known: dict[int, tuple[BaseMessage, dict[str, Any]]], message: BaseMessage
) -> dict[str, Any] | None:
    kept = known.get(id(message))
    return kept[1] if kept is not None and kept[0] is message else None


def make_chat_model(
    base_url: str,
    model: str,
    callbacks: list[Any] | None = None,
    *,
    max_tokens: int | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> PlainJSONChatOpenAI:
    """The chat model on `base_url`; `transport` carries its requests instead of httpx's own
    (a test reads the reply's bytes as they come through it)."""
    clients: dict[str, Any] = {}
    verify = verify_for(base_url)
    if verify is not True or transport is not None:
        # ChatOpenAI's own clients (a sync one too, which fsagent never uses) would each load
        # the CA bundle for a server that speaks no TLS: core/context/tls.py.
        clients = {
            "http_client": openai.DefaultHttpxClient(
                base_url=base_url, timeout=REQUEST_SECONDS, verify=verify
            ),
            "http_async_client": openai.DefaultAsyncHttpxClient(
                base_url=base_url, timeout=REQUEST_SECONDS, verify=verify, transport=transport
            ),
        }
    return PlainJSONChatOpenAI(
        callbacks=callbacks,
        base_url=base_url,
        api_key=SecretStr("lm-studio"),  # LM Studio ignores the key, the client insists on one
        model=model,
        streaming=True,
        # Neither LM Studio nor llama.cpp sends usage in a stream unless asked: the server's
        # own count of a request is what the context budget trusts.
        stream_usage=True,
        # The field is max_tokens; its alias is the name a type checker knows it by (the
        # request renames it back to max_tokens: see _get_request_payload).
        max_completion_tokens=max_tokens,  # a small model can loop until its context is full
        temperature=0,
        max_retries=0,  # a local server that is down stays down; say so at once
        timeout=REQUEST_SECONDS,
        # ChatOpenAI wraps each wait for a streamed chunk in asyncio.wait_for (120 s unless
        # told). On Python 3.11 wait_for swallows a cancellation that lands while a chunk is
        # being read (cpython gh-86296, fixed in 3.12): Ctrl-C then read the reply to its end
        # while the server went on generating for us. The HTTP timeout above bounds a
        # stalled server; a model may also be silent for minutes before its first token.
        stream_chunk_timeout=None,
        **clients,
    )
