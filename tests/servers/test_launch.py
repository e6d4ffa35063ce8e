"""Starting the person's other servers (core/servers/launch.py): real servers, a real stdio
pipe. mcp-server-time and mcp-server-git are the real ones from PyPI (the test extras);
tests/servers/little_server.py is ours, to fail in each way a server can."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.servers.config import ServerSpec
from core.servers.launch import confined_argv, is_confined, open_servers, pinned_read_only
from core.tools.tools import call_tool

LITTLE = Path(__file__).with_name("little_server.py")


def spec(name: str, command: str, *args: str, **settings: object) -> ServerSpec:
    return ServerSpec(
        name, Path("/cfg/config.toml"), "user", "stdio", command=command, args=args, **settings
    )  # type: ignore[arg-type]


def little(name: str, *args: str, **settings: object) -> ServerSpec:
    return spec(name, sys.executable, str(LITTLE), *args, **settings)


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_the_real_time_and_git_servers_list_their_tools_under_their_names(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    time = spec("time", sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
    git = spec("git", sys.executable, "-m", "mcp_server_git", "--repository", str(repo))

    async def go() -> tuple[list[str], list[str], str, str]:
        async with open_servers([time, git], [repo], tmp_path / "data", os.environ) as servers:
            assert [s.problem for s in servers] == [None, None]
            names = [[t.name for t in s.tools] for s in servers]
            tools = {t.name: t for s in servers for t in s.tools}
            content, failed = await call_tool(
                tools["git__git_status"], {"repo_path": str(repo)}, "c1"
            )
            assert not failed
            return names[0], names[1], str(content), servers[0].description

    time_tools, git_tools, status, said = run(go())  # type: ignore[misc]
    assert "time__get_current_time" in time_tools
    assert {"git__git_status", "git__git_commit", "git__git_add"} <= set(git_tools)
    assert "No commits yet" in status or "On branch" in status
    assert said and "\n" not in said


def test_include_and_exclude_tools_narrow_what_is_offered(tmp_path: Path) -> None:
    only = little("notes", include_tools=frozenset({"read_note", "write_note"}))
    but = little("more", exclude_tools=frozenset({"die"}))

    async def go() -> list[list[str]]:
        async with open_servers([only, but], [tmp_path], tmp_path / "d", os.environ) as servers:
            return [sorted(t.name for t in s.tools) for s in servers]

    assert run(go()) == [
        ["notes__read_note", "notes__write_note"],
        ["more__big", "more__cancelled", "more__read_note", "more__wait", "more__write_note"],
    ]


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("--die-at-start", "not started: "),
        ("--hang-at-start", "did not answer within 1s (startup_timeout)"),
        ("--garbage", "did not answer within 1s (startup_timeout)"),
    ],
)
def test_a_server_that_cannot_start_is_one_line_and_the_others_go_on(
    tmp_path: Path, how: str, words: str
) -> None:
    broken = little("broken", how, startup_timeout=1.0)
    fine = little("fine")

    async def go() -> tuple[str | None, list[str], str]:
        async with open_servers([broken, fine], [tmp_path], tmp_path / "d", os.environ) as s:
            (tmp_path / "n.txt").write_text("hello", encoding="utf-8")
            tools = {t.name: t for t in s[1].tools}
            content, _ = await call_tool(tools["fine__read_note"], {"name": "n.txt"}, "c")
            return s[0].problem, [t.name for t in s[0].tools], str(content)

    os.environ["LITTLE_NOTES"] = str(tmp_path)
    try:
        problem, tools, answer = run(go())  # type: ignore[misc]
    finally:
        del os.environ["LITTLE_NOTES"]
    assert problem is not None and "\n" not in problem
    assert problem.startswith("MCP server broken (/cfg/config.toml): not started: ")
    assert words in problem and problem.endswith("its tools are off")
    assert tools == [] and "hello" in answer


def test_a_missing_command_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = spec("gone", "no-such-mcp-server-here")

    async def go() -> str | None:
        async with open_servers([missing], [tmp_path], tmp_path / "d", os.environ) as servers:
            return servers[0].problem

    assert run(go()) == (
        "MCP server gone (/cfg/config.toml): not started: no such command "
        "'no-such-mcp-server-here'; its tools are off"
    )


def test_a_server_that_dies_mid_call_answers_one_line_naming_it(tmp_path: Path) -> None:
    async def go() -> list[str]:
        said = []
        async with open_servers([little("little")], [tmp_path], tmp_path / "d", os.environ) as s:
            tools = {t.name: t for t in s[0].tools}
            for name, args in (("little__die", {}), ("little__read_note", {"name": "x"})):
                try:
                    await call_tool(tools[name], args, "c")
                except Exception as error:  # the graph's tools step makes it the call's answer
                    said.append(str(error))
        return said

    died, after = run(go())  # type: ignore[misc]
    assert died.startswith("the MCP server little gave no answer (")
    assert after.startswith("the MCP server little gave no answer (") and "\n" not in after


def test_a_cancelled_call_reaches_the_server_as_an_mcp_cancellation(tmp_path: Path) -> None:
    started = tmp_path / "started"
    os.mkfifo(started)
    env = {**os.environ, "LITTLE_STARTED": str(started)}

    async def go() -> str:
        async with open_servers([little("little")], [tmp_path], tmp_path / "d", env) as servers:
            tools = {t.name: t for t in servers[0].tools}
            task = asyncio.create_task(call_tool(tools["little__wait"], {}, "c"))
            # The tool says it runs, through its FIFO: then the cancel can only reach it there.
            await asyncio.to_thread(started.read_text, encoding="utf-8")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Asked on the same pipe, after the cancellation: the server has acted on it
            # (and not because it was stopped, which would cancel the call too).
            content, _ = await call_tool(tools["little__cancelled"], {}, "d")
            return str(content)

    assert "wait" in run(go())  # type: ignore[operator]


def test_the_argv_goes_through_one_place_and_is_plain_without_the_sandbox(
    tmp_path: Path,
) -> None:
    plain = spec("git", "mcp-server-git", "--repository", ".", sandbox=False)
    assert confined_argv(plain, [tmp_path], tmp_path / "state") == [
        "mcp-server-git",
        "--repository",
        ".",
    ]


def test_the_sandboxed_argv_writes_the_roots_and_state_or_only_reads_a_read_only_server(
    tmp_path: Path,
) -> None:
    git = spec("git", "mcp-server-git", network=True)
    state = tmp_path / "state"
    assert confined_argv(git, [tmp_path], state, present=True) == [
        sys.executable, "-m", "core.servers.confine",
        f"--write={tmp_path}", f"--state={state}", "--network", "--", "mcp-server-git",
    ]  # fmt: skip
    assert confined_argv(git, [tmp_path], state, read_only=True, present=True) == [
        sys.executable, "-m", "core.servers.confine",
        f"--read={tmp_path}", "--network", "--", "mcp-server-git",
    ]  # fmt: skip


def test_without_landlock_a_server_runs_plain_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel has no Landlock (FSAGENT_LANDLOCK_ABI=0 stands for it), the sandbox
    is not put around a server (its launcher would refuse it) and the start says so."""
    git = spec("git", "mcp-server-git")
    assert is_confined(git)
    assert confined_argv(git, [tmp_path], tmp_path / "state")[1:3] == ["-m", "core.servers.confine"]
    monkeypatch.setenv("FSAGENT_LANDLOCK_ABI", "0")
    assert not is_confined(git)
    assert confined_argv(git, [tmp_path], tmp_path / "state") == ["mcp-server-git"]


