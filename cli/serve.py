"""`fsagent serve`: the agent over HTTP, wired as a chat wires it for the terminal."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from cli.launch import launch, make_data_folder, open_agent, started_with
from cli.settings import serve_settings_from_args
from core.errors import StartupError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from cli.settings import ServeSettings, Settings
    from web.auth import Access


# The terminal's own options: a server has no stdin to be strict about, and its runs are
# many threads' at once, not one transcript's or one cassette's.
TERMINAL_ONLY = ("transcript", "record", "replay", "strict", "thread")


def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    given = [name for name in TERMINAL_ONLY if getattr(args, name, None)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise StartupError(f"serve takes no {flags}: those are for a session at the terminal")
    return asyncio.run(serve(settings, serve_settings_from_args(args)))


async def serve(settings: Settings, serving: ServeSettings) -> int:
    from web.auth import Access
    from web.serving import listen, run_server

    access = Access(
        host=serving.host,
        port=serving.port,
        token=serving.admin_token,
        allowed_hosts=serving.allowed_hosts,
        cors_origins=serving.cors_origins,
    )
    if not access.loopback and not access.token:
        raise StartupError(
            f"serve --host {serving.host}: off loopback every endpoint needs a token, and "
            "FSAGENT_ADMIN_TOKEN is not set (or blank); set it, or serve on 127.0.0.1"
        )
    sock = listen(serving.host, serving.port)
    try:
        access = dataclasses.replace(access, port=sock.getsockname()[1])
        async with open_service(settings, access) as app:
            admin = "on" if access.token else "off (set FSAGENT_ADMIN_TOKEN to turn it on)"
            print(f"fsagent serve: {access.url} (inbox at /; admin API {admin})", flush=True)
            return await run_server(app, sock, verbose=settings.verbose)
    finally:
        sock.close()


@asynccontextmanager
async def open_service(settings: Settings, access: Access) -> AsyncIterator[FastAPI]:
    """The HTTP app on the store, the MCP server's tools, the model and the graph, as `chat`
    wires them for the terminal; every turn it still runs is cut off when it closes."""
    async with launch(settings) as launched:
        from core.context.models import server_problem
        from core.opening import open_thread
        from core.session import ThreadSession
        from store import open_store
        from web.app import Service, create_app

        make_data_folder(settings.db)
        async with open_store(settings.db) as store:
            async with open_agent(settings, launched, store) as agent:

                async def session(name: str) -> ThreadSession:
                    # A thread started on other roots is refused (409), unless --other-root.
                    return await open_thread(
                        agent.parts,
                        name,
                        roots=launched.roots,
                        started_with=started_with(settings, launched),
                        other_roots=settings.other_root,
                    )

                async def health() -> dict[str, str | None]:
                    model, tools = await asyncio.gather(
                        server_problem(settings.base_url), agent.server.problem()
                    )
                    return {"lm_studio": model, "mcp_server": tools}

                service = Service(store, agent.app, session, health, verbose=settings.verbose)
                app = create_app(service, access)
                try:
                    yield app
                finally:
                    await app.state.runs.shutdown("the server is stopping")
