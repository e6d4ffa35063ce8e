"""Approval rules (`fsagent.toml`) and grants: which write calls may skip the person.

    [[rule]]
    tool = "write_file"        # a write tool, a list of them, or "*"
    path = "docs/**"           # glob on the path relative to its root
    decision = "allow"         # allow | ask | deny

    [[rule]]                   # another MCP server's tools (docs/other-servers.md)
    tool = "git.git_commit"    # SERVER.TOOL, a list of them; or server = "git" (every tool)
    decision = "deny"          # no path: another server's arguments are not our paths

"*" is every write tool of our server, never another server's: a rule written before a
server was added never lets its tools through.

Rules are judged on the paths the server's plan says it will act on (core.changes.plans),
never on the text the model wrote: `docs/../secret.md` is `secret.md`, and a symlink counts
as where the tool would land. Paths are compared raw, as the kernel names them (a name's
non-UTF-8 byte as Python's surrogateescape character), never in a form escaped for a
screen. A call without a plan is judged by nothing here. deny beats ask beats allow; no
matching rule means ask. A call with two paths (copy, move) is allowed only if both are, and
denied if either is.

A grant is the person's "approve this kind of call for the rest of the thread": a tool and a
folder. It lives in the thread's state and is judged here the same way as rules.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import StartupError
from core.tools.tool_groups import WRITE_TOOLS, other_server

POLICY_FILE = "fsagent.toml"
DECISIONS: tuple[str, ...] = ("allow", "ask", "deny")
STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
RULE_KEYS = frozenset({"tool", "path", "decision", "server"})

Grant = dict[str, str]
# argument -> (root, path relative to it), raw, as the server's plan reads them
# (core.changes.plans); None for an argument outside every root.
Places = dict[str, tuple[Path, str] | None]


def path_arguments(tool: str) -> tuple[str, ...]:
    """The arguments of a write tool that name a path it changes."""
    return ("source", "destination") if tool in ("copy", "move") else ("path",)


# --- paths ---------------------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """`**` spans folders, `*` and `?` stay inside one name."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(parts))


# --- rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    number: int
    tools: frozenset[str] | None  # None: every write tool of ours
    patterns: tuple[str, ...]
    decision: str
    source: str
    # Another server's rule: the servers it covers whole (`server = "git"`); its `tools`
    # are then qualified names (`git.git_commit`) and it has no paths.
    servers: frozenset[str] = frozenset()

    @property
    def for_others(self) -> bool:
        return bool(self.servers) or any("." in tool for tool in self.tools or ())

    def applies_to(self, tool: str, relative: str) -> bool:
        # Another server's rule has no patterns, so it never judges a call of ours.
        if self.tools is not None and tool not in self.tools:
            return False
        return any(glob_regex(pattern).fullmatch(relative) for pattern in self.patterns)

    def applies_to_other(self, server: str, tool: str) -> bool:
        # A "*" rule (tools None) is ours alone: it names no server's tool.
        return server in self.servers or f"{server}.{tool}" in (self.tools or ())

    def describe(self) -> str:
        if self.for_others:
            named = sorted(self.tools or ()) + [f"server {s}" for s in sorted(self.servers)]
            return f"rule {self.number} of {self.source} ({self.decision} {','.join(named)})"
        tools = "*" if self.tools is None else ",".join(sorted(self.tools))
        paths = ",".join(self.patterns)
        return f"rule {self.number} of {self.source} ({self.decision} {tools} on {paths})"


@dataclass(frozen=True)
class Verdict:
    decision: str  # allow | ask | deny
    rule: Rule | None  # the rule that decided; None when no rule matched


