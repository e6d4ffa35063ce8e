"""`expect` binds a write to the place and the state its preview showed (mcp_servers/plans.py),
in the form the agent sends it (core/changes/plans.expect_of: `argument`, `path`, `state`, no
raw `root`/`relative`). Issue 40's mutation run: with the path-only place comparison dropped,
or a moved folder's fingerprint left unchecked, the whole suite passed; these fail on each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_session import FilesystemServer


def agent_expect(server: FilesystemServer, tool: str, **args: Any) -> list[dict[str, Any]]:
    """The plan's paths as the agent gives them back: argument, shown path and state only."""
    paths = json.loads(server.ok("plan", tool=tool, args=args))["paths"]
    return [{"argument": p["argument"], "path": p["path"], "state": p["state"]} for p in paths]


def test_an_approval_for_one_file_does_not_write_another_in_the_same_state(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("same\n")
    (tmp_path / "b.txt").write_text("same\n")  # the same state: only the place differs
    with FilesystemServer([tmp_path]) as server:
        expect = agent_expect(server, "write_file", path="a.txt", content="new\n")
        result = server.call("write_file", path="b.txt", content="new\n", expect=expect)
    assert result.is_error and "\n" not in result.text
    assert result.text.startswith("precondition failed: path is now 'b.txt'")
    assert "the preview showed 'a.txt'" in result.text
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text() == "same\n"


def test_a_folder_whose_contents_changed_since_its_preview_is_not_moved(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("a\n")
    with FilesystemServer([tmp_path]) as server:
        expect = agent_expect(server, "move", source="docs", destination="archive")
        (tmp_path / "docs" / "b.md").write_text("written after the preview\n")
        result = server.call("move", source="docs", destination="archive", expect=expect)
    assert result.is_error and "\n" not in result.text
    assert result.text.startswith("precondition failed: 'docs' changed since it was previewed")
    assert "with 1 file," in result.text and "now folder with 2 files" in result.text
    assert sorted(path.name for path in (tmp_path / "docs").iterdir()) == ["a.md", "b.md"]
    assert not (tmp_path / "archive").exists()
