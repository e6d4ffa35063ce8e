"""One form for comparing paths (issue 28): the server's plan gives each path raw (its real
root, the path below it), and the rules, the grants and the rules-file guard compare that
with our roots and the rules file raw too, never a form escaped for a screen.

The attack: a root named `👩‍💻 work` (the emoji holds U+200D, a format character the server
writes out as `\\xe2\\x80\\x8d` on screen) and `--approve yes`. The guard compared the plan's
escaped root with the rules file's real path, found them different, and
`write_file(fsagent.toml)` ran unasked. The same for a root holding a bidi control, a
backslash, a newline or a byte that is not UTF-8. The real CLI and the real MCP server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_session import FilesystemServer

from conftest import AGENT, agent_env, tool_messages
from core.approval.policy import load_policy
from core.changes.plans import CallPlan, judged
from fake_llm import FakeLLM, reply, text, tool_call

ROOT_NAMES = {
    "zwj": "👩\u200d💻 work",
    "bidi": "notes\u202etxt.exe",
    "backslash": "back\\x2fslash",
    "newline": "two\nlines",
    "not_utf8": os.fsdecode(b"caf\xe9"),
}
ALLOW_DOCS = '[[rule]]\ntool = "write_file"\npath = "docs/**"\ndecision = "allow"\n'


def strange_root(tmp_path: Path, name: str) -> Path:
    root = tmp_path / ROOT_NAMES[name]
    root.mkdir()
    return root.resolve()


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_the_rules_file_is_not_written_unasked_whatever_its_root_is_named(
    tmp_path: Path, name: str
):
    root = strange_root(tmp_path, name)
    (root / "fsagent.toml").write_text(ALLOW_DOCS)
    loosened = '[[rule]]\ntool = "*"\npath = "**"\ndecision = "allow"\n'
    calls = [tool_call("write_file", {"path": "fsagent.toml", "content": loosened}, id="call_r")]
    command = [
        sys.executable, str(AGENT), "--root", str(root), "--db", str(tmp_path / "threads.db"),
        "--thread", "t", "--approve", "yes",
    ]  # fmt: skip
    with FakeLLM([reply(tool_calls=calls), text("Done.")], auto_route="filesystem") as llm:
        result = subprocess.run(
            [*command, "--base-url", llm.base_url],
            input="write the rules\n",
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
            cwd=tmp_path,
            env=agent_env(),
        )
        [answer] = tool_messages(llm.requests_with_tools()[1])

    assert result.returncode == 0, result.stdout + result.stderr
    assert (root / "fsagent.toml").read_text() == ALLOW_DOCS
    assert "--approve yes" not in answer["content"]  # not run, nor refused for want of a plan
    assert "is protected" in answer["content"], answer["content"]


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_rules_grants_and_the_guard_compare_raw_paths(tmp_path: Path, name: str):
    root = strange_root(tmp_path, name)
    (root / "docs").mkdir()
    (root / "fsagent.toml").write_text(
        '[[rule]]\ntool = "*"\npath = "docs/**"\ndecision = "deny"\n'
    )
    policy = load_policy(None, [root])
    with FilesystemServer([root]) as server:

        def places(tool: str, **args: object) -> dict:
            plan = json.loads(server.ok("plan", tool=tool, args=args))["paths"]
            read = judged({"name": tool, "args": args}, CallPlan(plan), policy.roots)
            assert read.places is not None, (read, plan)
            return read.places

        assert policy.touches_rules("write_file", places("write_file", path="fsagent.toml"))
        assert policy.touches_rules("delete", places("delete", path="."))
        assert not policy.touches_rules("write_file", places("write_file", path="notes.md"))
        assert policy.judge("write_file", places("write_file", path="docs/a.md")).decision == (
            "deny"
        )
        into_docs = {"name": "write_file", "args": {"path": "docs/a.md"}}
        grant = policy.grant_for(into_docs, places("write_file", path="docs/a.md"))
        if name == "not_utf8":
            assert grant is None  # the thread could not keep its folder as it is
        else:
            assert grant is not None and grant["folder"] == str(root / "docs")
            deeper = places("write_file", path="docs/b/c.md")
            assert policy.covering_grant(into_docs, [grant], deeper) == grant
