"""Which servers a project's `fsagent.toml` may start: only those the person accepted, each
as it was written when they did.

A server that runs code because a folder says so is a classic attack (a cloned repository
whose fsagent.toml starts `curl ... | sh`). So a project's entry starts only after the person
said yes to it once; the yes is recorded under the data folder,
`$XDG_DATA_HOME/fsagent/accepted-servers.json`, as the entry's digest, keyed by the project
file's real path and the server's name. An entry that changes in any way has another digest
and is asked about again. The person's own config.toml and a file they name with
--mcp-config need no yes: they wrote or chose them.

To take a yes back: delete that file (every yes goes), or the line of the server in it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from core.errors import StartupError
from core.servers.config import ServerSpec
from core.servers.records import NO_FILE, read_json, write_json
from store.location import xdg_folder

RECORD = "accepted-servers.json"


def record_path(environ: Mapping[str, str]) -> Path:
    return xdg_folder(environ, "XDG_DATA_HOME", ".local/share") / "fsagent" / RECORD


def key_of(spec: ServerSpec) -> str:
    # The real path: the same project reached through a symlink is the same project.
    return f"{os.path.realpath(spec.source)}#{spec.name}"


def read_record(path: Path) -> dict[str, str]:
    data = read_json(
        path,
        "the accepted servers",
        "delete it, and fsagent asks about each project's servers again",
    )
    if data is NO_FILE:
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise StartupError(
            f"{path}: not a record of accepted servers; delete it, and fsagent asks about "
            "each project's servers again"
        )
    return data


def is_accepted(spec: ServerSpec, record: Mapping[str, str]) -> bool:
    """Whether this entry may start: the person's own, or a project's accepted as it is now."""
    if spec.origin != "project":
        return True
    return record.get(key_of(spec)) == spec.digest()


def unaccepted(specs: Iterable[ServerSpec], record: Mapping[str, str]) -> list[ServerSpec]:
    """The project's entries the person has not accepted as they are written now (new ones,
    and changed ones)."""
    return [spec for spec in specs if spec.enabled and not is_accepted(spec, record)]


def was_changed(spec: ServerSpec, record: Mapping[str, str]) -> bool:
    """A project's entry accepted once and changed since (so the question says so)."""
    return key_of(spec) in record and not is_accepted(spec, record)


def accept(spec: ServerSpec, path: Path) -> None:
    """Record the person's yes to this entry as it is written now. Written whole to a temp
    file and renamed over the record, so a crash leaves the old record or the new one."""
    record = read_record(path)
    record[key_of(spec)] = spec.digest()
    write_record(path, record)


def forget(spec: ServerSpec, path: Path) -> bool:
    """Take back the yes to this server; whether there was one."""
    record = read_record(path)
    if record.pop(key_of(spec), None) is None:
        return False
    write_record(path, record)
    return True


def write_record(path: Path, record: Mapping[str, str]) -> None:
    write_json(path, dict(record))
