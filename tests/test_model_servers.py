"""The real CLI against the stand-in speaking what real model servers send: their error
bodies, tool calls written as text, reasoning without an opening tag, and the router's
bounded request. Each case cites the public thread its wording and shape come from
(docs/model-servers.md has the table)."""

from __future__ import annotations

import json

import pytest

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text


def test_a_servers_own_reason_for_a_500_is_shown_on_one_line(workspace: Workspace):
    # LM Studio answers a crashed model with HTTP 500 and `{"error": "<a plain string>"}`,
    # the shape of its 400s (Gitlawb/openclaude#353); openai-python's exception text is then
    # only "Error code: 500" (openai/_base_client.py, _make_status_error_from_response).
    crash = reply(status=500, error="Model crashed unexpectedly.\nExit code: 6")
    with FakeLLM([text("general"), crash], flavour="lmstudio") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        url = llm.base_url

    lines = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: LM Studio at {url} answered 500: Model crashed unexpectedly. Exit code: 6"
    ]
    assert "Error code: 500" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_llama_cpps_reason_is_shown_too(workspace: Workspace):
    # llama-server's error object: {"error": {"code": 500, "message": ..., "type": ...}}
    # (tools/server/utils.hpp, format_error_response).
    failing = reply(status=500, error="failed to decode the batch")
    with FakeLLM([text("general"), failing], flavour="llamacpp") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        url = llm.base_url

    assert f"error: LM Studio at {url} answered 500: failed to decode the batch" in (
        result.stdout
    )