@dataclass(frozen=True)
class Policy:
    roots: tuple[Path, ...]
    rules: tuple[Rule, ...] = ()
    source: str | None = None

    def touches_rules(self, tool: str, places: Places) -> bool:
        """Whether a call could write, replace, move or delete the rules file itself (or a
        folder holding it). Such a call always goes to the person: an agent approved by a
        mode, a grant or an allow rule must never be able to loosen its own rules."""
        rules_file = Path(os.path.realpath(self.source or self.roots[0] / POLICY_FILE))
        for name in path_arguments(tool):
            located = places.get(name)
            if located is None:
                continue
            root, relative = located
            target = root / relative
            if rules_file == target or target in rules_file.parents:
                return True
        return False

    def judge(self, tool: str, places: Places) -> Verdict:
        verdicts = [self.judge_path(tool, places.get(name)) for name in path_arguments(tool)]
        return max(verdicts, key=lambda verdict: STRENGTH[verdict.decision])

    def judge_other(self, name: str) -> Verdict:
        """Another server's call, by its server and tool (`name` as the model calls it)."""
        split = other_server(name)
        if split is None:
            return Verdict("ask", None)
        matching = [rule for rule in self.rules if rule.applies_to_other(*split)]
        if not matching:
            return Verdict("ask", None)
        rule = max(matching, key=lambda rule: STRENGTH[rule.decision])
        return Verdict(rule.decision, rule)

    def judge_path(self, tool: str, located: tuple[Path, str] | None) -> Verdict:
        if located is None:
            return Verdict("ask", None)  # outside every root: no rule can allow it
        _, relative = located
        matching = [rule for rule in self.rules if rule.applies_to(tool, relative)]
        if not matching:
            return Verdict("ask", None)
        rule = max(matching, key=lambda rule: STRENGTH[rule.decision])
        return Verdict(rule.decision, rule)

    # --- grants --------------------------------------------------------------------------

    def grant_for(self, call: Mapping[str, Any], places: Places) -> Grant | None:
        """The grant `a` gives for this call: its tool in the folder of its (first) path."""
        located = places.get(path_arguments(call["name"])[0])
        if located is None:
            return None
        root, relative = located
        # The root itself (or a file right in it) grants the root, never a folder above it.
        folder = root if relative == "." else (root / relative).parent
        if not keepable(str(folder)):
            # A grant lives in the thread's checkpoint, which keeps text as UTF-8: a folder
            # with a non-UTF-8 byte would come back as another name. No grant, then.
            return None
        shown = folder.relative_to(root).as_posix()
        return {"tool": call["name"], "folder": str(folder), "shown": shown + "/"}

    def covering_grant(
        self, call: Mapping[str, Any], grants: list[Grant], places: Places
    ) -> Grant | None:
        """The grant that covers this call: same tool, every path inside its folder."""
        for grant in grants:
            if "pin" in grant:
                continue  # another server's (other_grant): never covers a call of ours
            if grant.get("tool") == call["name"] and self.inside(
                call, Path(grant["folder"]), places
            ):
                return grant
        return None

    def inside(self, call: Mapping[str, Any], folder: Path, places: Places) -> bool:
        for name in path_arguments(call["name"]):
            located = places.get(name)
            if located is None:
                return False
            root, relative = located
            if (root / relative).parts[: len(folder.parts)] != folder.parts:
                return False
        return True


def other_grant(call: Mapping[str, Any], pin: str) -> Grant:
    """The grant `a` gives for another server's call: its tool, as pinned now. A tool whose
    definition changes has another pin, so the grant no longer covers it."""
    return {"tool": call["name"], "folder": "", "shown": "every call", "pin": pin}


def covering_other_grant(
    call: Mapping[str, Any], grants: list[Grant], pin: str | None
) -> Grant | None:
    for grant in grants:
        if pin is not None and grant.get("tool") == call["name"] and grant.get("pin") == pin:
            return grant
    return None


