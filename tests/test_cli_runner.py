"""The in-process runner (tests/cli_runner.py): what `Workspace.invoke` returns is what
`Workspace.run` returns for the same command, and whatever a run changes of the process is put
back, so the tests that use it stay independent in any order."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import agent
from cli import background_imports
from cli_runner import invoke
from conftest import Workspace
from core.context import models

NO_LLM = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    "args",
    [
        ("threads",),
        ("approvals",),
        ("audit", "--json"),
        ("threads", "show", "nope"),
        ("undo", "nope"),
        ("treads",),
        ("threads", "--transcript", "x.jsonl"),
    ],
)
def test_invoke_returns_what_run_returns(workspace: Workspace, args: tuple[str, ...]) -> None:
    ran = workspace.run(NO_LLM, "", *args, thread=None)
    invoked = workspace.invoke(NO_LLM, "", *args, thread=None)
    assert (invoked.returncode, invoked.stdout, invoked.stderr) == (
        ran.returncode,
        ran.stdout,
        ran.stderr,
    )
    assert invoked.args == ran.args


def test_what_a_run_changes_of_the_process_is_put_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, object] = {}

    def main(argv: list[str]) -> int:
        seen.update(
            argv=sys.argv[1:],
            cwd=os.getcwd(),
            home=os.environ.get("HOME"),
            given=os.environ.get("GIVEN"),
            tty=sys.stdin.isatty(),
            lines=[input("question? "), sys.stdin.read()],
            heavy=background_imports.HEAVY_IMPORTED.is_set(),
            found=dict(models._found),
            root_log=(list(logging.getLogger().handlers), logging.getLogger().level),
        )
        logging.getLogger("some.library").warning("a library's warning")
        os.environ["LEFT_BEHIND"] = "1"
        os.chdir("/")
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        logging.getLogger().addHandler(logging.NullHandler())
        os.umask(0o077)
        background_imports.HEAVY_IMPORTED.set()
        models._found["http://elsewhere/v1"] = "ollama"
        print("out é")
        print("err \udcff", file=sys.stderr)
        return 5

    monkeypatch.setattr(agent, "main", main)
    # Other in-process tests of this worker (the HTTP service's) may have found servers too.
    monkeypatch.setitem(models._found, "http://before/v1", "lmstudio")
    before_found = dict(models._found)
    before_signals = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    before_handlers, before_mask = logging.getLogger().handlers[:], os.umask(0o022)
    os.umask(before_mask)
    folder, argv = os.getcwd(), sys.argv

    done = invoke(["x", "--y"], input="yes\r\nrest\n", env={"GIVEN": "1"}, cwd=tmp_path)

    assert (done.returncode, done.stdout) == (5, "question? out é\n")
    assert done.stderr == "a library's warning\nerr \\udcff\n"
    assert seen == {
        "argv": ["x", "--y"],
        "cwd": str(tmp_path),
        "home": None,  # the environment given, whole
        "given": "1",
        "tty": False,
        "lines": ["yes", "rest\n"],  # a pipe's universal newlines
        "heavy": False,  # as in a new process
        "found": {},
        "root_log": ([], logging.WARNING),
    }
    assert "LEFT_BEHIND" not in os.environ and os.environ.get("GIVEN") is None
    assert os.getcwd() == folder and sys.argv is argv
    assert {n: signal.getsignal(n) for n in before_signals} == before_signals
    assert logging.getLogger().handlers == before_handlers
    mask = os.umask(0o022)
    os.umask(mask)
    assert mask == before_mask
    assert not background_imports.HEAVY_IMPORTED.is_set()
    assert models._found == before_found


@pytest.mark.parametrize(
    ("raised", "code", "says"),
    [
        (SystemExit(3), 3, ""),
        (SystemExit(None), 0, ""),
        (SystemExit("fsagent: gone"), 1, "fsagent: gone\n"),
        (RuntimeError("boom"), 1, "RuntimeError: boom\n"),
    ],
)
def test_an_exit_or_an_exception_is_the_exit_code_a_process_gives(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int, says: str
) -> None:
    def main(argv: list[str]) -> int:
        raise raised

    monkeypatch.setattr(agent, "main", main)
    done = invoke([])
    assert done.returncode == code
    assert done.stderr.endswith(says)
    if isinstance(raised, RuntimeError):
        assert done.stderr.startswith("Traceback")


def test_a_thread_left_running_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()

    def main(argv: list[str]) -> int:
        threading.Thread(target=stop.wait, name="left-behind", daemon=True).start()
        return 0

    monkeypatch.setattr(agent, "main", main)
    monkeypatch.setattr("cli_runner.THREAD_GRACE_SECONDS", 0.1)
    try:
        with pytest.raises(AssertionError, match="left threads running: .*left-behind"):
            invoke([])
    finally:
        stop.set()


def test_verbose_is_refused_its_server_log_would_not_be_captured() -> None:
    with pytest.raises(ValueError, match="--verbose"):
        invoke(["undo", "t", "--verbose"])
