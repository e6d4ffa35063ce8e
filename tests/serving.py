"""The HTTP service under test: in this process through httpx's ASGI transport (the app the
command line wires: real store, real MCP server, the LM Studio stand-in over HTTP), or as a
real `fsagent serve` process where a restart or a signal is meant (forked from the worker's
launcher, tests/launcher.py, unless FSAGENT_TEST_EXEC_AGENTS=1). Either way the MCP server is
a real process forked by that launcher, as a piped session's is (tests/server_stub.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from launcher import LAUNCHER, Launched, agents_execd

from cli.serve import open_service
from cli.settings import Settings
from conftest import SERVER_LAUNCHER_ENV, Workspace, agent_env, text_stream
from fake_llm import text
from web.auth import Access

TOKEN = "s3cret-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
HOST = "127.0.0.1"
PORT = 8765
BASE = f"http://{HOST}:{PORT}"
# The inbox's listing, as a browser test routes or reads it: with or without `known`.
LISTING = re.compile(r"/api/admin/approvals(\?[^/]*)?$")


@dataclass
class Served:
    client: httpx.AsyncClient
    app: Any

    @property
    def store(self) -> Any:
        return self.app.state.service.store

    async def say(self, thread: str, text: str) -> list[tuple[str, dict]]:
        response = await self.client.post(
            f"/api/threads/{thread}/messages", json={"text": text}, headers=JSON
        )
        assert response.status_code == 200, response.text
        return sse_events(response.text)

    async def decide(self, thread: str, body: Any) -> httpx.Response:
        return await self.client.post(
            f"/api/admin/approvals/{thread}", json=body, headers={**ADMIN, **JSON}
        )

    async def approve(self, thread: str) -> httpx.Response:
        """Approve every call the thread waits on, bound to the previews the admin API
        shows now, as the inbox page does."""
        listed = await self.client.get("/api/admin/approvals", headers=ADMIN)
        return await self.decide(thread, approve_shown(listed.json(), thread))

    async def edit_preview(self, thread: str, call_id: str, args: dict[str, Any]) -> dict:
        """The page's "Preview the edit": the edited call's preview, with its preview_id."""
        response = await self.client.post(
            f"/api/admin/approvals/{thread}/preview",
            json={"call_id": call_id, "args": args},
            headers={**ADMIN, **JSON},
        )
        assert response.status_code == 200, response.text
        return response.json()

    async def edited(self, thread: str, call_id: str, args: dict[str, Any]) -> dict:
        """An edit decision as the page sends it: bound to the edit's own preview, now."""
        shown = await self.edit_preview(thread, call_id, args)
        return {"type": "edit", "args": args, "preview_id": shown["preview_id"]}

    async def approve_simply(self, thread: str) -> httpx.Response:
        """The seed's simple form, `{"approved": true}`, bound to the previews the admin API
        shows now by their ids."""
        listed = await self.client.get("/api/admin/approvals", headers=ADMIN)
        [waiting] = [item for item in listed.json()["approvals"] if item["thread"] == thread]
        ids = {call["id"]: call["preview_id"] for call in waiting["calls"]}
        return await self.decide(thread, {"approved": True, "preview_ids": ids})


def held_refreshes(thread: str, release: asyncio.Event) -> Callable[[Any], Awaitable[None]]:
    """A Playwright route for LISTING that holds the page's refreshes naming `thread`'s entry
    (`known=THREAD:ETAG`) until `release` is set, as a slow answer would: the page's first
    load and its look again after a 412 (which names nothing of the thread) pass. Set before
    the page loads, so that no refresh slips by: one that landed would draw a change itself
    (issue 43), and a yes would answer the new state instead of being refused."""

    async def hold(route: Any) -> None:
        if f"known={thread}%3A" in route.request.url:
            await release.wait()
        await route.continue_()

    return hold


def bound(call: dict[str, Any]) -> dict[str, Any]:
    """The page's approval of one call it showed: bound to that call's preview."""
    return {"decisions": {call["id"]: {"type": "approve", "preview_id": call["preview_id"]}}}


def approve_shown(listed: dict[str, Any], thread: str) -> dict[str, Any]:
    """Every call of `thread` in a GET /api/admin/approvals answer, approved as shown."""
    [waiting] = [item for item in listed["approvals"] if item["thread"] == thread]
    return {
        "decisions": {
            call["id"]: {"type": "approve", "preview_id": call["preview_id"]}
            for call in waiting["calls"]
        }
    }


def approve_over_http(url: str, thread: str) -> httpx.Response:
    """`approve` against a `fsagent serve` process."""
    listed = httpx.get(f"{url}/api/admin/approvals", headers=ADMIN, timeout=60)
    body = approve_shown(listed.json(), thread)
    return httpx.post(
        f"{url}/api/admin/approvals/{thread}", json=body, headers={**ADMIN, **JSON}, timeout=60
    )


