"""The fixed part as a real llama.cpp server counts it: every tool fsagent offers and the
system prompt, rendered with the server's own chat template (`POST /apply-template`) and
counted with its own tokenizer (`POST /tokenize`). Run by hand against a running server (it
is not part of `make bench`: the tests cannot download one):

    bash ../shared/real-llm/start.sh 18080 2048
    .venv/bin/python -m bench.real_fixed http://127.0.0.1:18080

Prints one line per request shape: all tools (as every request on 4096 and up sends them),
--read-only, and each route's tools on a small context (core.tools.tool_groups).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.context import load_tools


def real_tokens(base: str, tools: list[dict[str, Any]], system: str) -> int:
    """The server's count of a request with nothing but the system prompt and these tools,
    less the generation prompt a reply would follow (counted the same way)."""
    with httpx.Client(timeout=60) as client:

        def count(request: dict[str, Any]) -> int:
            prompt = client.post(f"{base}/apply-template", json=request).json()["prompt"]
            return len(client.post(f"{base}/tokenize", json={"content": prompt}).json()["tokens"])

        request: dict[str, Any] = {"messages": [{"role": "system", "content": system}]}
        if tools:
            request["tools"] = tools
        return count(request)


def main(base: str) -> None:
    from core.context.prompts import SYSTEM_PROMPT
    from core.tools.tool_groups import SMALL_CONTEXT_TOOLS

    with tempfile.TemporaryDirectory(prefix="fsagent-fixed-") as temp:
        offered, _ = asyncio.run(load_tools(Path(temp), read_only=False))
        read_offered, _ = asyncio.run(load_tools(Path(temp), read_only=True))
    names = [tool["function"]["name"] for tool in offered]
    print(f"all {len(offered)} tools + system: {real_tokens(base, offered, SYSTEM_PROMPT)}")
    print(f"  ({', '.join(names)})")
    print(
        f"--read-only, {len(read_offered)} tools: {real_tokens(base, read_offered, SYSTEM_PROMPT)}"
    )
    print(f"system prompt alone: {real_tokens(base, [], SYSTEM_PROMPT)}")
    for route, wanted in SMALL_CONTEXT_TOOLS.items():
        tools = [tool for tool in offered if tool["function"]["name"] in wanted]
        counted = real_tokens(base, tools, SYSTEM_PROMPT)
        print(f"small context, {route} ({len(tools)} tools): {counted}")
    for tool in offered:
        alone = real_tokens(base, [tool], SYSTEM_PROMPT) - real_tokens(base, [], SYSTEM_PROMPT)
        print(f"  {tool['function']['name']}: +{alone}")


if __name__ == "__main__":
    main(
        sys.argv[1].rstrip("/").removesuffix("/v1")
        if len(sys.argv) > 1
        else "http://127.0.0.1:18080"
    )
