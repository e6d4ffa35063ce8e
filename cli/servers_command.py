"""`fsagent servers [list|accept|revoke|repin] [NAME]`: the person's other MCP servers as
configured (cli/servers.py starts them for a run), and the two records fsagent keeps of them
under the data folder: the yes to each project's server (core.servers.acceptance) and each
server's pinned tool definitions (core.servers.pins). Each action is one line, or one line a
server for `list`; nothing is started.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from cli.complaints import complain
from cli.roots import check_roots
from cli.servers import all_configured, project_file

if TYPE_CHECKING:
    from pathlib import Path

    from cli.settings import Settings
    from core.servers.config import ServerSpec

ACTIONS = ("list", "accept", "revoke", "repin")


def servers_command(args: argparse.Namespace, settings: Settings) -> int:
    if settings.accept_project_servers:
        complain("servers does not take --accept-project-servers (fsagent servers accept NAME)")
        return 2
    roots = check_roots(settings.roots)
    if args.action == "list":
        return list_servers(settings, roots)
    from core.servers.config import NAME
    from core.tools.tool_groups import SEPARATOR

    # The name becomes a file's name (pins/NAME.json): only a server's name, never a path.
    if not NAME.fullmatch(args.name) or SEPARATOR in args.name:
        complain(f"servers {args.action}: {args.name!r} is not a server's name")
        return 2
    if args.action == "accept":
        return accept(settings, roots, args.name)
    if args.action == "revoke":
        return revoke(settings, roots, args.name)
    return repin(args.name)


def list_servers(settings: Settings, roots: list[Path]) -> int:
    """One line a server: its name, where it is written, and what fsagent keeps of it."""
    from core.servers import acceptance
    from core.servers.launch import data_folder_of
    from core.text import visible
    from core.user_config import config_path

    specs = all_configured(settings, roots)
    if not specs:
        print(
            visible(
                f"No MCP servers configured (yours: {config_path(os.environ)}; the project's: "
                f"{project_file(settings, roots)}).",
                keep="",
            )
        )
        return 0
    record = acceptance.read_record(acceptance.record_path(os.environ))
    data = data_folder_of(os.environ)
    width = max(len(spec.name) for spec in specs)
    for spec in specs:
        said = [kind_of(spec, record), pinned_of(spec, data)]
        if not spec.enabled:
            said.insert(0, "disabled (enabled = false)")
        print(visible(f"{spec.name:<{width}}  {spec.source}  {'; '.join(said)}", keep=""))
    return 0


def kind_of(spec: ServerSpec, record: dict[str, str]) -> str:
    from core.servers import acceptance

    if spec.origin == "user":
        return "yours"
    if spec.origin == "flag":
        return "yours (--mcp-config)"
    if acceptance.is_accepted(spec, record):
        return "a project's, accepted"
    if acceptance.was_changed(spec, record):
        return f"a project's, changed since you accepted it (fsagent servers accept {spec.name})"
    return f"a project's, not accepted (fsagent servers accept {spec.name})"


def pinned_of(spec: ServerSpec, data: Path) -> str:
    from core.servers import pins
    from core.text import counted

    pinned = pins.load_pins(pins.pin_file(data, spec.name))
    if pinned is None:
        return "not pinned yet (its tools are pinned at its first start)"
    return f"{counted(len(pinned), 'tool')} pinned"


def accept(settings: Settings, roots: list[Path], name: str) -> int:
    """Record the yes to a project's server as written now, after saying what it runs."""
    from cli.server_acceptance import question_lines
    from core.servers import acceptance
    from core.text import visible

    spec = next((spec for spec in all_configured(settings, roots) if spec.name == name), None)
    where = project_file(settings, roots)
    if spec is None:
        complain(f"servers accept: no server named {name!r} is configured (nor in {where})")
        return 1
    if spec.origin != "project":
        print(visible(f"{spec.where()}: yours; it needs no yes.", keep=""))
        return 0
    record_file = acceptance.record_path(os.environ)
    changed = acceptance.was_changed(spec, acceptance.read_record(record_file))
    for line in question_lines(spec, changed, roots):
        print(visible(line, keep=""))
    acceptance.accept(spec, record_file)
    print(visible(f"Accepted {name} as written; the yes is kept in {record_file}.", keep=""))
    return 0


def revoke(settings: Settings, roots: list[Path], name: str) -> int:
    """Take back the yes to the project's server NAME (read by the key, not the file: a
    project file that is broken or gone can still be revoked)."""
    from core.servers import acceptance

    record_file = acceptance.record_path(os.environ)
    where = project_file(settings, roots)
    if acceptance.revoke(where, name, record_file):
        print(
            f"Revoked {name} of {visible_path(where)}: it is asked about again before it "
            "next starts."
        )
        return 0
    elsewhere = acceptance.accepted_in(name, acceptance.read_record(record_file))
    hint = f" (it has one in {', '.join(elsewhere)}: run this there, or with --root)"
    complain(
        f"servers revoke: no yes to {name} of {where} in {record_file}{hint if elsewhere else ''}"
    )
    return 1


def repin(name: str) -> int:
    """Forget a server's pinned tool definitions: the next start pins them as it lists them
    then (the way to accept a changed tool)."""
    from core.servers import pins
    from core.servers.launch import data_folder_of

    path = pins.pin_file(data_folder_of(os.environ), name)
    if not pins.forget(path):
        complain(f"servers repin: no pinned tools for {name} ({path}); nothing to forget")
        return 1
    print(
        f"Forgot {name}'s pinned tools ({visible_path(path)}): its next start pins them as "
        "it lists them then."
    )
    return 0


def visible_path(path: Path) -> str:
    from core.text import visible

    return visible(str(path), keep="")
