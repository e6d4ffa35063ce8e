"""The small JSON files the other servers' room keeps under the data folder (the accepted
project servers, each server's pins): read with one line for a file that cannot be, written
whole and then renamed, so a crash never leaves half of one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.errors import StartupError

NO_FILE = object()  # what read_json gives for a file that is not there (a file may hold null)


def read_json(path: Path, holding: str, remedy: str) -> Any:
    """The file's JSON; NO_FILE when there is no file. One that cannot be read or parsed
    stops fsagent with `PATH: HOLDING cannot be read (why); REMEDY`."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return NO_FILE
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StartupError(f"{path}: {holding} cannot be read ({error}); {remedy}") from None


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temp, path)
