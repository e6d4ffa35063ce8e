"""The places a person's own MCP server may reach under the kernel sandbox (confine.py).

Reading and running: the system (`SYSTEM`, the `/etc` files `ETC` names, the devices of
`DEVICES`) and the server's own install (`install_folders`). Writing: the folders it is given
(the thread's roots) and its state folder (`state_folder`). Nothing else: not the rest of the
home folder (~/.ssh, ~/.aws, the browser's profile), not /tmp, not /proc or /sys.

The lists are the minimum a Python venv server (`mcp-server-time`) and a Node server
(`@modelcontextprotocol/server-memory`) need, found by running them confined
(tests/core/servers/test_confine_servers.py); a server that needs more is given it with
`--read DIR`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

# Programs and their libraries. /lib* and /bin are links into /usr on a merged-/usr system,
# and folders of their own on an older one.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read from /etc: the loader's cache, users and names (a home folder's path,
# a host name), time zones, certificates, git's system config. Not the whole of /etc: it
# holds /etc/shadow and host keys, which only the file modes keep from a server run as root.
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "localtime",
    "locale.alias",
    "timezone",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "mime.types",
    "gitconfig",
    "os-release",
)
# Read, and /dev/null written too. No terminal: a server is started without one. Of these
# the two servers tested open /dev/null only (strace); the random devices are kept for a
# program without getrandom(2) (an old OpenSSL, a static binary), and hold nothing of anyone.
DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero")
DEVICES_WRITE = ("/dev/null",)

VENV_MARK = "pyvenv.cfg"
# The server's own home: the person's is closed to it, and a program that finds a file there
# it may not read may stop (git: "fatal: unknown error occurred while reading the
# configuration files" for an unreadable ~/.gitconfig). NO_HOME when it has no state folder:
# a home that is not there reads as empty everywhere.
NO_HOME = "/nonexistent"
# Variables that point into the person's home or session, dropped: programs then place their
# config, cache and data under HOME, and look for no session bus or agent socket there.
DROPPED = (
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
)


def existing(places: Sequence[str | Path]) -> tuple[Path, ...]:
    return tuple(Path(place) for place in places if os.path.lexists(place))


def system_places() -> tuple[Path, ...]:
    """The system folders and /etc files this machine has, to read and run."""
    return existing(SYSTEM) + existing([Path("/etc") / name for name in ETC])


def state_folder(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the server called `name` keeps its state: `$XDG_STATE_HOME/fsagent/servers/NAME/`
    (`~/.local/state/fsagent/servers/NAME/` when the variable is unset or not absolute, as
    the XDG rule says). The only folder it may write besides the thread's roots."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"a server's name names one folder, not {name!r}")
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(base) / "fsagent" / "servers" / name


def server_environment(environ: Mapping[str, str], state: Path | None) -> dict[str, str]:
    """The environment the server runs with: HOME is its state folder (NO_HOME without one),
    TMPDIR a `tmp` folder in it (/tmp is closed; the caller makes it), DROPPED left out."""
    env = {key: value for key, value in environ.items() if key not in DROPPED}
    env["HOME"] = str(state) if state is not None else NO_HOME
    if state is not None:
        env["TMPDIR"] = str(state / "tmp")
    else:
        env.pop("TMPDIR", None)
    return env


def resolve_command(command: str, path: str | None) -> Path | None:
    """The program `command` names, as execvp would find it (a path, or a name on PATH)."""
    found = shutil.which(command, path=path) if os.sep not in command else command
    return Path(found).absolute() if found and os.path.isfile(found) else None


def install_folders(argv: Sequence[str], path: str | None) -> tuple[Path, ...]:
    """The folders the server's program lives in, to read and run: for the command, and for
    each argument that names an existing file (`node /x/dist/index.js`, `python server.py`),
    its install (`install_of`); for the command also its script's interpreter (a `#!` line,
    `/usr/bin/env node` looked up on PATH)."""
    found: list[Path] = []
    command = resolve_command(argv[0], path) if argv else None
    if command is not None:
        found += install_of(command, own_folder=True)
        interpreter = shebang_interpreter(command, path)
        if interpreter is not None:
            found += install_of(interpreter, own_folder=True)
    for argument in argv[1:]:
        if os.path.isfile(argument):
            found += install_of(Path(argument).absolute(), own_folder=False)
    return tuple(dict.fromkeys(found))


def install_of(program: Path, *, own_folder: bool) -> list[Path]:
    """Where `program` is installed, judged on its real path (~/.local/bin/x links into a
    pipx or uv venv; ~/.local/bin itself is not read):

    - a Python venv (the folder with `pyvenv.cfg` above it; above the path as found too, as a
      venv's python links to the base interpreter), and the base Python its `home` names (the
      prefix above that `bin`: the standard library);
    - a Node package: the outermost `node_modules` folder above it, where its dependencies are;
    - else the program's own folder (`own_folder`, for the command: /opt/x/bin, nvm's node),
      or the file alone (an argument: a script in a folder of the person's)."""
    real = Path(os.path.realpath(program))
    alone = real.parent if own_folder else real
    venv = venv_above(real) or venv_above(program)
    if venv is not None:
        places = [venv, *base_python(venv)]
        return places if any(real.is_relative_to(place) for place in places) else [*places, alone]
    modules = outermost_node_modules(real)
    return [modules] if modules is not None else [alone]


def venv_above(program: Path) -> Path | None:
    for folder in program.parents:
        if (folder / VENV_MARK).is_file():
            return folder
    return None


def base_python(venv: Path) -> list[Path]:
    """The prefix of the Python a venv was made from (`home = /x/bin` in pyvenv.cfg: /x)."""
    try:
        lines = (venv / VENV_MARK).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = Path(os.path.realpath(value.strip()))
            return [home.parent if home.name == "bin" else home]
    return []


def outermost_node_modules(program: Path) -> Path | None:
    found = None
    for folder in program.parents:
        if folder.name == "node_modules":
            found = folder
    return found


def shebang_interpreter(script: Path, path: str | None) -> Path | None:
    """The program a `#!` line runs (`#!/usr/bin/env node`: node on PATH)."""
    try:
        with open(script, "rb") as opened:
            first = opened.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [word for word in words[1:] if not word.startswith("-")]
        return resolve_command(names[0], path) if names else None
    return resolve_command(words[0], path)
