"""Record a session's model traffic, and replay it without a server.

A cassette is JSON lines: a header (the model and its context length), then one line per
model call with the request's essentials (which tools were offered, the last thing the person
said, which tool calls were answered and how) and the model's full response, with what the
server counted (its usage) and why it stopped, which the context budget reads. `--record`
writes one while talking to LM Studio; `--replay` answers from one, in order, and stops at the
first request that is not the one recorded, so a regression run cannot drift silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from core.context.replies import REASONING_KEY
from core.errors import ReplayMismatch, StartupError

CASSETTE_FORMAT = 1


def request_essentials(
    messages: Sequence[BaseMessage], tool_names: Sequence[str]
) -> dict[str, Any]:
    """What must be the same for a recorded response to be the right answer."""
    answered: list[dict[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        answered.insert(0, {"id": message.tool_call_id, "status": message.status})
    last_user_text = next(
        (str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), ""
    )
    return {"tools": sorted(tool_names), "last_user_text": last_user_text, "answered": answered}


def response_record(message: AIMessage) -> dict[str, Any]:
    record: dict[str, Any] = {
        "content": message.content if isinstance(message.content, str) else str(message.content),
        "tool_calls": [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ],
        "invalid_tool_calls": [
            {
                "id": c.get("id"),
                "name": c.get("name"),
                "args": c.get("args"),
                "error": c.get("error"),
            }
            for c in message.invalid_tool_calls
        ],
    }
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    if reasoning:
        record["reasoning"] = reasoning
    if message.usage_metadata:
        usage = message.usage_metadata
        record["usage"] = {key: usage[key] for key in ("input_tokens", "output_tokens")}
    finish = message.response_metadata.get("finish_reason")
    if finish:
        record["finish_reason"] = finish
    return record


def message_from_record(record: dict[str, Any]) -> AIMessage:
    usage = record.get("usage")
    return AIMessage(
        content=record.get("content", ""),
        tool_calls=[{**call, "type": "tool_call"} for call in record.get("tool_calls", [])],
        invalid_tool_calls=[
            {**call, "type": "invalid_tool_call"} for call in record.get("invalid_tool_calls", [])
        ],
        additional_kwargs={REASONING_KEY: record["reasoning"]} if record.get("reasoning") else {},
        usage_metadata=(
            {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
            if usage
            else None
        ),
        response_metadata=(
            {"finish_reason": record["finish_reason"]} if record.get("finish_reason") else {}
        ),
    )


# --- recording -------------------------------------------------------------------------------


class Recorder(BaseCallbackHandler):
    """Writes each finished model call to the cassette as it happens, so a run that is cut
    off still leaves every completed step on disk."""

    def __init__(self, path: Path, model: str, context_length: int | None = None) -> None:
        self.path = path
        self.pending: dict[Any, dict[str, Any]] = {}
        self.steps = 0
        header: dict[str, Any] = {"fsagent_cassette": CASSETTE_FORMAT, "model": model}
        if context_length:
            # A replay budgets (and compacts) its requests as the recorded run did.
            header["context_length"] = context_length
        with path.open("w", encoding="utf-8") as file:
            file.write(json.dumps(header) + "\n")

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: Any, **kwargs: Any
    ) -> None:
        offered = (kwargs.get("invocation_params") or {}).get("tools") or []
        names = [tool["function"]["name"] for tool in offered if "function" in tool]
        self.pending[run_id] = request_essentials(messages[0], names)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        request = self.pending.pop(run_id, None)
        if request is None:
            return
        message = response.generations[0][0].message
        self.steps += 1
        line = {"step": self.steps, "request": request, "response": response_record(message)}
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(line, ensure_ascii=False) + "\n")


# --- replaying -------------------------------------------------------------------------------


def load_cassette(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header (model, context_length) and the recorded steps; a file that is not a
    cassette is a clear error."""
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    except OSError as error:
        raise StartupError(f"--replay {path}: {error.strerror}; pass a cassette file") from error
    except ValueError as error:
        raise StartupError(f"--replay {path}: not JSON lines ({error})") from error
    if not lines or lines[0].get("fsagent_cassette") != CASSETTE_FORMAT:
        raise StartupError(
            f"--replay {path}: not an fsagent cassette (format {CASSETTE_FORMAT}); "
            "record one with --record"
        )
    return lines[0], lines[1:]


def describe_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    for key, label in (
        ("last_user_text", "the last user text"),
        ("answered", "the tool calls answered"),
        ("tools", "the tools offered"),
    ):
        if expected.get(key) != actual.get(key):
            return (
                f"{label} differ: recorded {json.dumps(expected.get(key))}, "
                f"now {json.dumps(actual.get(key))}"
            )
    return None


class ReplayChatModel(BaseChatModel):
    """A chat model that answers from a cassette and touches no network."""

    steps: list[dict[str, Any]]
    model_name: str = "replay"
    position: int = 0

    @property
    def _llm_type(self) -> str:
        return "fsagent-replay"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        names = [convert_to_openai_tool(tool)["function"]["name"] for tool in tools]
        return self.bind(tool_names=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        number = self.position + 1
        if self.position >= len(self.steps):
            raise ReplayMismatch(
                f"step {number}: the cassette has no response left "
                f"(it recorded {len(self.steps)} model calls)"
            )
        step = self.steps[self.position]
        actual = request_essentials(messages, kwargs.get("tool_names", []))
        difference = describe_difference(step["request"], actual)
        if difference:
            raise ReplayMismatch(f"step {number}: {difference}")
        self.position += 1
        return ChatResult(
            generations=[ChatGeneration(message=message_from_record(step["response"]))]
        )
