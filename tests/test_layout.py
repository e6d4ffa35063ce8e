"""The layout's import rules (pyproject.toml's import-linter contracts) hold, and would catch
the mistakes they were written against: a core module importing the terminal session or the
HTTP service, the HTTP service importing the terminal, and the old circle of the graph, the
display and the thread logic."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("cli", "core", "store", "terminal", "web", "mcp_servers")
TOP_LEVEL = ("agent.py", "agent_graph.py", "display.py")
FIRST_PARTY = {*PACKAGES, *(name.removesuffix(".py") for name in TOP_LEVEL)}


def lint_imports(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_of_the_code(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in (*TOP_LEVEL, "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_the_code_keeps_every_contract():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "added, broken",
    [
        # A core module importing the terminal session.
        ("import display\n", "core is not allowed to import display"),
        # The old circle: the thread logic reaching back into the graph module.
        ("from agent_graph import build_graph\n", "core is not allowed to import agent_graph"),
        # The core printing through the terminal's parts.
        ("from terminal.console import Terminal\n", "core is not allowed to import terminal"),
        # The core reaching into a front-end's package.
        ("from web.auth import Access\n", "core is not allowed to import web"),
    ],
)
def test_the_contracts_catch_an_import_against_the_layers(tmp_path: Path, added: str, broken: str):
    code = copy_of_the_code(tmp_path)
    threads = code / "core" / "threads" / "threads.py"
    threads.write_text(threads.read_text() + added)
    result = lint_imports(code)
    assert result.returncode == 1, result.stdout
    assert broken in result.stdout


@pytest.mark.parametrize(
    "added, broken",
    [
        # One front-end built on the other's parts: the HTTP service asking the terminal.
        ("from terminal.review import review\n", "web is not allowed to import terminal"),
        ("import display\n", "web is not allowed to import display"),
    ],
)
def test_the_contracts_keep_the_http_service_off_the_terminal(
    tmp_path: Path, added: str, broken: str
):
    code = copy_of_the_code(tmp_path)
    events = code / "web" / "events.py"
    events.write_text(events.read_text() + added)
    result = lint_imports(code)
    assert result.returncode == 1, result.stdout
    assert broken in result.stdout


def test_the_contracts_catch_a_cycle_inside_a_package(tmp_path: Path):
    code = copy_of_the_code(tmp_path)
    # core.approval.approval is below core.threads.messages; importing back makes a cycle.
    approval = code / "core" / "approval" / "approval.py"
    approval.write_text(approval.read_text() + "from core.threads.messages import content_text\n")
    result = lint_imports(code)
    assert result.returncode == 1, result.stdout
    assert "No cycles between the modules of a package BROKEN" in result.stdout


# --- the top-level modules, which import-linter cannot analyse as packages --------------------


def layers() -> list[set[str]]:
    """The layers, top first; modules side by side in one layer (`a | b`) import neither."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    # The layers of the whole tree; the core's own layers contract has `containers`.
    [contract] = [c for c in contracts if c["type"] == "layers" and "containers" not in c]
    return [{name.strip().strip("()") for name in layer.split("|")} for layer in contract["layers"]]


def first_party_imports(source: str) -> set[str]:
    """Every first-party top-level name a module imports, in functions too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found & FIRST_PARTY


def imports_against_the_layers(module: str, source: str) -> list[str]:
    order = layers()
    [level] = [n for n, layer in enumerate(order) if module in layer]
    allowed = set().union(*order[level + 1 :]) | {"mcp_servers"}
    return sorted(first_party_imports(source) - allowed - {module})


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_each_top_level_module_imports_only_layers_below_it(name: str):
    module = name.removesuffix(".py")
    assert imports_against_the_layers(module, (REPO / name).read_text()) == []


def test_the_top_level_check_catches_the_graph_importing_the_display():
    source = (REPO / "agent_graph.py").read_text() + "\ndef f():\n    import display\n"
    assert imports_against_the_layers("agent_graph", source) == ["display"]


def test_the_top_level_check_catches_the_display_importing_the_http_service():
    source = (REPO / "display.py").read_text() + "\ndef f():\n    from web.app import create_app\n"
    assert imports_against_the_layers("display", source) == ["web"]
