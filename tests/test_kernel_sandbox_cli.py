"""What fsagent says of the kernel sandbox (Landlock around its MCP server), and
--require-kernel-sandbox: the real CLI, the real server, and the server's test switch
FSAGENT_LANDLOCK_ABI=0, with which it believes the kernel has no Landlock
(mcp_servers/kernel_sandbox.py)."""

from __future__ import annotations

import pytest

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from mcp_servers.kernel_sandbox import ABI_ENV, kernel_abi

NO_LANDLOCK = {ABI_ENV: "0"}
REASON = f"{ABI_ENV}=0 says this kernel has no Landlock"
NONE_LINE = (
    f"no kernel sandbox ({REASON}): only the MCP server's own checks keep the tools in the "
    "roots; --require-kernel-sandbox refuses to start so"
)
REFUSAL = (
    "fsagent: --require-kernel-sandbox: the kernel does not hold the MCP server to the roots "
    f"({REASON}); not started"
)
KERNEL_ABI, _ = kernel_abi()
needs_landlock = pytest.mark.skipif(KERNEL_ABI == 0, reason="this kernel offers no Landlock")


def read_notes() -> list[dict]:
    return [reply(tool_calls=[tool_call("read_file", {"path": "notes.md"})]), text("Milk.")]


def test_without_the_kernel_sandbox_a_session_says_so_once_and_runs(workspace: Workspace):
    (workspace.root / "notes.md").write_text("buy milk\n")
    with FakeLLM(read_notes(), auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "what is in notes.md?\n", env=NO_LANDLOCK)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines().count(NONE_LINE) == 1  # in the banner's details
    assert "kernel sandbox" not in result.stderr
    assert "← buy milk" in result.stdout


@needs_landlock
def test_where_it_holds_only_verbose_says_so(workspace: Workspace):
    with FakeLLM([text("Hi."), text("Hi.")], auto_route="general") as llm:
        quiet = workspace.run(llm.base_url, "hello\n")
        verbose = workspace.run(llm.base_url, "hello\n", "--verbose")
    assert quiet.returncode == verbose.returncode == 0, quiet.stderr + verbose.stderr
    assert "kernel sandbox" not in quiet.stdout + quiet.stderr
    held = f"kernel sandbox: Landlock ABI {min(KERNEL_ABI, 7)} holds the MCP server to the roots"
    assert verbose.stdout.splitlines().count(held) == 1


def test_require_kernel_sandbox_refuses_to_start_without_it(workspace: Workspace):
    with FakeLLM([text("never sent")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--require-kernel-sandbox", env=NO_LANDLOCK)
        assert llm.requests == []  # no model request, no tool call
    assert result.returncode == 2
    assert result.stderr.splitlines() == [REFUSAL]
    assert "you>" not in result.stdout
    assert not workspace.store_created()


@needs_landlock
def test_require_kernel_sandbox_starts_where_it_holds(workspace: Workspace):
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--require-kernel-sandbox")
    assert result.returncode == 0, result.stderr
    assert "agent> Hi." in result.stdout


def test_a_command_without_a_banner_says_it_on_stderr_once(workspace: Workspace):
    write = reply(tool_calls=[tool_call("write_file", {"path": "a.txt", "content": "a"})])
    with FakeLLM([write, text("Done.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "write a.txt\n").returncode == 3  # paused
        approved = workspace.run(
            llm.base_url, "", "approve", "t", "--yes", thread=None, env=NO_LANDLOCK
        )
    assert approved.returncode == 0, approved.stderr
    assert approved.stderr.splitlines().count(f"fsagent: {NONE_LINE}") == 1
    assert (workspace.root / "a.txt").read_text() == "a"
