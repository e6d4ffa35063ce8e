"""The person's other MCP servers for a run (docs/other-servers.md): read from config.toml,
--mcp-config and the first root's fsagent.toml; a project's started only once accepted;
each started (core.servers.launch), its lines said on stderr, its tools handed on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cli.complaints import complain
from core.errors import StartupError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from cli.settings import Settings
    from core.servers.config import ServerSpec


def configured(settings: Settings, roots: list[Path]) -> list[ServerSpec]:
    """Every server configured, and only those a project's file may start: each of its
    entries the person has not accepted as written is said in one line and left out."""
    from core.approval.policy import POLICY_FILE
    from core.servers import acceptance
    from core.servers.config import configured_servers
    from core.user_config import config_path

    project = settings.policy if settings.policy is not None else roots[0] / POLICY_FILE
    specs = configured_servers(
        config_path(os.environ), project if project.is_file() else None, settings.mcp_config
    )
    record_file = acceptance.record_path(os.environ)
    waiting = acceptance.unaccepted(specs, acceptance.read_record(record_file))
    if settings.accept_project_servers:
        for spec in waiting:
            acceptance.accept(spec, record_file)
            complain(f"{spec.where()}: accepted; its yes is kept in {record_file}")
        waiting = []
    record = acceptance.read_record(record_file)
    for spec in waiting:
        changed = (
            " changed since you accepted it and" if acceptance.was_changed(spec, record) else ""
        )
        complain(
            f"{spec.where()}:{changed} not started: a project's server starts only once you "
            f"accept it (run with --accept-project-servers; {record_file} keeps the yes)"
        )
    return [spec for spec in specs if spec.enabled and spec not in waiting]


def sandbox_lines(specs: list[ServerSpec], require: bool) -> None:
    """Each stdio server the kernel sandbox will not hold is said; with
    --require-kernel-sandbox, refused before any starts."""
    from core.servers.launch import is_confined

    for spec in specs:
        if spec.transport != "stdio" or is_confined(spec):
            continue
        why = "sandbox = false" if not spec.sandbox else "this kernel has no Landlock"
        if require:
            raise StartupError(
                f"--require-kernel-sandbox: MCP server {spec.name} ({spec.source}) would run "
                f"without the kernel sandbox ({why}); not started"
            )
        complain(f"MCP server {spec.name} runs without the kernel sandbox ({why})")


@asynccontextmanager
async def other_tools(settings: Settings, roots: list[Path]) -> AsyncIterator[list[BaseTool]]:
    """The other servers' tools for this run (only the proven read-only ones with
    --read-only); every server stopped on exit."""
    from core.servers import gate
    from core.servers.launch import data_folder_of, open_servers

    specs = configured(settings, roots)
    if not specs:
        yield []
        return
    sandbox_lines(specs, settings.require_kernel_sandbox)
    data = data_folder_of(os.environ)
    async with open_servers(specs, roots, data, os.environ, verbose=settings.verbose) as opened:
        for server in opened:
            for line in [server.problem, *server.notes]:
                if line:
                    complain(line)
        tools = [tool for server in opened for tool in server.tools]
        if settings.read_only:
            read_only = gate.read_only_names(tools)
            tools = [tool for tool in tools if tool.name in read_only]
        yield tools
