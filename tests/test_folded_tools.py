"""search_files and patch_file offered as forms of list_directory and write_file (issue 30:
the fixed part under 1,000 real tokens). End to end: the real CLI, the real MCP server on a
temp root and the stand-in; what a person checks is the file on disk, what the preview showed
and what the model was told."""

from __future__ import annotations

import pytest

from conftest import Workspace, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call


def offered(request: dict) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools", [])}


def test_the_model_is_offered_seven_tools_and_the_folded_forms_say_both(workspace: Workspace):
    with FakeLLM([text("Hello.")], auto_route="general") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        [request] = llm.requests_with_tools()

    assert result.returncode == 0, result.stderr
    tools = offered(request)
    assert sorted(tools) == sorted(
        ["grep", "list_directory", "read_file", "delete", "move", "write_file", "ask_person"]
    )
    listing = tools["list_directory"]["parameters"]
    assert set(listing["properties"]) == {"path", "pattern"} and listing["required"] == ["path"]
    writing = tools["write_file"]["parameters"]
    assert set(writing["properties"]) == {"path", "content", "edits"}
    assert writing["required"] == ["path"]  # content or edits: which one says the form
    assert "choices" not in tools["ask_person"]["parameters"]["properties"]


def test_write_file_with_edits_is_previewed_and_run_as_a_patch(workspace: Workspace):
    (workspace.root / "notes.md").write_text("one\ntwo\nthree\n")
    edits = [{"old_text": "two", "new_text": "TWO"}]
    script = [
        reply(tool_calls=[tool_call("write_file", {"path": "notes.md", "edits": edits})]),
        text("Changed."),
    ]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "capitalise two\ny\n")

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "notes.md").read_text() == "one\nTWO\nthree\n"
    assert "patch_file(path='notes.md'" in result.stdout  # the call as the server runs it
    assert "-two" in result.stdout and "+TWO" in result.stdout  # the preview was the patch's
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "new_sha256" in answer["content"]


def test_write_file_with_content_and_edits_runs_nothing_and_says_why(workspace: Workspace):
    (workspace.root / "notes.md").write_text("one\n")
    edits = [{"old_text": "one", "new_text": "1"}]
    args = {"path": "notes.md", "content": "all new\n", "edits": edits}
    script = [reply(tool_calls=[tool_call("write_file", args)]), text("Sorry.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "change it\n")

    assert result.returncode == 0, result.stderr
    assert (workspace.root / "notes.md").read_text() == "one\n"
    assert "Approval needed" not in result.stdout  # nothing to approve: nothing would run
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "content (the whole file) or edits, not both" in answer["content"]


@pytest.mark.parametrize("mode", [[], ["--read-only"]], ids=["graph", "read-only"])
def test_list_directory_with_a_pattern_finds_names_below_the_folder(
    workspace: Workspace, mode: list[str]
):
    """Both graphs read the folded form back: under --read-only too, a pattern is a search."""
    (workspace.root / "src" / "deep").mkdir(parents=True)
    (workspace.root / "src" / "deep" / "a.log").write_text("x")
    (workspace.root / "src" / "b.txt").write_text("y")
    script = [
        reply(tool_calls=[tool_call("list_directory", {"path": "src", "pattern": "*.log"})]),
        text("One log."),
    ]
    with FakeLLM(script, auto_route="search") as llm:
        result = workspace.run(llm.base_url, "find the logs\n", *mode)

    assert result.returncode == 0, result.stderr
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "a.log" in answer["content"] and "b.txt" not in answer["content"]


def test_an_empty_pattern_is_a_plain_listing(workspace: Workspace):
    (workspace.root / "a.txt").write_text("x")
    (workspace.root / "sub").mkdir()
    script = [
        reply(tool_calls=[tool_call("list_directory", {"path": ".", "pattern": ""})]),
        text("Two."),
    ]
    with FakeLLM(script, auto_route="search") as llm:
        result = workspace.run(llm.base_url, "what is here\n")

    assert result.returncode == 0, result.stderr
    assert "→ list_directory(path='.')" in result.stdout  # the call as it runs, no empty glob
    [answer] = tool_messages(llm.requests_with_tools()[1])
    assert "a.txt" in answer["content"] and "sub" in answer["content"]
