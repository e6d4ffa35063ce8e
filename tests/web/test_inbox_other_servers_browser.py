"""A call to another MCP server in the inbox page, in headless Chromium against a real `fsagent
serve` with the npm memory server (package.json) configured in the person's config.toml: the
page names the server and the tool, says what the annotations say, shows each argument escaped
(an escape code written out, markup as text), offers no edit (what is previewed is the
arguments); a yes without its preview_id is 428 and runs nothing; approving from the page
runs the calls and the server's file holds what was shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from chromium import BrowserThread

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, TOKEN, ServeProcess, by_request

REPO = Path(__file__).resolve().parents[2]
MEMORY_SERVER = REPO / "node_modules" / ".bin" / "mcp-server-memory"
OBSERVATION = 'red\x1b[2J <img src=x onerror="document.title=1">'
ADA = {"entities": [{"name": "Ada", "entityType": "person", "observations": [OBSERVATION]}]}


def configure_memory(xdg: Path) -> Path:
    assert MEMORY_SERVER.exists(), f"{MEMORY_SERVER} is missing: `make test` installs it"
    memory = xdg / "state" / "fsagent" / "servers" / "memory" / "memory.jsonl"
    folder = xdg / "config" / "fsagent"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f"[mcp_servers.memory]\ncommand = {json.dumps(str(MEMORY_SERVER))}\n"
        f"env = {{ MEMORY_FILE_PATH = {json.dumps(str(memory))} }}\n",
        encoding="utf-8",
    )
    return memory


def test_the_inbox_names_the_server_escapes_its_arguments_and_runs_it_when_approved(
    workspace: Workspace, browser: BrowserThread, own_xdg_folders: Path
) -> None:
    memory = configure_memory(own_xdg_folders)
    calls = [
        tool_call("memory__create_entities", ADA, "c_make"),
        tool_call("memory__delete_entities", {"entityNames": ["Nobody"]}, "c_drop"),
    ]
    script = by_request({"remember Ada": [reply(tool_calls=calls), text("Remembered.")]})

    async def review(url: str) -> None:
        said = await asyncio.to_thread(
            httpx.post,
            f"{url}/api/threads/t/messages",
            json={"text": "remember Ada"},
            timeout=120,
        )
        assert said.status_code == 200, said.text
        # A yes without the preview it answers is refused, and nothing runs.
        unbound = await asyncio.to_thread(
            httpx.post,
            f"{url}/api/admin/approvals/t",
            json={"decisions": {"c_make": {"type": "approve"}, "c_drop": {"type": "approve"}}},
            headers={**ADMIN, **JSON},
            timeout=120,
        )
        assert unbound.status_code == 428, unbound.text
        assert not memory.exists()

        page = await browser.tab()
        page.set_default_timeout(120_000)  # two shared cores, other tests beside it
        try:
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            make = thread.locator('.call[data-call="c_make"]')
            drop = thread.locator('.call[data-call="c_drop"]')
            header = "MCP server memory, tool create_entities (memory.create_entities)"
            await make.get_by_text(header).first.wait_for()
            shown = await make.inner_text()
            assert f"{header}: not proven read-only" in shown
            # What would be sent, not a diff: fsagent cannot know what it would change.
            assert "what would be sent" in shown.lower() and "side by side" not in shown.lower()
            assert "fsagent cannot undo a call to another server" in shown
            # The escape code written out; the markup is text, never an element.
            # (inside a list, as its JSON: the escape code is JSON's \u001b)
            assert '"red\\u001b[2J <img src=x onerror=\\"document.title=1\\">"' in shown
            assert "\x1b" not in shown
            assert await page.locator("article.thread img").count() == 0
            assert await page.title() != "1"
            dropped = await drop.inner_text()
            assert (
                "MCP server memory, tool delete_entities (memory.delete_entities): "
                "not proven read-only, destructive" in dropped
            )
            # What is previewed is the arguments: approve, reject or answer, never edit.
            assert await make.locator("input[value=edit]").count() == 0
            assert await make.locator("input[value=approve]").count() == 1

            await make.locator("input[value=approve]").check()
            await drop.locator("input[value=approve]").check()
            await thread.locator("button.submit").click()
            await thread.locator(".answer", has_text="Remembered.").wait_for()
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="general") as llm:
        served = ServeProcess(workspace, llm.base_url)
        try:
            browser.call(review(served.url))
        finally:
            served.kill()
    (written,) = memory.read_text(encoding="utf-8").splitlines()
    assert json.loads(written)["name"] == "Ada"
    assert json.loads(written)["observations"] == [OBSERVATION]
