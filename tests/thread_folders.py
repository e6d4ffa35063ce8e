"""A thread's folder and another one, for the tests of where a thread acts
(tests/terminal/test_thread_folder.py, tests/terminal/test_early_prompt.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import Workspace
from fake_llm import reply, tool_call

LIST = reply(tool_calls=[tool_call("list_directory", {"path": "."}, id="call_ls")])


def elsewhere(workspace: Workspace) -> Path:
    """Another folder, with its own files: where the person happens to be."""
    other = (workspace.outside / "clone").resolve()
    other.mkdir()
    (other / "Makefile").write_text("all:\n")
    (workspace.root / "notes.md").write_text("the thread's notes\n")
    return other


def without_root(workspace: Workspace, base_url: str, *args: str) -> list[str]:
    command = workspace.command(base_url, *args)
    at = command.index("--root")
    return command[:at] + command[at + 2 :]


def with_root(command: list[str], root: Path) -> list[str]:
    at = command.index("--root")
    return [*command[: at + 1], str(root), *command[at + 2 :]]
