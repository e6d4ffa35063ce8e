"""The server's own names (mcp_servers/reserved.py) are no tool's path: every name starting
`.fsagent-` (its temp, set-aside and kept entries) is refused as the source or target of every
write tool and as the path of every read, at the act with one line, and marked `reserved` in
the plan. Issue 40: `move(important.db -> .fsagent-0123456789abcdef.tmp)` was previewed as a
plain rename and answered OK; the file vanished from every listing, and the next start
deleted it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp_session import FilesystemServer

from mcp_servers.capture import KEPT_PREFIX
from mcp_servers.dirfd import temp_name
from mcp_servers.reserved import RESERVED_PREFIX

TEMP = ".fsagent-0123456789abcdef.tmp"  # as a killed server leaves one
KEPT = ".fsagent-kept-0123456789abcdef"
NEW_TEMP = ".fsagent-fedcba9876543210.tmp"

# (tool, arguments, the argument that is reserved)
WRITES: list[tuple[str, dict[str, Any], str]] = [
    ("write_file", {"path": NEW_TEMP, "content": "hidden\n"}, "path"),
    ("write_file", {"path": TEMP, "content": "over\n"}, "path"),
    ("write_file", {"path": f"docs/{NEW_TEMP}", "content": "x\n", "mode": "append"}, "path"),
    ("patch_file", {"path": KEPT, "edits": [{"old_text": "kept", "new_text": "x"}]}, "path"),
    ("make_dir", {"path": f"{NEW_TEMP}/sub"}, "path"),
    ("touch", {"path": KEPT}, "path"),
    ("delete", {"path": TEMP}, "path"),
    ("delete", {"path": f"{TEMP}/inner.txt"}, "path"),
    ("copy", {"source": "important.db", "destination": NEW_TEMP}, "destination"),
    ("copy", {"source": KEPT, "destination": "copied.txt"}, "source"),
    ("move", {"source": "important.db", "destination": NEW_TEMP}, "destination"),
    ("move", {"source": "docs", "destination": f"docs2/{NEW_TEMP}"}, "destination"),
    ("move", {"source": KEPT, "destination": "back.txt"}, "source"),
]
READS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": KEPT}),
    ("read_file", {"path": "to_temp"}),  # a link whose target is a reserved name
    ("read_multiple_files", {"paths": [KEPT]}),
    ("get_file_info", {"path": TEMP}),
    ("file_hash", {"path": KEPT}),
    ("diff_files", {"path_a": "important.db", "path_b": KEPT}),
    ("list_directory", {"path": TEMP}),
    ("directory_tree", {"path": TEMP}),
    ("search_files", {"path": TEMP, "pattern": "*"}),
    ("grep", {"pattern": "kept", "path": KEPT}),
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reserved")


@pytest.fixture(scope="module")
def server(root: Path) -> Any:
    with FilesystemServer([root]) as server:
        # Made once the server runs: its start removes older entries of the temp form.
        (root / "important.db").write_text("the data\n")
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("a\n")
        (root / "docs2").mkdir()
        (root / TEMP).mkdir()  # a folder set aside
        (root / TEMP / "inner.txt").write_text("inner\n")
        (root / KEPT).write_text("kept\n")
        (root / "to_temp").symlink_to(TEMP)
        yield server


def tree(root: Path) -> dict[str, str]:
    """Every entry below `root` with what it holds: what must not change."""
    found = {}
    for top, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(top) / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[relative] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[relative] = "folder"
            else:
                found[relative] = path.read_text()
    return found


def test_the_server_names_its_entries_in_the_reserved_form() -> None:
    assert temp_name().startswith(RESERVED_PREFIX)
    assert KEPT_PREFIX.startswith(RESERVED_PREFIX)


@pytest.mark.parametrize(("tool", "args", "argument"), WRITES, ids=lambda value: str(value)[:40])
def test_a_write_through_a_reserved_name_is_marked_in_its_plan_and_refused_at_the_act(
    server: FilesystemServer, root: Path, tool: str, args: dict[str, Any], argument: str
) -> None:
    before = tree(root)
    paths = json.loads(server.ok("plan", tool=tool, args=args))["paths"]
    assert {entry["argument"]: entry["reserved"] for entry in paths} == {
        entry["argument"]: entry["argument"] == argument for entry in paths
    }
    result = server.call(tool, **args)
    assert result.is_error and "\n" not in result.text, result.text
    assert result.text.startswith("reserved: ") and "choose another name" in result.text
    # With the plan's own expect too (what the agent sends): refused all the same.
    again = server.call(tool, **args, expect=paths)
    assert again.is_error and again.text.startswith("reserved: "), again.text
    assert tree(root) == before


@pytest.mark.parametrize(("tool", "args"), READS, ids=lambda value: str(value)[:40])
def test_a_read_through_a_reserved_name_is_refused(
    server: FilesystemServer, root: Path, tool: str, args: dict[str, Any]
) -> None:
    result = server.call(tool, **args)
    assert result.is_error and "\n" not in result.text, result.text
    assert result.text.startswith("reserved: "), result.text
    assert "kept\n" not in result.text and "inner" not in result.text


def test_ordinary_names_that_look_alike_are_not_reserved(
    server: FilesystemServer, root: Path
) -> None:
    for name in ("fsagent-notes.txt", ".fsagent", "x.fsagent-0123456789abcdef.tmp"):
        server.ok("write_file", path=name, content="mine\n")
        assert (root / name).read_text() == "mine\n"
        (root / name).unlink()
