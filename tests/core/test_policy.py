"""Rules and grants judged on the real server's plan of each call, in a real temp folder (no
agent run needed): the paths the policy judges are the plan's, raw, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_session import FilesystemServer

from core.approval.approval import decide_without_person
from core.approval.policy import Places, Policy, load_policy
from core.changes.plans import CallPlan, judged
from core.errors import StartupError


def rules(root: Path, text: str) -> Policy:
    (root / "fsagent.toml").write_text(text)
    return load_policy(None, [root.resolve()])


def call(tool: str, **args: object) -> dict:
    return {"name": tool, "args": args, "id": "c"}


def places(server: FilesystemServer, policy: Policy, tool: str, **args: object) -> Places:
    """Where the call lands, as the server's plan says and the policy reads it."""
    answer = json.loads(server.ok("plan", tool=tool, args=args))
    read = judged(call(tool, **args), CallPlan(answer["paths"]), policy.roots)
    assert read.places is not None, read
    return read.places


ALLOW_DOCS = '[[rule]]\ntool = "*"\npath = "docs/**"\ndecision = "allow"\n'


def test_allow_covers_only_what_resolves_inside(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "secret.md").write_text("secret\n")
    (root / "docs" / "link.md").symlink_to(root / "secret.md")
    policy = rules(root, ALLOW_DOCS)

    with FilesystemServer([root]) as server:

        def decision(tool: str, **args: object) -> str:
            return policy.judge(tool, places(server, policy, tool, **args)).decision

        assert decision("write_file", path="docs/a.md") == "allow"
        assert decision("write_file", path="docs/new/deep/a.md") == "allow"
        assert decision("write_file", path="docs/../secret.md") == "ask"
        assert decision("write_file", path="docs/link.md") == "ask"  # lands on secret.md
        assert decision("copy", source="docs/a.md", destination="docs/b.md") == "allow"
        assert decision("copy", source="docs/a.md", destination="b.md") == "ask"


def test_deny_beats_allow_and_any_denied_path_denies(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "docs" / "keep" / "sub").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("a")
    (root / "docs" / "keep" / "sub" / "a.md").write_text("a")
    policy = rules(
        root,
        ALLOW_DOCS
        + '[[rule]]\ntool = ["move", "delete"]\npath = "docs/keep/*"\ndecision = "deny"\n',
    )
    with FilesystemServer([root]) as server:
        moved = places(server, policy, "move", source="docs/a.md", destination="docs/keep/a.md")
        verdict = policy.judge("move", moved)
        assert verdict.decision == "deny" and verdict.rule is not None and verdict.rule.number == 2
        deep = places(server, policy, "delete", path="docs/keep/sub/a.md")
        assert policy.judge("delete", deep).decision == "allow"  # * is one name
        written = places(server, policy, "write_file", path="docs/keep/a.md")
        assert policy.judge("write_file", written).decision == "allow"


def test_a_grant_covers_its_tool_inside_its_folder_only(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    policy = load_policy(None, [root])
    with FilesystemServer([root]) as server:
        first = call("write_file", path="docs/a.md")
        grant = policy.grant_for(first, places(server, policy, "write_file", path="docs/a.md"))
        assert grant is not None and grant["shown"] == "docs/"
        grants = [grant]

        def covering(tool: str, path: str) -> object:
            where = places(server, policy, tool, path=path)
            return policy.covering_grant(call(tool, path=path), grants, where)

        assert covering("write_file", "docs/sub/b.md") == grant
        assert covering("write_file", "docs/../b.md") is None
        assert covering("touch", "docs/b.md") is None


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
    root = tmp_path.resolve()
    (root / "conf").mkdir()
    (root / "conf" / "other.toml").write_text("")
    policy = rules(root, '[[rule]]\ntool = "*"\npath = "**"\ndecision = "allow"\n')

    with FilesystemServer([root]) as server:
        everything = places(server, policy, "write_file", path="x.md")
        everything_granted = [policy.grant_for(call("write_file", path="x.md"), everything)]

        def decide(touching: dict, mode: str, grants: list) -> object:
            where = places(server, policy, touching["name"], **touching["args"])
            return decide_without_person(touching, policy, mode, grants, where)

        for mode in ("ask", "yes"):
            for touching in (
                call("write_file", path="fsagent.toml", content="# no rules\n"),
                call("delete", path="fsagent.toml"),
                call("move", source="fsagent.toml", destination="conf/old.toml"),
                call("copy", source="conf/other.toml", destination="fsagent.toml", overwrite=True),
            ):
                assert decide(touching, mode, everything_granted) is None
        # Anything else is still decided by the allow rule, and --approve no still refuses.
        other = decide(call("write_file", path="conf/a.md"), "ask", [])
        assert other is not None and other["type"] == "approve" and other["by"] == "rule"
        refused = decide(call("delete", path="fsagent.toml"), "no", [])
        assert refused is not None and refused["type"] == "reject"


def test_without_a_plan_nothing_approves_a_call_and_no_is_still_no(tmp_path: Path):
    """Fail closed: a call the server could not plan is judged on nothing, least of all its
    text. --approve yes refuses it, an allow rule and a grant cannot reach it, the person
    decides otherwise."""
    root = tmp_path.resolve()
    policy = rules(root, '[[rule]]\ntool = "*"\npath = "**"\ndecision = "allow"\n')
    write = call("write_file", path="notes.md", content="x\n")
    grant = {"tool": "write_file", "folder": str(root), "shown": "/"}
    unplanned = "permission denied: 'notes.md'"

    def decide(mode: str) -> object:
        return decide_without_person(write, policy, mode, [grant], None, unplanned=unplanned)

    assert decide("ask") is None  # not the rule's, not the grant's: the person's
    refused = decide("yes")
    assert refused is not None and refused["type"] == "reject" and refused["by"] == "mode"
    assert unplanned in refused["reason"] and "--approve yes does not run it" in refused["reason"]
    said_no = decide("no")
    assert said_no is not None and said_no["type"] == "reject"
