"""Another server's call over HTTP (`fsagent serve` as wired, in-process): the admin API and
the inbox list it with the server's name and its preview; a yes without its preview_id is
428 and runs nothing; a bound yes runs it on the real mcp-server-git and is audited."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, serving


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout


def test_an_http_approval_of_a_commit_is_bound_to_its_preview(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    repo = workspace.root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "T")
    (repo / "a.txt").write_text("alpha\n", encoding="utf-8")
    git(repo, "add", "a.txt")
    folder = own_xdg_folders / "config" / "fsagent"
    folder.mkdir(parents=True, exist_ok=True)
    args = json.dumps(["-m", "mcp_server_git", "--repository", str(repo)])
    (folder / "config.toml").write_text(
        f"[mcp_servers.git]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
        "sandbox = false\n",
        encoding="utf-8",
    )
    commit = tool_call("git__git_commit", {"repo_path": str(repo), "message": "via http"})

    async def scenario() -> None:
        script = [reply(tool_calls=[commit]), text("Committed.")]
        with FakeLLM(script, auto_route="general") as llm:
            async with serving(workspace, llm.base_url) as served:
                await served.say("t", "commit it")
                listed = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [waiting] = listed.json()["approvals"]
                [call] = waiting["calls"]
                assert call["name"] == "git__git_commit"
                assert call["preview"][0].startswith("MCP server git, tool git_commit")
                assert "  message: 'via http'" in call["preview"]
                unbound = await served.decide("t", {"approved": True})
                assert unbound.status_code == 428, unbound.text
                assert git(repo, "log", "--format=%s") == ""
                decided = await served.approve_simply("t")
                assert decided.status_code == 200, decided.text
                [row] = await served.store.audit_rows("t")
                assert (row.tool, row.decision, row.by) == ("git__git_commit", "approve", "admin")

    asyncio.run(scenario())
    assert git(repo, "log", "--format=%s") == "via http\n"
