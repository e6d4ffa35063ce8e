"""The model a run talks to: which one the server has loaded, with its context and reply budget,
or a cassette's under --replay; its client built only at the first prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import StartupError

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from cli.settings import Settings
    from core.context.budget import Budget
    from core.context.models import ModelChoice


@dataclass
class LoadedModel:
    """The model chosen, with its context and reply budget, and a function that builds its
    client (at the first prompt)."""

    choice: ModelChoice
    budget: Budget | None  # None: the context length is unknown
    max_tokens: int
    chat_model: Callable[[], BaseChatModel]


async def load_model(settings: Settings) -> LoadedModel:
    """The model the server has loaded, its context, and its client as a function that
    builds it at the first prompt.

    The server is asked now which model it serves and with how much context (core.context.models);
    the client itself (langchain_openai imports all of the openai SDK) is imported at the
    first prompt, or on a terminal in the background while the person types. Under --replay
    the model is a cassette's and touches no network.
    """
    if settings.replay:
        from core.context.cassette import ReplayChatModel, load_cassette
        from core.context.models import ModelChoice

        header, steps = load_cassette(settings.replay)
        replay = ReplayChatModel(steps=steps, model_name=str(header.get("model", "replay")))
        recorded = header.get("context_length")
        context = settings.context_length or (recorded if isinstance(recorded, int) else None)
        source = settings.context_flag if settings.context_length else "the cassette"
        choice = ModelChoice(replay.model_name, context, source, "replay")
        return budgeted(choice, reply_limit(settings, choice), lambda: replay)
    from core.context.models import (
        ModelChoiceError,
        ServerUnreachable,
        discover,
        unreachable_message,
    )

    try:
        choice = await discover(
            settings.base_url,
            settings.model,
            settings.context_length,
            override_name=settings.context_flag,
        )
    except ServerUnreachable as error:
        raise StartupError(unreachable_message(settings.base_url)) from error
    except ModelChoiceError as error:
        raise StartupError(str(error)) from error
    max_tokens = reply_limit(settings, choice)

    @functools.cache
    def chat_model() -> BaseChatModel:
        from core.context.chat_model import make_chat_model

        callbacks = None
        if settings.record:
            from core.context.cassette import Recorder

            callbacks = [Recorder(settings.record, choice.name, choice.context_length)]
        return make_chat_model(settings.base_url, choice.name, callbacks, max_tokens=max_tokens)

    return budgeted(choice, max_tokens, chat_model)


def reply_limit(settings: Settings, choice: ModelChoice) -> int:
    from core.context.budget import MAX_REPLY_TOKENS, default_max_tokens

    if settings.max_tokens is not None:
        return settings.max_tokens
    if choice.context_length is None:
        return MAX_REPLY_TOKENS
    return default_max_tokens(choice.context_length)


def budgeted(
    choice: ModelChoice, max_tokens: int, chat_model: Callable[[], BaseChatModel]
) -> LoadedModel:
    """The model with its budget; a reply limit that leaves no room for a prompt is a
    start-up error."""
    from core.context.budget import Budget

    budget = None
    if choice.context_length is not None:
        try:
            budget = Budget.for_context(choice.context_length, max_tokens)
        except ValueError:
            raise StartupError(
                f"--max-tokens {max_tokens}: the model's context is {choice.context_length} "
                f"tokens ({choice.context_source}), which leaves no room for a request; "
                "pass a smaller --max-tokens"
            ) from None
    return LoadedModel(choice, budget, max_tokens, chat_model)
