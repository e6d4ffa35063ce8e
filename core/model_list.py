"""Which model LM Studio serves, asked before anything heavy is imported (httpx only)."""

from __future__ import annotations

import httpx

from core.errors import StartupError


def unreachable_message(base_url: str) -> str:
    return (
        f"cannot reach LM Studio at {base_url}: start LM Studio's local server "
        "(Developer tab > Start Server) or pass --base-url"
    )


async def first_listed_model(base_url: str) -> str:
    """Ask the server which models it serves; LM Studio lists the loaded ones first."""
    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(f"{base_url}/models")
            response.raise_for_status()
            models = response.json().get("data") or []
    except (httpx.HTTPError, ValueError) as error:
        raise StartupError(unreachable_message(base_url)) from error
    if not models:
        raise StartupError(
            f"LM Studio at {base_url} lists no model: load one in LM Studio or pass --model"
        )
    return str(models[0]["id"])


HEALTH_SECONDS = 5.0


async def server_problem(base_url: str) -> str | None:
    """Why LM Studio cannot be reached at `base_url` now; None when it lists its models."""
    try:
        async with httpx.AsyncClient(timeout=HEALTH_SECONDS) as client:
            response = await client.get(f"{base_url}/models")
            response.raise_for_status()
            response.json()
    except (httpx.HTTPError, ValueError):
        return unreachable_message(base_url)
    return None
