"""The answer cap (256 KiB) is counted in UTF-8 bytes, not characters: an answer made of
three-byte characters stays within it, through the real stdio server. Counted in characters,
a dry run's diff of `€` lines came to 321,749 bytes against 262,144 (issue 19)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_session import FilesystemServer

CAP = 256 * 1024
EURO_LINE = "€" * 60  # 180 bytes, 60 characters
MAX_MATCHES = 4000


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("caps")
    (folder / "euros.txt").write_text("".join(f"{n:05} {EURO_LINE}\n" for n in range(4000)))
    return folder


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[FilesystemServer]:
    with FilesystemServer([root]) as running:
        yield running


def test_a_dry_run_diff_of_multibyte_lines_stays_within_the_cap_in_bytes(server, root) -> None:
    new = "".join(f"{n:05} {EURO_LINE}\n" for n in range(4000, 8000))
    answer = server.ok("write_file", path="new.txt", content=new, dry_run=True)
    assert len(answer.encode("utf-8")) <= CAP
    diff = json.loads(answer)["diff"]
    assert diff[-1].startswith("… [cut: ") and diff[-1].endswith(" more lines of diff]")
    assert not (root / "new.txt").exists()


def test_grep_of_multibyte_lines_stays_within_the_cap_and_says_it_was_cut(server) -> None:
    answer = server.ok("grep", path=".", pattern="€", max_matches=MAX_MATCHES)
    assert len(answer.encode("utf-8")) <= CAP
    # The note that closes a capped answer is there, whole: the room kept for it was counted
    # in bytes too.
    assert answer.splitlines()[-1].startswith("(+more: stopped after "), answer[-300:]
    assert answer.endswith("or raise max_matches)")
