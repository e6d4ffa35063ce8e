"""fsagent installed as a tool: the wheel built from this tree, installed into a fresh venv,
run from a folder that is not a clone. A piped session writes a file after its approval,
`fsagent regress` replays the example the wheel carries, and `fsagent serve` answers with its
page.

The fresh venv has no packages of its own but fsagent; its dependencies are the project
venv's, reached through a .pth line (no download, and the wheel's own files come first on
sys.path, so what runs is the installed copy, not this tree).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest

from conftest import REPO, agent_env
from fake_llm import FakeLLM, reply, text, tool_call
from serving import READY

# What the wheel is built from: the tracked tree, copied, so the build leaves nothing here
# (node_modules, the tests' JavaScript, is no part of it: 33 MB with the memory server).
SKIPPED = shutil.ignore_patterns(
    ".venv",
    ".git",
    "*.egg-info",
    "build",
    "__pycache__",
    ".*_cache",
    "threads.db*",
    "node_modules",
)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv with the wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=SKIPPED)
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(work / "dist"), str(source)],
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [wheel] = (work / "dist").glob("fsagent-*.whl")
    venv = work / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    (Path(site.stdout.strip()) / "project-venv.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )
    put = run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)],
    )  # fmt: skip
    assert put.returncode == 0, put.stderr
    return venv / "bin"


def test_the_wheel_carries_its_license_and_the_demo(installed: Path) -> None:
    [wheel] = (installed.parent.parent / "dist").glob("fsagent-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read("fsagent-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "fsagent-0.1.0.dist-info/licenses/LICENSE" in names
    assert {"fsagent_examples/demo/cassette.jsonl", "fsagent_examples/demo/files/todo.md"} <= names


def test_installed_fsagent_runs_from_another_folder(
    installed: Path, tmp_path: Path, own_xdg_folders: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    root = elsewhere / "notes"
    root.mkdir(parents=True)
    env = {k: v for k, v in agent_env().items() if k != "PYTHONPATH"}
    where = run([str(installed / "python"), "-c", "import agent; print(agent.__file__)"],
                cwd=elsewhere, env=env)  # fmt: skip
    assert where.stdout.startswith(str(installed.parent)), where.stdout  # not this clone

    replayed = run([str(installed / "fsagent"), "regress"], cwd=elsewhere, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "1 passed, 0 failed" in replayed.stdout

    write = reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hi\n"})])
    with FakeLLM([write, text("Created hello.txt.")], auto_route="filesystem") as llm:
        session = run(
            [str(installed / "fsagent"), "--base-url", llm.base_url, "--root", str(root)],
            input="create hello.txt\ny\n", cwd=elsewhere, env=env,
        )  # fmt: skip
    assert session.returncode == 0, session.stderr
    assert (root / "hello.txt").read_text() == "hi\n"
    assert "agent> Created hello.txt." in session.stdout
    # An installed fsagent keeps threads in the data folder, seen from every folder.
    assert (own_xdg_folders / "data" / "fsagent" / "threads.db").is_file()
    assert not (elsewhere / "threads.db").exists()

    with FakeLLM([]) as llm:
        serve = subprocess.Popen(
            [str(installed / "fsagent"), "--base-url", llm.base_url, "--root", str(root),
             "serve", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True, cwd=elsewhere, env=env,
        )  # fmt: skip
        try:
            assert serve.stdout is not None
            seen, found = [], None
            for line in serve.stdout:
                seen.append(line)
                found = READY.search(line)
                if found:
                    break
            assert found, "".join(seen)
            page = httpx.get(found.group(1), timeout=30)
        finally:
            serve.kill()
            serve.wait(timeout=30)
    assert page.status_code == 200
    assert "<title>fsagent inbox</title>" in page.text
