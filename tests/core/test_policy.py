"""Rules and grants judged on real paths in a real temp folder (no agent run needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.approval.policy import load_policy
from core.errors import StartupError


def rules(root: Path, text: str):
    (root / "fsagent.toml").write_text(text)
    return load_policy(None, [root.resolve()])


def call(tool: str, **args: object) -> dict:
    return {"name": tool, "args": args, "id": "c"}


ALLOW_DOCS = '[[rule]]\ntool = "*"\npath = "docs/**"\ndecision = "allow"\n'


def test_allow_covers_only_what_resolves_inside(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "link.md").symlink_to(tmp_path / "secret.md")
    policy = rules(tmp_path, ALLOW_DOCS)

    def decision(tool: str, **args: object) -> str:
        return policy.judge(tool, args).decision

    assert decision("write_file", path="docs/a.md") == "allow"
    assert decision("write_file", path="docs/new/deep/a.md") == "allow"
    assert decision("write_file", path="docs/../secret.md") == "ask"
    assert decision("write_file", path="docs/link.md") == "ask"  # lands on secret.md
    assert decision("write_file", path=str(tmp_path.parent / "docs" / "x.md")) == "ask"
    assert decision("copy", source="docs/a.md", destination="docs/b.md") == "allow"
    assert decision("copy", source="docs/a.md", destination="b.md") == "ask"


def test_deny_beats_allow_and_any_denied_path_denies(tmp_path: Path):
    policy = rules(
        tmp_path,
        ALLOW_DOCS
        + '[[rule]]\ntool = ["move", "delete"]\npath = "docs/keep/*"\ndecision = "deny"\n',
    )
    verdict = policy.judge("move", {"source": "docs/a.md", "destination": "docs/keep/a.md"})
    assert verdict.decision == "deny" and verdict.rule is not None and verdict.rule.number == 2
    assert (
        policy.judge("delete", {"path": "docs/keep/sub/a.md"}).decision == "allow"
    )  # * is one name
    assert policy.judge("write_file", {"path": "docs/keep/a.md"}).decision == "allow"


def test_a_grant_covers_its_tool_inside_its_folder_only(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    policy = load_policy(None, [tmp_path.resolve()])
    grant = policy.grant_for(call("write_file", path="docs/a.md"))
    assert grant is not None and grant["shown"] == "docs/"
    grants = [grant]
    assert policy.covering_grant(call("write_file", path="docs/sub/b.md"), grants) == grant
    assert policy.covering_grant(call("write_file", path="docs/../b.md"), grants) is None
    assert policy.covering_grant(call("touch", path="docs/b.md"), grants) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[[rule]]\ntool = "write_fiel"\ndecision = "deny"\n', "unknown tool 'write_fiel'"),
        ('[[rule]]\ntool = "*"\ndecison = "deny"\n', "unknown key 'decison'"),
        ('[[rule]]\npath = "../x"\ndecision = "deny"\n', "must be relative to a root"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_a_broken_rule_file_is_one_clear_error(tmp_path: Path, text: str, problem: str):
    with pytest.raises(StartupError) as raised:
        rules(tmp_path, text)
    assert problem in str(raised.value) and "\n" not in str(raised.value)


def test_the_rules_file_is_always_the_persons_to_change(tmp_path: Path):
    from core.approval.approval import decide_without_person

    (tmp_path / "conf").mkdir()
    policy = rules(tmp_path, '[[rule]]\ntool = "*"\npath = "**"\ndecision = "allow"\n')
    everything_granted = [policy.grant_for(call("write_file", path="x.md"))]

    for mode in ("ask", "yes"):
        for touching in (
            call("write_file", path="fsagent.toml", content="# no rules\n"),
            call("delete", path="fsagent.toml"),
            call("move", source="fsagent.toml", destination="conf/old.toml"),
            call("copy", source="conf/other.toml", destination="fsagent.toml", overwrite=True),
        ):
            assert decide_without_person(touching, policy, mode, everything_granted) is None
    # Anything else is still decided by the allow rule, and --approve no still refuses.
    other = decide_without_person(call("write_file", path="conf/a.md"), policy, "ask", [])
    assert other is not None and other["type"] == "approve" and other["by"] == "rule"
    refused = decide_without_person(call("delete", path="fsagent.toml"), policy, "no", [])
    assert refused is not None and refused["type"] == "reject"
