"""The npm reference servers through the real CLI (piped), against the stand-in model
(tests/fake_llm.py), each in the kernel sandbox where this kernel has Landlock (the default):
`@modelcontextprotocol/server-memory`, whose write tools write its JSON-lines file in its
state folder, and `@modelcontextprotocol/server-everything`, whose tools are annotated (echo
and get-sum read-only, gzip-file-as-resource open world). Both are package.json's, installed
by the Makefile's node-modules step. A read-only tool runs unasked; a write tool is asked,
previewed, approved, audited and its file is in the state folder; a denied one never reaches
the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Workspace, tool_answers
from fake_llm import FakeLLM, reply, text, tool_call
from mcp_servers.kernel_sandbox import kernel_abi

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "node_modules" / ".bin"
ADA = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["red\x1b[2J"]}]}


def configure(
    config_home: Path, name: str, program: str, env: dict[str, str] | None = None
) -> None:
    """The person's config.toml, as they would write it for an npm server installed with
    `npm install`."""
    command = BIN / program
    if not command.exists():
        pytest.fail(f"{command} is missing: `make test` installs it (npm ci)")
    folder = config_home / "fsagent"
    folder.mkdir(parents=True, exist_ok=True)
    table = f"[mcp_servers.{name}]\ncommand = {json.dumps(str(command))}\n"
    if env:
        pairs = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
        table += f"env = {{ {pairs} }}\n"
    with (folder / "config.toml").open("a", encoding="utf-8") as config:
        config.write(table)


def memory_file(xdg: Path) -> Path:
    """Where the memory server keeps its graph: in its state folder, the one place besides
    the roots the sandbox lets it write."""
    return xdg / "state" / "fsagent" / "servers" / "memory" / "memory.jsonl"


def with_memory(xdg: Path) -> Path:
    memory = memory_file(xdg)
    configure(xdg / "config", "memory", "mcp-server-memory", {"MEMORY_FILE_PATH": str(memory)})
    return memory


def test_the_memory_servers_read_tool_runs_without_asking(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    memory = with_memory(own_xdg_folders)
    memory.parent.mkdir(parents=True)
    memory.write_text(json.dumps({"type": "entity", "name": "Bo", "entityType": "cat",
                                  "observations": []}) + "\n")  # fmt: skip
    read = reply(tool_calls=[tool_call("memory__read_graph", {})])
    with FakeLLM([read, text("Bo is a cat.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "what do you remember?\n")

    assert result.returncode == 0, result.stderr
    assert "Approval needed" not in result.stdout and "Bo is a cat." in result.stdout
    assert any('"Bo"' in answer for answer in tool_answers(llm.requests))


def test_create_entities_is_asked_previewed_approved_audited_and_written_in_its_state_folder(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    memory = with_memory(own_xdg_folders)
    create = reply(tool_calls=[tool_call("memory__create_entities", ADA)])
    with FakeLLM([create, text("Remembered.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "remember Ada\ny\n")
        audit = workspace.run(llm.base_url, "", "audit")

    assert result.returncode == 0, result.stderr
    preview = (
        "MCP server memory, tool create_entities (memory.create_entities): not proven read-only"
    )
    assert preview in result.stdout
    # Its annotations say it is neither destructive nor open world: the preview says neither.
    line = next(ln for ln in result.stdout.splitlines() if preview in ln)
    assert "destructive" not in line and "open world" not in line
    assert "red\\x1b[2J" in result.stdout and "\x1b" not in result.stdout
    (written,) = memory.read_text(encoding="utf-8").splitlines()
    assert json.loads(written)["name"] == "Ada"
    assert json.loads(written)["observations"] == ["red\x1b[2J"]
    assert "memory__create_entities" in audit.stdout and "approve" in audit.stdout
    assert "Remembered." in result.stdout
    if kernel_abi()[0] > 0:  # held by the kernel sandbox, not run with the person's rights
        assert "without the kernel sandbox" not in result.stderr


def test_a_denied_create_entities_never_reaches_the_server(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    memory = with_memory(own_xdg_folders)
    memory.parent.mkdir(parents=True)
    before = json.dumps({"type": "entity", "name": "Bo", "entityType": "cat", "observations": []})
    memory.write_text(before + "\n", encoding="utf-8")
    create = reply(tool_calls=[tool_call("memory__create_entities", ADA)])
    with FakeLLM([create, text("Not remembered.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "remember Ada\nn\n")
        audit = workspace.run(llm.base_url, "", "audit")

    assert result.returncode == 0, result.stderr
    assert "Approval needed" in result.stdout
    assert memory.read_text(encoding="utf-8") == before + "\n"
    assert any(
        "rejected memory__create_entities" in answer for answer in tool_answers(llm.requests)
    )
    assert "memory__create_entities" in audit.stdout and "reject" in audit.stdout


def test_the_everything_servers_read_only_tools_run_unasked_and_an_open_world_one_is_asked(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    configure(own_xdg_folders / "config", "everything", "mcp-server-everything")
    reads = reply(
        tool_calls=[
            tool_call("everything__echo", {"message": "hi\x1b[31m"}),
            tool_call("everything__get-sum", {"a": 2, "b": 40}),
        ]
    )
    gzip = reply(
        tool_calls=[
            tool_call(
                "everything__gzip-file-as-resource",
                {"name": "x.gz", "data": "https://example.org/", "outputType": "resource"},
            )
        ]
    )
    script = [reads, text("42."), gzip, text("Not fetched.")]
    with FakeLLM(script, auto_route="general") as llm:
        result = workspace.run(llm.base_url, "add them\nfetch it\nn\n")

    assert result.returncode == 0, result.stderr
    answers = tool_answers(llm.requests)
    assert any("42" in answer for answer in answers)
    assert any("hi" in answer and "Echo" in answer for answer in answers)
    # Only the gzip call was asked, with what its annotations say.
    assert result.stdout.count("Approval needed") == 1
    assert (
        "MCP server everything, tool gzip-file-as-resource (everything.gzip-file-as-resource): "
        "not proven read-only, open world" in result.stdout
    )
    assert any("rejected everything__gzip-file-as-resource" in answer for answer in answers)
    offered = {tool["function"]["name"] for tool in llm.requests[-1].get("tools") or []}
    assert {"everything__echo", "everything__get-sum", "everything__toggle-simulated-logging"} <= (
        offered
    )


def test_read_only_offers_only_the_everything_servers_read_only_tools(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    configure(own_xdg_folders / "config", "everything", "mcp-server-everything")
    with FakeLLM([text("OK.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--read-only")

    assert result.returncode == 0, result.stderr
    names = {tool["function"]["name"] for tool in llm.requests[-1].get("tools") or []}
    assert {"everything__echo", "everything__get-sum"} <= names
    assert not {"everything__gzip-file-as-resource", "everything__toggle-simulated-logging"} & (
        names
    )


def test_fsagent_approvals_and_approve_name_the_server_and_approve_runs_the_call(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    memory = with_memory(own_xdg_folders)
    drop = tool_call("memory__delete_entities", {"entityNames": ["No\x1b[2Jbody"]}, "c_drop")
    make = tool_call("memory__create_entities", ADA, "c_make")
    with FakeLLM(
        [reply(tool_calls=[make, drop]), text("Remembered.")], auto_route="general"
    ) as llm:
        paused = workspace.run(llm.base_url, "remember Ada\n")
        assert paused.returncode == 3, paused.stderr
        listed = workspace.run(llm.base_url, "", "approvals", thread=None)
        refused = workspace.run(llm.base_url, "", "approve", "t", thread=None)
        assert not memory.exists()
        approved = workspace.run(llm.base_url, "", "approve", "t", "--yes", thread=None)

    assert "memory__create_entities" in listed.stdout and "memory__delete_entities" in listed.stdout
    assert refused.returncode != 0 and "--yes" in refused.stderr  # a pipe never says yes
    assert approved.returncode == 0, approved.stderr
    out = approved.stdout
    assert (
        "MCP server memory, tool create_entities (memory.create_entities): not proven read-only"
        in out
    )
    assert (
        "MCP server memory, tool delete_entities (memory.delete_entities): not proven "
        "read-only, destructive" in out
    )
    assert "No\\x1b[2Jbody" in out or "No\\u001b[2Jbody" in out
    assert "\x1b" not in out
    (written,) = memory.read_text(encoding="utf-8").splitlines()
    assert json.loads(written)["name"] == "Ada"
