"""core/servers/confine.py with real processes: the hostile test server
(tests/servers/hostile_server.py) started through the launcher and called over MCP stdio,
with the kernel refusing what it must and allowing what it needs.

Each place is a real temp folder: a root (`--write`), a state folder (`--state`, made by the
launcher), a folder outside with a file that must stay unchanged, and a home folder with an
~/.ssh key. Each listener is the test's own, outside every root, and is checked to have
received nothing (or, with `--network`, the text sent).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from server_calls import call_server

from core.servers.confine import SECCOMP_ENV, launcher_argv
from mcp_servers.kernel_sandbox import ABI_ENV, kernel_abi

REPO = Path(__file__).resolve().parents[3]
HOSTILE = REPO / "tests" / "servers" / "hostile_server.py"
KERNEL_ABI, _ = kernel_abi()
pytestmark = pytest.mark.skipif(KERNEL_ABI < 6, reason="these tests need Landlock ABI 6")
DENIED = "Permission denied"


@dataclass
class Places:
    root: Path
    state: Path
    outside: Path
    kept: Path
    secret: Path

    def confined(self, *, network: bool = False, allow_unconfined: bool = False) -> list[str]:
        return launcher_argv(
            [sys.executable, str(HOSTILE)],
            writes=[self.root],
            state=self.state,
            network=network,
            allow_unconfined=allow_unconfined,
        )


@pytest.fixture
def places(tmp_path: Path) -> Places:
    root, outside, home = tmp_path / "root", tmp_path / "outside", tmp_path / "home"
    for folder in (root, outside, home / ".ssh"):
        folder.mkdir(parents=True)
    kept = outside / "kept.txt"
    kept.write_text("untouched\n")
    secret = home / ".ssh" / "id_ed25519"
    secret.write_text("PRIVATE KEY\n")
    state = home / ".local" / "state" / "fsagent" / "servers" / "hostile"
    return Places(root, state, outside, kept, secret)


def test_writes_reach_the_roots_and_the_state_folder_and_nothing_outside(places: Places) -> None:
    calls = [
        ("write_text", {"path": str(places.root / "inside.txt"), "text": "in the root"}),
        ("write_text", {"path": str(places.state / "state.json"), "text": "{}"}),
        ("write_text", {"path": str(places.kept), "text": "overwritten"}),
        ("write_text", {"path": str(places.outside / "new.txt"), "text": "made"}),
        ("peek", {"path": str(places.kept), "text": "the read-only tool wrote this"}),
        ("write_text", {"path": "/dev/null", "text": "nothing"}),
    ]
    session = call_server(places.confined(), calls)
    inside, state, over, new, lie, null = session.answers
    for allowed in (inside, state, null):
        assert not allowed.is_error and allowed.text == "written"
    assert (places.root / "inside.txt").read_text() == "in the root"
    assert (places.state / "state.json").read_text() == "{}"
    for refused in (over, new, lie):
        assert refused.is_error and DENIED in refused.text
    assert places.kept.read_text() == "untouched\n"
    assert sorted(os.listdir(places.outside)) == ["kept.txt"]


def test_reads_of_secrets_outside_are_refused(places: Places) -> None:
    (places.root / "notes.txt").write_text("my notes\n")
    calls = [
        ("read_text", {"path": str(places.root / "notes.txt")}),
        ("read_text", {"path": str(places.secret)}),
        ("read_text", {"path": "/etc/shadow"}),  # /etc is read by name, not whole
        ("read_text", {"path": "/proc/1/cmdline"}),  # another process's command line
        ("read_text", {"path": "/etc/passwd"}),
    ]
    session = call_server(places.confined(), calls)
    notes, key, shadow, cmdline, passwd = session.answers
    assert not notes.is_error and notes.text == "my notes\n"
    for refused in (key, shadow, cmdline):
        assert refused.is_error and DENIED in refused.text
    assert "PRIVATE KEY" not in key.text
    assert not passwd.is_error and "root:" in passwd.text


class Listeners:
    """A TCP, a UDP and a named UNIX listener on this machine, outside every root; and an
    abstract UNIX one."""

    def __init__(self, folder: Path) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.named_path = str(folder / "agent.sock")
        self.named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.named.bind(self.named_path)
        self.named.listen()
        self.abstract_name = f"\0fsagent-confine-{os.getpid()}-{id(self)}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind(self.abstract_name)
        self.abstract.listen()
        for listener in self.all():
            listener.setblocking(False)

    def all(self) -> list[socket.socket]:
        return [self.tcp, self.udp, self.named, self.abstract]

    def calls(self) -> list[tuple[str, dict[str, object]]]:
        host = {"host": "127.0.0.1"}
        return [
            ("tcp_connect", {**host, "port": self.tcp.getsockname()[1], "text": "tcp"}),
            ("udp_send", {**host, "port": self.udp.getsockname()[1], "text": "udp"}),
            ("unix_connect", {"path": self.named_path, "text": "named"}),
            ("unix_connect", {"path": self.abstract_name, "text": "abstract"}),
        ]

    def received(self) -> list[str]:
        """What each listener got (the server has answered, so anything sent is there)."""
        got = []
        for listener in self.all():
            try:
                if listener.type == socket.SOCK_DGRAM:
                    got.append(listener.recv(64).decode())
                else:
                    connection = listener.accept()[0]
                    with connection:
                        connection.settimeout(10)
                        got.append(connection.recv(64).decode())
            except BlockingIOError:
                got.append("")
        return got

    def close(self) -> None:
        for listener in self.all():
            listener.close()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    # A short folder of its own: a socket's path may not pass 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="fsagent-sock-"))
    opened = Listeners(folder)
    try:
        yield opened
    finally:
        opened.close()
        shutil.rmtree(folder)


def sent(session_answers: list) -> list[str]:
    return ["sent" if not answer.is_error else answer.text for answer in session_answers]


def test_no_network_without_the_flag(places: Places, listeners: Listeners) -> None:
    session = call_server(places.confined(), listeners.calls())
    for answer in session.answers:
        assert answer.is_error and DENIED in answer.text
    assert listeners.received() == ["", "", "", ""]


def test_with_network_tcp_and_udp_reach_a_listener_and_unix_sockets_do_not(
    places: Places, listeners: Listeners
) -> None:
    session = call_server(places.confined(network=True), listeners.calls())
    tcp, udp, named, abstract = session.answers
    assert sent([tcp, udp]) == ["sent", "sent"]
    for answer in (named, abstract):
        assert answer.is_error and DENIED in answer.text
    assert listeners.received() == ["tcp", "udp", "", ""]


@pytest.mark.parametrize("layer", ["landlock", "seccomp"])
def test_each_layer_alone_closes_tcp(places: Places, listeners: Listeners, layer: str) -> None:
    """Each layer is tested by itself, so dropping a rule of one is not hidden by the other.
    Landlock alone closes TCP and abstract sockets (ABI 4, 6) and leaves UDP and named
    sockets open (why the seccomp filter is there); seccomp alone closes every socket."""
    env = {SECCOMP_ENV: "0"} if layer == "landlock" else {ABI_ENV: "0"}
    confined = places.confined(allow_unconfined=layer == "seccomp")
    session = call_server(confined, listeners.calls(), env=env)
    tcp, udp, named, abstract = session.answers
    if layer == "landlock":
        assert sent(session.answers)[1:3] == ["sent", "sent"]
        assert listeners.received() == ["", "udp", "named", ""]
        assert tcp.is_error and DENIED in tcp.text
        assert abstract.is_error and "Operation not permitted" in abstract.text  # a scope: EPERM
    else:
        assert listeners.received() == ["", "", "", ""]
        for answer in (tcp, udp, named, abstract):
            assert answer.is_error and DENIED in answer.text


def test_a_signal_to_a_process_outside_is_refused(places: Places) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        session = call_server(places.confined(), [("signal", {"pid": sleeper.pid})])
        assert session.answers[0].is_error and "not permitted" in session.answers[0].text
        assert sleeper.poll() is None  # still running
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()


def run_confine(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "core.servers.confine", *arguments],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_landlock_the_server_is_refused_in_one_line(tmp_path: Path) -> None:
    program = [sys.executable, "-c", "print('the server ran')"]
    done = run_confine("--write", str(tmp_path), "--", *program, env={ABI_ENV: "0"})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"confine: {sys.executable} not started: no kernel sandbox ({ABI_ENV}=0 says this "
        "kernel has no Landlock); set sandbox = false for this server to run it unconfined\n"
    )


def test_allowed_unconfined_it_runs_and_says_so(tmp_path: Path) -> None:
    program = [sys.executable, "-c", "print('the server ran')"]
    done = run_confine(
        "--allow-unconfined", "--write", str(tmp_path), "--", *program, env={ABI_ENV: "0"}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the server ran\n"
    assert done.stderr == (
        f"confine: {sys.executable} runs unconfined: {ABI_ENV}=0 says this kernel has no "
        "Landlock; no network\n"
    )


def test_an_older_abi_says_its_gaps(tmp_path: Path) -> None:
    done = run_confine(
        "--write", str(tmp_path), "--", sys.executable, "-c", "print('ran')", env={ABI_ENV: "3"}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"
    [line] = done.stderr.splitlines()
    assert line.startswith(f"confine: {sys.executable} held by Landlock ABI 3; no network; gaps:")
    assert "no network rights before ABI 4" in line and "no scopes before ABI 6" in line


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--", "no-such-server-xyz"], "no-such-server-xyz: no such program on PATH"),
        (["--write", "/no/such/root", "--", "true"], "--write /no/such/root: no such folder"),
        ([], "no server command: give it after --"),
    ],
)
def test_a_mistake_is_one_line(arguments: list[str], said: str) -> None:
    done = run_confine(*arguments, env={})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"confine: {said}")


def test_git_works_in_a_root_with_its_home_in_the_state_folder(tmp_path: Path) -> None:
    """The person's ~/.gitconfig is closed to the server; git stops on a config file it may
    not read, so the server's HOME is its state folder (or a missing folder without one)."""
    home, root, state = tmp_path / "home", tmp_path / "repo", tmp_path / "state"
    for folder in (home, root):
        folder.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Person\n\temail = p@example.org\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text("[core]\n\tquotepath = off\n")
    (root / "notes.txt").write_text("notes\n")
    identity = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_AUTHOR_NAME": "Server",
        "GIT_AUTHOR_EMAIL": "server@example.org",
        "GIT_COMMITTER_NAME": "Server",
        "GIT_COMMITTER_EMAIL": "server@example.org",
    }
    git = ["--write", str(root), "--state", str(state), "--", "git", "-C", str(root)]
    for step in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", "first"]):
        done = run_confine(*git, *step, env=identity)
        assert done.returncode == 0, done.stderr
    logged = run_confine(*git, "log", "--format=%an %s", env=identity)
    assert logged.stdout == "Server first\n"
    assert sorted(os.listdir(state)) == ["tmp"]  # nothing else was written there
    # a server with no write right: the root read only, no state folder, a home not there
    reading = ["--read", str(root), "--", "git", "-C", str(root)]
    status = run_confine(*reading, "status", "--short", env=identity)
    assert status.returncode == 0, status.stderr
    assert status.stdout == ""
    tagged = run_confine(*reading, "tag", "v1", env=identity)
    assert tagged.returncode != 0 and "Permission denied" in tagged.stderr
    assert not (root / ".git" / "refs" / "tags" / "v1").exists()


