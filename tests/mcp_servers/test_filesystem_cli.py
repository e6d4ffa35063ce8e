"""Starting the filesystem server: roots, --read-only, annotations, and other clients."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_session import REPO, FilesystemServer

from mcp_servers.filesystem import READ_TOOL_NAMES, WRITE_TOOL_NAMES
from mcp_servers.tool_names import PLAN_TOOL_NAME

SERVER = [sys.executable, "-m", "mcp_servers.filesystem"]


def start_and_fail(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVER, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def test_missing_root_exits_2_with_one_line(tmp_path: Path) -> None:
    done = start_and_fail(str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"mcp_servers.filesystem: root does not exist: {tmp_path / 'missing'} "
        "(each ROOT must be an existing folder)"
    ]


def test_root_that_is_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    done = start_and_fail(str(tmp_path), str(tmp_path / "file.txt"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "is a file, not a folder" in done.stderr


def test_tool_names_match_the_exported_constants(tmp_path: Path) -> None:
    with FilesystemServer([tmp_path]) as server:
        tools = {tool.name: tool for tool in server.tools()}
    assert set(tools) == READ_TOOL_NAMES | WRITE_TOOL_NAMES | {PLAN_TOOL_NAME}
    for name in READ_TOOL_NAMES:
        hints = tools[name].annotations
        assert hints and hints.readOnlyHint is True and hints.destructiveHint is False
        assert hints.idempotentHint is True
    for name in WRITE_TOOL_NAMES:
        hints = tools[name].annotations
        assert hints and hints.readOnlyHint is False and hints.idempotentHint is not None
    assert tools["delete"].annotations.destructiveHint is True
    assert tools["make_dir"].annotations.destructiveHint is False
    params = tools["grep"].inputSchema["properties"]
    assert set(params) == {"pattern", "path", "glob", "ignore_case", "context", "max_matches"}


def test_read_only_registers_no_write_tool(tmp_path: Path) -> None:
    with FilesystemServer([tmp_path], "--read-only") as server:
        names = {tool.name for tool in server.tools()}
        refused = server.call("write_file", path="x.txt", content="x")
    assert names == READ_TOOL_NAMES
    assert refused.is_error and not (tmp_path / "x.txt").exists()


def test_roots_expand_home_and_resolve_links(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    (real / "f.txt").write_text("via alias")
    with FilesystemServer([tmp_path / "alias"]) as server:
        assert server.ok("list_allowed_roots").splitlines()[1] == str(real)
        assert server.ok("read_file", path=str(real / "f.txt")) == "via alias"


def test_verbose_logs_go_to_stderr_not_the_protocol(tmp_path: Path) -> None:
    # Exec'd as `python -m`: its log set up at a real start (tests/mcp_session.py).
    with FilesystemServer([tmp_path], "--verbose", exec_=True) as server:
        server.call("read_file", path="../outside")
        server.ok("list_allowed_roots")
        server.stderr.seek(0)
        log = server.stderr.read()
    assert "security_error" in log


def test_a_plain_sdk_client_can_use_the_server(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from the sandbox\n")
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "plain_mcp_client.py"), *SERVER, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["tools"]) == READ_TOOL_NAMES | WRITE_TOOL_NAMES | {PLAN_TOOL_NAME}
    assert report["read_file"] == {"is_error": False, "text": "hello from the sandbox\n"}


@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")
def test_the_mcp_inspector_cli_can_use_the_server(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello inspector\n")
    command = [
        "npx",
        "--yes",
        "@modelcontextprotocol/inspector",
        "--cli",
        *SERVER,
        str(tmp_path),
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "path=hello.txt",
    ]
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP inspector could not be fetched in time")
    if done.returncode != 0 and "npm" in done.stderr and "inspector" not in done.stdout:
        pytest.skip(f"the MCP inspector is not available: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is False
    assert result["content"][0]["text"] == "hello inspector\n"
