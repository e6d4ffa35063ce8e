"""The one line a session says of what the MCP server's recovery put right at its start
(core/tools/recovery.py), from the report the server gives at `initialize`."""

from __future__ import annotations

from core.tools.recovery import LEAD, line_of

KEPT = "recovery: /r/a.txt is taken, so the entry a stopped server had set aside for it is kept"


def test_nothing_put_right_says_nothing() -> None:
    assert line_of({"kept": [], "put_back": [], "more": 0}) is None
    assert line_of({}) is None


def test_paths_put_back_are_named_up_to_five_then_counted() -> None:
    paths = [f"/r/f{number}.txt" for number in range(7)]
    line = line_of({"put_back": paths, "kept": [KEPT], "more": 3})
    assert line == (
        "⚠ recovery: a server stopped mid-act before this one; put back under their names: "
        "/r/f0.txt, /r/f1.txt, /r/f2.txt, /r/f3.txt, /r/f4.txt and 2 more; "
        f"{KEPT.removeprefix(LEAD)} (and 3 more)"
    )


def test_one_path_put_back_is_put_back_under_its_name() -> None:
    line = line_of({"put_back": ["/r/d"]})
    assert (
        line
        == "⚠ recovery: a server stopped mid-act before this one; put back under its name: /r/d"
    )