def test_a_server_pinned_all_read_only_gets_no_write_right(tmp_path: Path) -> None:
    time = spec("time", sys.executable, "-m", "mcp_server_time")
    notes = little("notes")
    data = tmp_path / "data"
    assert not pinned_read_only(time, data)  # never pinned: its first use

    async def go() -> None:
        async with open_servers([time, notes], [tmp_path], data, os.environ) as servers:
            assert [s.problem for s in servers] == [None, None]

    run(go())
    assert pinned_read_only(time, data)  # both of its tools are annotated read-only
    assert not pinned_read_only(notes, data)  # write_note is not


def test_a_long_answer_is_cut_and_a_50_mb_one_ends_only_that_server(tmp_path: Path) -> None:
    other = little("other")

    async def go() -> tuple[str, str, str]:
        servers = [little("little"), other]
        async with open_servers(servers, [tmp_path], tmp_path / "d", os.environ) as opened:
            tools = {t.name: t for s in opened for t in s.tools}
            long, _ = await call_tool(tools["little__big"], {"characters": 1_000_000}, "a")
            try:
                await call_tool(tools["little__big"], {"characters": 50_000_000}, "b")
            except Exception as error:  # the graph's tools step makes it the call's answer
                gone = str(error)
            still, _ = await call_tool(tools["other__big"], {"characters": 3}, "c")
            return str(long), gone, str(still)

    long, gone, still = run(go())  # type: ignore[misc]
    assert long.endswith(
        "… cut: the MCP server little answered 1,000,000 characters; the first 262,144 are "
        "kept. Ask it for less."
    )
    assert len(long) < 263_000
    assert gone.startswith("the MCP server little gave no answer (") and "\n" not in gone
    assert "yyy" in still
