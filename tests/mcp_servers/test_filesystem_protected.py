"""`--protect PATH`: files no write tool changes, whatever was approved (issue 28): fsagent's
rules file and its thread database with its -wal, -shm and -journal names. Judged by the
canonical path, so a link in the root that leads to one does not get through either; a name
that does not exist yet (a -wal) is protected too; a path outside the roots is left out. The
plan marks each such argument, so the client can refuse before it asks anyone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_session import FilesystemServer

RULES = "# rules\n"
ONE_LINE = "is protected (fsagent's rules or its thread file); no approval can change it"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "state").mkdir()
    (root / "fsagent.toml").write_text(RULES)
    (root / "state" / "threads.db").write_bytes(b"SQLite format 3\x00")
    (root / "docs" / "link").symlink_to("../fsagent.toml")
    (root / "docs" / "a.md").write_text("a\n")
    return root


def protecting(root: Path, outside: Path | None = None) -> list[str]:
    flags = ["--protect", str(root / "fsagent.toml")]
    for suffix in ("", "-wal", "-shm", "-journal"):
        flags += ["--protect", str(root / "state" / f"threads.db{suffix}")]
    if outside is not None:
        flags += ["--protect", str(outside)]
    return flags


def planned(server: FilesystemServer, tool: str, **args: Any) -> list[dict[str, Any]]:
    return json.loads(server.ok("plan", tool=tool, args=args))["paths"]


def refused(server: FilesystemServer, tool: str, **args: Any) -> str:
    result = server.call(tool, **args)
    assert result.is_error and "\n" not in result.text, result.text
    assert ONE_LINE in result.text and "edit it yourself outside fsagent" in result.text
    return result.text


def test_the_rules_file_is_never_written_even_through_a_link(root: Path) -> None:
    with FilesystemServer([root], *protecting(root)) as server:
        text = refused(server, "write_file", path="fsagent.toml", content="allow everything")
        assert text.startswith("refused: 'fsagent.toml' is protected")
        (through,) = planned(server, "write_file", path="docs/link", content="x")
        assert through["path"] == "fsagent.toml" and through["protected"] is True
        refused(server, "write_file", path="docs/link", content="allow everything")
        refused(server, "write_file", path="docs/link", content="more", mode="append")
        edits = [{"old_text": "#", "new_text": ""}]
        refused(server, "patch_file", path="fsagent.toml", edits=edits)
        refused(server, "touch", path="docs/link")
        refused(server, "copy", source="docs/a.md", destination="fsagent.toml", overwrite=True)
        refused(server, "move", source="docs/a.md", destination="fsagent.toml", overwrite=True)
        refused(server, "move", source="fsagent.toml", destination="docs/rules.toml")
        refused(server, "delete", path="fsagent.toml")
        (plain,) = planned(server, "write_file", path="docs/a.md", content="x")
        assert plain["protected"] is False
    assert (root / "fsagent.toml").read_text() == RULES
    assert (root / "docs" / "a.md").read_text() == "a\n"
    assert sorted(p.name for p in (root / "docs").iterdir()) == ["a.md", "link"]


def test_a_folder_holding_a_protected_file_is_not_moved_or_deleted(root: Path) -> None:
    with FilesystemServer([root], *protecting(root)) as server:
        text = refused(server, "delete", path="state", recursive=True)
        assert "'state' would change 'state/threads.db', which is protected" in text
        refused(server, "move", source="state", destination="docs/state")
        (entry,) = planned(server, "delete", path="state", recursive=True)
        assert entry["protected"] is True
        # A link is removed or moved as itself: its target, the rules, stays as it is.
        server.ok("move", source="docs/link", destination="docs/link2")
        server.ok("delete", path="docs/link2")
    assert (root / "state" / "threads.db").read_bytes() == b"SQLite format 3\x00"
    assert (root / "fsagent.toml").read_text() == RULES


def test_a_protected_name_that_does_not_exist_yet_stays_free(root: Path) -> None:
    with FilesystemServer([root], *protecting(root)) as server:
        refused(server, "write_file", path="state/threads.db-wal", content="x")
        refused(server, "touch", path="state/threads.db-shm")
        refused(server, "make_dir", path="state/threads.db-journal")
        refused(server, "write_file", path="state/threads.db-wal/inside", content="x")
        refused(server, "copy", source="docs/a.md", destination="state/threads.db-wal")
        (entry,) = planned(server, "touch", path="state/threads.db-wal")
        assert entry["protected"] is True and entry["state"] == {"exists": False}
    assert sorted(p.name for p in (root / "state").iterdir()) == ["threads.db"]


def test_reading_a_protected_file_is_not_changing_it(root: Path) -> None:
    with FilesystemServer([root], *protecting(root)) as server:
        source, destination = planned(
            server, "copy", source="fsagent.toml", destination="docs/rules-copy.toml"
        )
        assert source["protected"] is False and destination["protected"] is False
        server.ok("copy", source="fsagent.toml", destination="docs/rules-copy.toml")
        assert server.ok("read_file", path="fsagent.toml") == RULES
    assert (root / "docs" / "rules-copy.toml").read_text() == RULES


def test_a_protected_path_outside_the_roots_is_left_out(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.db"
    with FilesystemServer([root], *protecting(root, outside=elsewhere)) as server:
        server.ok("write_file", path="docs/new.md", content="fine\n")
        refused(server, "delete", path="fsagent.toml")
    assert (root / "docs" / "new.md").read_text() == "fine\n"
    assert not elsewhere.exists()


def test_a_protected_path_given_as_a_link_protects_the_link_and_its_target(
    root: Path,
) -> None:
    (root / "config").mkdir()
    (root / "config" / "real.toml").write_text(RULES)
    (root / "rules.toml").symlink_to("config/real.toml")
    with FilesystemServer([root], "--protect", str(root / "rules.toml")) as server:
        refused(server, "delete", path="rules.toml")  # the link itself
        refused(server, "write_file", path="config/real.toml", content="x")  # its target
        refused(server, "move", source="docs/a.md", destination="rules.toml", overwrite=True)
    assert (root / "rules.toml").is_symlink()
    assert (root / "config" / "real.toml").read_text() == RULES
