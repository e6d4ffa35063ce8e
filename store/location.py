"""Where a store is: a SQLite path or a Postgres URL, as the person gave it, and how it is
shown. Standard library only, so the command line can read a location before anything
heavy is imported.

A URL's password is never shown: every message and log names the store by `shown()`,
`postgresql://user:***@host/db`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SQLITE = "threads.db"
MASK = "***"


def is_postgres(location: str | Path) -> bool:
    return isinstance(location, str) and location.lower().startswith(POSTGRES_SCHEMES)


def from_environment(environ: Mapping[str, str]) -> str:
    """The location when --db is not given: FSAGENT_DB, else DATABASE_URL when it names a
    Postgres database (a DATABASE_URL of another kind belongs to another program), else
    ./threads.db."""
    if environ.get("FSAGENT_DB"):
        return environ["FSAGENT_DB"]
    database_url = environ.get("DATABASE_URL", "")
    if is_postgres(database_url):
        return database_url
    return DEFAULT_SQLITE


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
