"""A throwaway Postgres server for the tests and the benchmarks: Debian's `postgresql` package
(`make test` installs it when missing), run with `initdb` / `pg_ctl` in a temp folder on a
free loopback port, as the unprivileged `postgres` user when we are root (Postgres refuses
to run as root).

    server = start_server(folder)          # folder: where the cluster lives
    url = server.create_database("t1")     # postgresql://postgres:PASSWORD@127.0.0.1:PORT/t1
    server.stop()

The cluster asks for a password (scram-sha-256) on every connection, so the tests can try
bad credentials, and has a role without rights to create tables. `fast=True` turns fsync off:
the tests kill clients, never the server, so they lose nothing by it; the benchmarks keep it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

SUPERUSER = "postgres"
# A role that may connect but not create tables (Postgres 15 revokes CREATE on the public
# schema from everyone but its owner).
READER = "reader"
READER_PASSWORD = "reader-secret"
START_ATTEMPTS = 3


class ServerError(RuntimeError):
    """The throwaway server could not be started: the tests that need it must fail."""


def postgres_bin() -> Path:
    """The folder of Debian's server binaries (the newest version installed), or PATH's."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ServerError(
        "no Postgres server binaries (initdb) found: `make test` installs Debian's postgresql "
        "package; or run `apt-get install postgresql`"
    )


def as_server_user() -> list[str]:
    """The prefix that runs a command as the user Postgres runs as."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as error:
        raise ServerError(
            "running as root and there is no `postgres` user to run the server as: install "
            "Debian's postgresql package (it creates the user)"
        ) from error
    return ["runuser", "-u", "postgres", "--"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    folder: str
    port: int
    password: str

    @property
    def data(self) -> Path:
        return Path(self.folder) / "data"

    def url(self, database: str = "postgres", user: str = SUPERUSER, password: str = "") -> str:
        secret = password or (self.password if user == SUPERUSER else READER_PASSWORD)
        return f"postgresql://{user}:{secret}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str, database: str = "postgres") -> None:
        """Run one statement as the superuser (psycopg, autocommit)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def create_database(self, name: str) -> str:
        self.admin(f'CREATE DATABASE "{name}"')
        # The reader may connect and read, and has no right to create anything.
        self.admin(f'GRANT CONNECT ON DATABASE "{name}" TO {READER}')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        pg_ctl = postgres_bin() / "pg_ctl"
        if self.data.exists():
            subprocess.run(
                [*as_server_user(), str(pg_ctl), "stop", "-D", str(self.data), "-m", "immediate"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.folder, ignore_errors=True)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> Server:
        return cls(**json.loads(path.read_text()))


def start_server(folder: Path, *, fast: bool = True) -> Server:
    """initdb a cluster in `folder` and start it on a free port; ServerError says why not."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = as_server_user()
    if prefix:
        shutil.chown(folder, "postgres", "postgres")
    password = secrets.token_hex(12)
    data = folder / "data"
    pwfile = folder / "pwfile"
    pwfile.write_text(password + "\n")
    if prefix:
        shutil.chown(pwfile, "postgres", "postgres")
    bindir = postgres_bin()
    run(
        [
            *prefix,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--pwfile",
            str(pwfile),
            "--auth",
            "scram-sha-256",
            "--encoding",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
        ],  # fmt: skip
        "initdb",
    )
    pwfile.unlink()
    settings = [
        "listen_addresses=127.0.0.1",
        "unix_socket_directories=",
        "max_connections=300",
        "log_min_messages=fatal",
    ]
    if fast:
        settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
    options = " ".join(f"-c {setting}" for setting in settings)
    last = ""
    for _ in range(START_ATTEMPTS):  # another run may take the free port first
        port = free_port()
        started = subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "start",
                "-D",
                str(data),
                "-w",
                "-t",
                "60",
                "-l",
                str(folder / "server.log"),
                "-o",
                f"-p {port} {options}",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=90,
        )
        if started.returncode == 0:
            server = Server(str(folder), port, password)
            server.admin(f"CREATE ROLE {READER} LOGIN PASSWORD '{READER_PASSWORD}'")
            return server
        log = folder / "server.log"
        last = started.stderr + (log.read_text() if log.exists() else "")
    raise ServerError(f"pg_ctl could not start a throwaway server:\n{last}")


def run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ServerError(f"{what} failed ({done.returncode}):\n{done.stdout}{done.stderr}")


def stop_orphans(parent: Path, prefix: str) -> None:
    """Stop the servers of earlier runs that were killed before they could (each run's
    folder holds an `owner` file with its pid, and `server.json` once a server started)."""
    for folder in parent.glob(f"{prefix}*"):
        try:
            owner = int((folder / "owner").read_text())
            os.kill(owner, 0)
            continue  # its run is still going
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue
        state = folder / "server.json"
        if state.exists():
            with contextlib.suppress(OSError, ValueError, TypeError, ServerError):
                Server.load(state).stop()
        shutil.rmtree(folder, ignore_errors=True)
