"""core/servers/sandbox_rules.py on real folders: which install a server's program is read
from (a venv and its base Python, node_modules, a program's own folder, a script alone), and
where its state folder is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.servers.sandbox_rules import install_folders, state_folder


def executable(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_venv_program_reads_its_venv_and_the_python_it_was_made_from(tmp_path: Path) -> None:
    base = tmp_path / "pyenv" / "3.11"
    executable(base / "bin" / "python3.11")
    venv = tmp_path / "tools" / "venv"
    executable(venv / "bin" / "mcp-server-time", f"#!{venv}/bin/python\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    (venv / "pyvenv.cfg").write_text(f"home = {base}/bin\nversion = 3.11.7\n")
    # as pipx and uv put it: a link on PATH into the venv
    executable(tmp_path / "tools" / "x")  # not read: a neighbour of the venv
    link = tmp_path / "local-bin" / "mcp-server-time"
    link.parent.mkdir()
    link.symlink_to(venv / "bin" / "mcp-server-time")
    path = str(link.parent)
    assert install_folders(["mcp-server-time"], path) == (venv, base)
    # `python -m module` with the venv's python, which links to the base interpreter
    command = [str(venv / "bin" / "python"), "-m", "mcp_server_time"]
    assert install_folders(command, path) == (venv, base)


def test_a_node_program_reads_the_outermost_node_modules_and_its_node(tmp_path: Path) -> None:
    node = executable(tmp_path / "nvm" / "v20" / "bin" / "node")
    modules = tmp_path / "project" / "node_modules"
    script = executable(
        modules / "@scope" / "server" / "node_modules" / "inner" / "dist" / "index.js",
        "#!/usr/bin/env node\nconsole.log(1)\n",
    )
    (modules / ".bin").mkdir()
    (modules / ".bin" / "server").symlink_to(script)
    path = os.pathsep.join([str(node.parent), str(modules / ".bin")])
    assert install_folders(["server"], path) == (modules, node.parent)
    # `node /path/to/index.js`: the script's install too
    assert install_folders(["node", str(script)], path) == (node.parent, modules)


def test_a_script_given_as_an_argument_is_read_alone(tmp_path: Path) -> None:
    python = executable(tmp_path / "opt" / "bin" / "python")
    script = executable(tmp_path / "home" / "server.py", "print(1)\n")
    (tmp_path / "home" / ".ssh").mkdir()
    assert install_folders(["python", str(script), "--flag"], str(python.parent)) == (
        python.parent,
        script,
    )


def test_the_state_folder_follows_xdg() -> None:
    home = {"HOME": "/home/ada"}
    assert state_folder("git", home) == Path("/home/ada/.local/state/fsagent/servers/git")
    set_ = {**home, "XDG_STATE_HOME": "/var/state"}
    assert state_folder("git", set_) == Path("/var/state/fsagent/servers/git")
    relative = {**home, "XDG_STATE_HOME": "state"}  # not absolute: ignored, as XDG says
    assert state_folder("git", relative) == Path("/home/ada/.local/state/fsagent/servers/git")
    for name in ("", "..", "a/b", "."):
        with pytest.raises(ValueError, match="names one folder"):
            state_folder(name, home)
