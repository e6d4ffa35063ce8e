"""The edges a user hits, each through the real CLI: a reader that leaves the pipe early, a
full disk under threads.db (a small tmpfs this test mounts, as root), a thread file on a
read-only mount, a start that fails, roots that are not folders, and the same situation
answered with the same exit code everywhere."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: commands that must not need LM Studio

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def into_closed_pipe(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `command` with its output into a pipe whose reader is gone already, as after
    `| head -1` has read its line: every write meets a broken pipe, deterministically."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        process = subprocess.run(
            command, stdout=writer, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, cwd=cwd, env=agent_env(), timeout=120,
        )  # fmt: skip
    finally:
        os.close(writer)
    return process


def write_hello() -> dict:
    return reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hello"})])


# --- broken pipes -------------------------------------------------------------------------------


def test_reading_commands_into_a_closed_pipe_exit_quietly(workspace: Workspace) -> None:
    with FakeLLM([write_hello(), text("Done.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "create hello.txt\n").returncode == 3  # paused
    for args in (["threads"], ["threads", "show", "t"], ["approvals"], ["audit"]):
        result = into_closed_pipe(workspace.command(NO_LLM, *args, thread=None), workspace.root)
        assert result.returncode in (0, 141), (args, result.stderr)
        assert result.stderr == "", (args, result.stderr)


def test_approve_into_a_closed_pipe_carries_the_decision_out_whole(workspace: Workspace) -> None:
    with FakeLLM([write_hello(), text("Created hello.txt.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "create hello.txt\n").returncode == 3
        approved = into_closed_pipe(
            workspace.command(llm.base_url, "approve", "t", "--yes", thread=None), workspace.root
        )
        assert len(llm.requests_with_tools()) == 2  # the model heard the result, once
    assert approved.returncode in (0, 141), approved.stderr
    assert "Traceback" not in approved.stderr and "BrokenPipe" not in approved.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"
    listed = workspace.invoke(NO_LLM, "", "threads", thread=None)
    assert listed.stdout.splitlines()[1].endswith("idle"), listed.stdout  # not interrupted


# --- a full disk ----------------------------------------------------------------------------------


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                   check=True)  # fmt: skip
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path, leave: int = 0) -> list[Path]:
    """Fill the disk under `folder` with 4 KiB files; then free `leave` bytes of them."""
    fillers: list[Path] = []
    block = b"\xff" * 4096
    try:
        while True:
            path = folder / f"filler-{len(fillers)}"
            fillers.append(path)
            with path.open("wb") as handle:
                handle.write(block)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    while leave > 0 and fillers:
        fillers.pop().unlink(missing_ok=True)
        leave -= 4096
    return fillers


def free(fillers: list[Path]) -> None:
    for path in fillers:
        path.unlink(missing_ok=True)


def disk_full_line(db: Path) -> str:
    return f"fsagent: disk full writing {db}; free space or pass another --db"


@needs_root
def test_full_disk_at_creation_leaves_nothing_and_starts_afresh_later(
    workspace: Workspace, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk", "256k") as disk:
        workspace.db = disk / "threads.db"
        fillers = fill(disk)
        with FakeLLM([text("Hello!")], auto_route="general") as llm:
            full = workspace.run(llm.base_url, "hi\n")
            assert full.returncode == 2, full.stderr
            assert full.stderr.strip().splitlines() == [disk_full_line(workspace.db)]
            assert not [p for p in disk.iterdir() if not p.name.startswith("filler-")]
            free(fillers)
            again = workspace.run(llm.base_url, "hi\n")
        assert again.returncode == 0, again.stderr
        assert "agent> Hello!" in again.stdout


@needs_root
def test_full_disk_mid_session_and_on_reopening_is_one_line_then_opens_cleanly(
    workspace: Workspace, tmp_path: Path
) -> None:
    big = "x" * 300_000  # a reply larger than what is left
    # The cut-off second turn is run again when the thread opens, then the third is asked.
    script = [text("First answer."), text(big), text("Second answer."), text("Third answer.")]
    disk_folder = tmp_path / "disk"
    with small_disk(disk_folder, "512k") as disk, FakeLLM(script, auto_route="general") as llm:
        workspace.db = disk / "threads.db"
        assert workspace.run(llm.base_url, "first\n").returncode == 0
        fillers = fill(disk, leave=96 * 1024)
        mid = workspace.run(llm.base_url, "second\nthird\n")
        assert mid.returncode == 2, mid.stderr
        assert mid.stderr.strip().splitlines() == [disk_full_line(workspace.db)]
        fillers += fill(disk)
        reopened = workspace.run(llm.base_url, "third\n")
        assert reopened.returncode == 2, reopened.stderr
        assert reopened.stderr.strip().splitlines() == [disk_full_line(workspace.db)]
        free(fillers)
        shown = workspace.invoke(NO_LLM, "", "threads", "show", "t", thread=None)
        assert shown.returncode == 0, shown.stderr
        assert "you> first" in shown.stdout and "agent> First answer." in shown.stdout
        later = workspace.run(llm.base_url, "third\n")
    assert later.returncode == 0, later.stderr
    assert "agent> Second answer." in later.stdout and "agent> Third answer." in later.stdout


# --- a read-only thread file ------------------------------------------------------------------


@needs_root
def test_a_thread_file_on_a_read_only_mount_is_read_and_not_written(
    workspace: Workspace, tmp_path: Path
) -> None:
    with FakeLLM([write_hello(), text("Done.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "create hello.txt\n").returncode == 3
    mounted = tmp_path / "read-only"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(workspace.db.parent), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        workspace.db = mounted / workspace.db.name
        before = workspace.db.read_bytes()
        for args in (["threads"], ["threads", "show", "t"], ["approvals"], ["audit"]):
            result = workspace.invoke(NO_LLM, "", *args, thread=None)
            assert result.returncode == 0, (args, result.stderr)
        assert "waiting for approval" in workspace.invoke(NO_LLM, "", "threads", thread=None).stdout
        line = (
            f"fsagent: {workspace.db} is read-only: threads, threads show, approvals and audit "
            "can read it; to change a thread, make it writable or pass another --db"
        )
        with FakeLLM([text("Done.")], auto_route="filesystem") as llm:
            for args in (["threads", "reset", "t"], ["deny", "t"], ["approve", "t"]):
                result = workspace.run(llm.base_url, "", *args, thread=None)
                assert result.returncode == 2, (args, result.stderr)
                assert result.stderr.strip().splitlines() == [line], args
            session = workspace.run(llm.base_url, "y\n")
        assert session.returncode == 2 and session.stderr.strip().splitlines() == [line]
        assert workspace.db.read_bytes() == before
        assert not (workspace.root / "hello.txt").exists()
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=True)


# --- a failed start, roots, codes -------------------------------------------------------------


def test_a_failed_start_creates_no_thread_file(workspace: Workspace) -> None:
    result = workspace.run(closed_port_url(), "hello\n")
    assert result.returncode == 2
    assert "cannot reach the model server" in result.stderr
    assert not workspace.db.exists()
    assert sorted(p.name for p in workspace.db.parent.iterdir() if "threads.db" in p.name) == []


def test_roots_that_are_not_folders_are_named(workspace: Workspace) -> None:
    (workspace.root / "afile").write_text("x")
    os.mkfifo(workspace.root / "apipe")
    with FakeLLM([]) as llm:
        empty = workspace.run(llm.base_url, "", "--root", "")
        a_file = workspace.run(llm.base_url, "", "--root", str(workspace.root / "afile"))
        a_pipe = workspace.run(llm.base_url, "", "--root", str(workspace.root / "apipe"))
    assert empty.returncode == 2
    assert "--root: an empty path; pass the folder the agent may use" in empty.stderr
    assert a_file.returncode == 2
    assert f"--root {workspace.root / 'afile'}: a file, not a folder" in a_file.stderr
    assert f"--root {workspace.root / 'apipe'}: a named pipe, not a folder" in a_pipe.stderr
    assert not workspace.db.exists()


def test_reading_commands_on_a_missing_file_agree(workspace: Workspace) -> None:
    results = {
        name: workspace.invoke(NO_LLM, "", *args, thread=None)
        for name, args in {
            "threads": ["threads"], "approvals": ["approvals"], "audit": ["audit"],
            "audit --json": ["audit", "--json"],
        }.items()
    }  # fmt: skip
    assert {name: result.returncode for name, result in results.items()} == dict.fromkeys(
        results, 0
    )
    assert results["audit"].stdout.strip() == (
        f"No decisions recorded in {workspace.db} (the file does not exist yet)."
    )
    assert results["audit --json"].stdout.strip() == "[]"
    assert not workspace.db.exists()


def test_counts_are_worded_right(workspace: Workspace) -> None:
    (workspace.root / "two.txt").write_text("a\nb\nc\nd\n")
    read = reply(tool_calls=[tool_call("read_file", {"path": "two.txt"})])
    with FakeLLM([read, text("ok")], auto_route="filesystem") as llm:
        first = workspace.run(llm.base_url, "read two.txt\n")
    assert "… (+1 more line)" in first.stdout
    with FakeLLM([text("hi")], auto_route="general") as llm:
        resumed = workspace.run(llm.base_url, "")
    assert "resuming, 4 messages." in resumed.stdout


def test_ending_the_session_gives_one_code_however_it_ends(workspace: Workspace) -> None:
    failing = reply(status=500, error="Model crashed")
    codes = {}
    for ending in ("", "/quit\n", "quit\n"):
        with FakeLLM([failing], auto_route="general") as llm:
            result = workspace.run(llm.base_url, "hi\n" + ending)
        codes[ending or "end of input"] = result.returncode
    assert set(codes.values()) == {1}, codes  # a turn failed: 1, whatever ended the session


# --- native Windows -------------------------------------------------------------------------------

# The platform check, simulated: the interpreter is told it runs on Windows before fsagent's
# command line is imported, so what runs is the real start-up path.
AS_ON_WINDOWS = "import sys; sys.platform = 'win32'; sys.argv[0] = 'fsagent'; "


def test_native_windows_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    from conftest import REPO

    env = {**agent_env(), "PYTHONPATH": str(REPO)}
    started = subprocess.run(
        [sys.executable, "-c", AS_ON_WINDOWS + "from agent import cli; cli()", "threads"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert started.returncode == 2  # "cannot start", as in the exit codes
    assert started.stderr.splitlines() == [
        "fsagent: native Windows is not supported yet (its sandbox acts through folder "
        "descriptors, which Windows does not have); run it in WSL, where it works"
    ]
    assert started.stdout == ""
    heavy = "sorted(m for m in ('asyncio', 'langgraph', 'store', 'mcp') if m in sys.modules)"
    imported = subprocess.run(
        [sys.executable, "-c", AS_ON_WINDOWS + "import atexit; "
         f"atexit.register(lambda: print({heavy})); import agent"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert imported.stdout.strip() == "[]"  # nothing heavy was loaded first
    assert list(tmp_path.iterdir()) == []  # and nothing was made
