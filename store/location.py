"""Where a store is: a SQLite path or a Postgres URL, as the person gave it, and how it is
shown. Standard library only, so the command line can read a location before anything
heavy is imported.

A URL's password is never shown: every message and log names the store by `shown()`,
`postgresql://user:***@host/db`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SQLITE = "threads.db"
MASK = "***"


def is_postgres(location: str | Path) -> bool:
    return isinstance(location, str) and location.lower().startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True)
class Chosen:
    """The store a run uses, what chose it, and a note to say once (a ./threads.db found in
    the current folder: how to move it to the data folder)."""

    location: str
    source: str  # "--db", "FSAGENT_DB", "DATABASE_URL", the config file's path, "here", "data"
    note: str = ""


def data_location(environ: Mapping[str, str]) -> Path:
    """Where an installed fsagent keeps its threads, so every folder sees the same ones:
    `$XDG_DATA_HOME/fsagent/threads.db` (by default ~/.local/share/fsagent/threads.db)."""
    return xdg_folder(environ, "XDG_DATA_HOME", ".local/share") / "fsagent" / DEFAULT_SQLITE


def xdg_folder(environ: Mapping[str, str], variable: str, fallback: str) -> Path:
    """An XDG base folder: the variable when it holds an absolute path (the spec says a
    relative one is to be ignored), else `~/fallback`."""
    value = environ.get(variable, "")
    return Path(value) if value and os.path.isabs(value) else Path.home() / fallback


def choose_location(
    flag: str | None,
    environ: Mapping[str, str],
    configured: str | None = None,
    config_file: str = "the config file",
    here: Path | None = None,
) -> Chosen:
    """The store: --db; else FSAGENT_DB; else DATABASE_URL when it names a Postgres database
    (a DATABASE_URL of another kind belongs to another program); else the config file's `db`;
    else a threads.db in the current folder (where fsagent kept threads before it had a data
    folder), with a note; else the data folder's."""
    if flag:
        return Chosen(flag, "--db")
    if environ.get("FSAGENT_DB"):
        return Chosen(environ["FSAGENT_DB"], "FSAGENT_DB")
    database_url = environ.get("DATABASE_URL", "")
    if is_postgres(database_url):
        return Chosen(database_url, "DATABASE_URL")
    if configured:
        return Chosen(configured, config_file)
    data = data_location(environ)
    local = (here or Path.cwd()) / DEFAULT_SQLITE
    if local.is_file() and not same_location(str(local), str(data)):
        note = (
            f"using {local}, found in this folder; to see its threads from every folder, "
            f"move it: mkdir -p {data.parent} && mv {local} {data} (or pass --db {local})"
        )
        return Chosen(str(local), "here", note)
    return Chosen(str(data), "data")


def normalise(value: str | Path) -> str:
    """A URL as given; anything else is a SQLite path, `~` expanded."""
    if is_postgres(value):
        return str(value)
    return str(Path(value).expanduser())


def same_location(first: str, second: str) -> bool:
    """Whether two locations name one store (a file by any path to it)."""
    if is_postgres(first) or is_postgres(second):
        return first == second
    return Path(first).resolve() == Path(second).resolve()


def shown(location: str | Path) -> str:
    """The location as a person may see it: a URL with its password masked."""
    if not is_postgres(location):
        return str(location)
    parts = urlsplit(str(location))
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:{MASK}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked = [(key, MASK if key.lower() == "password" else value) for key, value in pairs]
        query = urlencode(masked, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_of(location: str | Path) -> set[str]:
    """The passwords a URL carries, as written and decoded, to scrub from any text that
    might quote them (a driver's error message, a log line)."""
    if not is_postgres(location):
        return set()
    parts = urlsplit(str(location))
    found = [parts.password or ""]
    found += [value for key, value in parse_qsl(parts.query) if key.lower() == "password"]
    return {form for secret in found if secret for form in (secret, unquote(secret))}


def scrub(text: str, location: str | Path) -> str:
    """`text` with the location's passwords masked."""
    for secret in sorted(secrets_of(location), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