def test_a_program_written_in_a_root_cannot_be_run(tmp_path: Path) -> None:
    program = tmp_path / "dropped.sh"
    program.write_text("#!/bin/sh\necho ran\n")
    program.chmod(0o755)
    done = run_confine(
        "--write", str(tmp_path), "--", "sh", "-c", 'exec "$DROPPED"', env={"DROPPED": str(program)}
    )
    assert done.returncode == 126
    assert "Permission denied" in done.stderr and "ran" not in done.stdout


def test_temp_files_go_to_the_state_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    made = "import tempfile; print(tempfile.mkstemp()[1])"
    done = run_confine("--state", str(state), "--", sys.executable, "-c", made, env={})
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == state / "tmp"


def test_a_read_only_server_cannot_write_through_a_lying_tool(places: Places) -> None:
    """A server whose every tool claims read-only gets its roots to read, and no state
    folder: the tool that lies (`peek` writes) is refused by the kernel."""
    notes = places.root / "notes.txt"
    notes.write_text("my notes\n")
    confined = launcher_argv(
        [sys.executable, str(HOSTILE), "--tools", "peek,read_text"], reads=[places.root]
    )
    calls = [("read_text", {"path": str(notes)}), ("peek", {"path": str(notes), "text": "lie"})]
    session = call_server(confined, calls)
    read, lie = session.answers
    assert not read.is_error and read.text == "my notes\n"
    assert lie.is_error and DENIED in lie.text
    assert notes.read_text() == "my notes\n"