@contextmanager
def servers_forked() -> Iterator[None]:
    """The MCP server of an app opened in this process, forked by the worker's launcher (as
    `Workspace.run` has it for a piped session) rather than exec'd: each exec'd server paid
    the MCP SDK's import, ~0.5 of the ~0.7 CPU seconds an in-process app took to open. The
    server reads FSAGENT_TEST_SERVER_LAUNCHER from this process's environment when it starts
    (core/tools/server_process.py), so it is set for as long as the app is open. With
    FSAGENT_TEST_EXEC_AGENTS=1 the server is exec'd, as every agent's is then."""
    if agents_execd():
        yield
        return
    before = os.environ.get(SERVER_LAUNCHER_ENV)
    os.environ[SERVER_LAUNCHER_ENV] = LAUNCHER.started()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SERVER_LAUNCHER_ENV, None)
        else:
            os.environ[SERVER_LAUNCHER_ENV] = before


@asynccontextmanager
async def serving(
    workspace: Workspace,
    base_url: str,
    *,
    token: str | None = TOKEN,
    approve: str = "ask",
    host: str = HOST,
    allowed_hosts: tuple[str, ...] = (),
    base: str = BASE,
    roots: tuple[Path, ...] | None = None,
    other_root: bool = False,
    constrain_calls: str = "auto",
    max_tokens: int | None = None,
) -> AsyncIterator[Served]:
    settings = Settings(
        base_url=base_url,
        roots=roots or (workspace.root,),
        other_root=other_root,
        db=workspace.db,
        approve=approve,  # type: ignore[arg-type]
        constrain_calls=constrain_calls,  # type: ignore[arg-type]
        max_tokens=max_tokens,
    )
    access = Access(host=host, port=PORT, token=token, allowed_hosts=allowed_hosts)
    with servers_forked():
        async with open_service(settings, access) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=base, timeout=60) as c:
                yield Served(c, app)


def sse_events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of each server-sent event in a response body."""
    found = []
    for block in text.split("\n\n"):
        if not block.strip() or block.startswith(":"):  # a keep-alive comment
            continue
        kind = re.search(r"^event: (.*)$", block, re.M)
        data = re.search(r"^data: (.*)$", block, re.M)
        assert kind and data, block
        found.append((kind.group(1), json.loads(data.group(1))))
    return found


def kinds(events: list[tuple[str, dict]]) -> list[str]:
    return [kind for kind, _ in events]


# --- a stand-in model that answers by the request ---------------------------------------------


def last_user_text(request: dict[str, Any]) -> tuple[str, int]:
    """The person's last message in a model request, and how many model turns follow it."""
    messages = request["messages"]
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "user":
            after = sum(1 for m in messages[index + 1 :] if m["role"] == "assistant")
            content = messages[index]["content"]
            return (content if isinstance(content, str) else json.dumps(content)), after
    return "", 0


def by_request(table: dict[str, list[Any]]):
    """A script answering each request by the person's message it serves: the step for the
    number of model turns since that message (the last step again past the end)."""

    def answer(request: dict[str, Any]) -> Any:
        said, turns = last_user_text(request)
        steps = next((steps for key, steps in table.items() if key in said), [text("?")])
        return steps[min(turns, len(steps) - 1)]

    return answer


# --- `fsagent serve` as a process ------------------------------------------------------------

READY = re.compile(r"fsagent serve: (http://\S+/)")


class ServeProcess:
    """`fsagent serve --port 0` on a workspace, its output read as it comes; `url` once it
    listens."""

    def __init__(
        self,
        workspace: Workspace,
        base_url: str,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        command = workspace.command(base_url, "serve", "--port", "0", *args, thread=None)
        environment = {**agent_env(), "FSAGENT_ADMIN_TOKEN": TOKEN, **(env or {})}
        self.process: subprocess.Popen[str] | Launched
        if agents_execd():
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                cwd=workspace.root,
                env=environment,
            )
        else:
            # Forked from the worker's launcher, as Workspace.start forks: a real process
            # that SIGKILL and SIGTERM reach, without the libraries' import again.
            self.process = LAUNCHER.spawn(
                command[2:],
                kind="agent",
                env={**environment, SERVER_LAUNCHER_ENV: LAUNCHER.started()},
                cwd=workspace.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        workspace.processes.append(self.process)  # killed at the end of the test, whatever
        self.output: list[str] = []
        self.readers = [
            threading.Thread(
                target=self._read, args=(text_stream(stream, write=False),), daemon=True
            )
            for stream in (self.process.stdout, self.process.stderr)
        ]
        for reader in self.readers:
            reader.start()
        self.url = self.wait_for(READY).group(1).rstrip("/")

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.output.append(line)

    @property
    def text(self) -> str:
        return "".join(self.output)

    def wait_for(self, pattern: re.Pattern[str] | str, timeout: float = 60) -> re.Match[str]:
        pattern = re.compile(re.escape(pattern)) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            exited = self.process.poll() is not None
            if exited:
                for reader in self.readers:
                    reader.join(timeout=5)
            found = pattern.search(self.text)
            if found:
                return found
            if exited:
                raise AssertionError(
                    f"serve exited ({self.process.returncode}) before {pattern.pattern!r}:\n"
                    + self.text
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern.pattern!r} within {timeout}s:\n{self.text}")
            time.sleep(0.05)

    def wait(self, timeout: float = 30) -> int:
        code = self.process.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=5)
        return code

    def kill(self) -> None:
        self.process.kill()
        self.wait()
