"""Rules on another server's tools (core/approval/policy.py): by `tool = "SERVER.TOOL"` or
`server = "NAME"`, never by "*", never with a path; a bad one is one line naming the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.approval.approval import decide_other
from core.approval.policy import Policy, parse_rules
from core.errors import StartupError


def policy(tmp_path: Path, *rules: dict[str, object]) -> Policy:
    parsed = parse_rules({"rule": list(rules)}, str(tmp_path / "fsagent.toml"))
    return Policy(roots=(tmp_path,), rules=parsed)


def call(name: str) -> dict[str, object]:
    return {"id": "c1", "name": name, "args": {}}


def test_a_star_rule_of_ours_never_lets_another_servers_tool_through(tmp_path: Path) -> None:
    everything = policy(tmp_path, {"tool": "*", "path": "**", "decision": "allow"})
    assert decide_other(call("git__git_commit"), everything, "ask", [], "pin") is None


def test_rules_by_tool_and_by_server_and_deny_beats_allow(tmp_path: Path) -> None:
    rules = policy(
        tmp_path,
        {"server": "git", "decision": "allow"},
        {"tool": ["git.git_reset"], "decision": "deny"},
    )
    allowed = decide_other(call("git__git_commit"), rules, "ask", [], "pin")
    assert allowed is not None and (allowed["type"], allowed["by"]) == ("approve", "rule")
    denied = decide_other(call("git__git_reset"), rules, "ask", [], "pin")
    assert denied is not None and denied["type"] == "reject"
    assert "denied by rule 2 of fsagent.toml (deny git.git_reset)" in denied["reason"]
    assert decide_other(call("memory__write"), rules, "ask", [], "pin") is None
    # A rule on git's tools judges no call of ours.
    assert rules.judge("write_file", {"path": (tmp_path, "a.txt")}).rule is None


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"tool": "git.git_commit", "path": "**", "decision": "allow"}, "has no path"),
        ({"tool": "git.", "decision": "allow"}, "SERVER.TOOL"),
        ({"server": ["git.x"], "decision": "allow"}, "server must be"),
        ({"server": "git", "decision": "maybe"}, "unknown decision"),
    ],
)
def test_a_bad_rule_on_another_server_is_one_line(
    tmp_path: Path, rule: dict[str, object], words: str
) -> None:
    with pytest.raises(StartupError) as caught:
        policy(tmp_path, rule)
    assert str(caught.value).startswith(f"{tmp_path / 'fsagent.toml'}: rule 1: ")
    assert words in str(caught.value)