def keepable(text: str) -> bool:
    """Whether text survives being stored as UTF-8 (a raw name's non-UTF-8 byte does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- loading ---------------------------------------------------------------------------------


def load_policy(given: Path | None, roots: list[Path]) -> Policy:
    """The rules from --policy FILE, or fsagent.toml in the first root, or none.

    Anything wrong in the file stops fsagent at start: a rule silently ignored could let a
    write through that the person meant to stop.
    """
    file = given if given is not None else roots[0] / POLICY_FILE
    if given is None and not file.exists():
        return Policy(tuple(roots))
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StartupError(f"--policy {file}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise StartupError(f"{file}: cannot read the rules: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise StartupError(f"{file}: not valid TOML: {error}") from None
    return Policy(tuple(roots), parse_rules(data, str(file)), str(file))


def parse_rules(data: dict[str, Any], source: str) -> tuple[Rule, ...]:
    # [mcp_servers.NAME]: the project's other servers, read by core.servers.config.
    unknown = sorted(set(data) - {"rule", "mcp_servers"})
    if unknown:
        raise StartupError(f"{source}: unknown table {unknown[0]!r}; rules are [[rule]] tables")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise StartupError(f"{source}: write each rule as a [[rule]] table")
    return tuple(parse_rule(raw, number, source) for number, raw in enumerate(raw_rules, 1))


def parse_rule(raw: Any, number: int, source: str) -> Rule:
    def fail(problem: str) -> StartupError:
        return StartupError(f"{source}: rule {number}: {problem}")

    if not isinstance(raw, dict):
        raise fail("must be a table with tool, path and decision")
    unknown = sorted(set(raw) - RULE_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (a rule has tool, path and decision)")
    decision = raw.get("decision")
    if decision not in DECISIONS:
        raise fail(f"unknown decision {decision!r} (use allow, ask or deny)")
    if "server" in raw or any("." in t for t in _names(raw.get("tool", "*"))):
        return parse_other_rule(raw, number, source, decision, fail)
    tools = parse_tools(raw.get("tool", "*"), fail)
    return Rule(number, tools, parse_paths(raw, fail), decision, os.path.basename(source))


def _names(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else value if isinstance(value, list) else []


def parse_other_rule(
    raw: dict[str, Any], number: int, source: str, decision: str, fail: Any
) -> Rule:
    """A rule on another server's tools: `tool = "git.git_commit"` (or a list), or
    `server = "git"` (or a list), never a path."""
    if "path" in raw:
        raise fail("a rule on another server's tools has no path (its arguments are not ours)")
    servers = _names(raw.get("server", []))
    tools = _names(raw.get("tool", [])) if "tool" in raw else []
    if not all(isinstance(s, str) and s and "." not in s for s in servers):
        raise fail('server must be a server\'s name or a list of them, as "git"')
    for tool in tools:
        server, dot, name = tool.partition(".") if isinstance(tool, str) else ("", "", "")
        if not (dot and server and name):
            raise fail(f"tool {tool!r}: another server's tool is SERVER.TOOL, as git.git_commit")
    if not servers and not tools:
        raise fail("name the server (server = \"git\") or its tools (tool = \"git.git_commit\")")
    return Rule(
        number, frozenset(tools), (), decision, os.path.basename(source), frozenset(servers)
    )


def parse_tools(value: Any, fail: Any) -> frozenset[str] | None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise fail('tool must be a tool name, a list of them, or "*"')
    if "*" in names:
        return None
    for name in names:
        if name not in WRITE_TOOLS:
            known = ", ".join(sorted(WRITE_TOOLS))
            raise fail(f'unknown tool {name!r} (rules decide write tools: {known}, or "*")')
    return frozenset(names)


def parse_paths(raw: dict[str, Any], fail: Any) -> tuple[str, ...]:
    value = raw.get("path", "**")
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not patterns:
        raise fail("path must be a glob or a list of globs")
    cleaned = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            raise fail("path must be a glob or a list of globs")
        pattern = pattern.removeprefix("./")
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise fail(f"path {pattern!r} must be relative to a root, without '..'")
        cleaned.append(pattern)
    return tuple(cleaned)
