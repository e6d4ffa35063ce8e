"""Files no write tool changes, whatever was approved: fsagent's rules file and its thread
database (with its `-wal`, `-shm` and `-journal` names), given with `--protect PATH`.

A protected path is judged by where it really is: the entry named (its folder resolved) and,
when that is a link, where the link leads; a path given that is in no root is left out (the
server cannot change it anyway). A write argument is refused when its canonical path is a
protected one or lies below one (which would make a protected name that does not exist yet,
such as a `-wal`, a folder). A move or a delete that takes a folder away is refused when the
folder holds one, and so is a copy or move whose new tree would hold one. The plan marks such
an argument `"protected": true`, so the client can refuse before it asks anyone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.sandbox import Sandbox, is_within

WHAT = "fsagent's rules or its thread file"


def canonical(given: str) -> set[Path]:
    """The entry `given` names (its folder's links resolved) and what it leads to."""
    absolute = os.path.abspath(os.path.expanduser(given))
    folder, name = os.path.split(absolute)
    entry = Path(os.path.realpath(folder)) / name if name else Path(os.path.realpath(absolute))
    return {entry, Path(os.path.realpath(absolute))}


class Protected:
    """The protected paths inside the roots."""

    def __init__(self, sandbox: Sandbox, given: Iterable[str] = ()) -> None:
        found: set[Path] = set()
        for path in given:
            found |= canonical(path)
        self.paths = tuple(sorted(path for path in found if sandbox.is_inside(path)))

    def under(self, real: Path) -> Path | None:
        """The protected path `real` is, or lies below."""
        return next((path for path in self.paths if is_within(real, path)), None)

    def held_by(self, real: Path) -> Path | None:
        """The protected path `real` is, lies below, or holds."""
        hit = self.under(real)
        if hit is not None:
            return hit
        return next((path for path in self.paths if is_within(path, real)), None)


# The path arguments whose whole tree goes or comes: refused when it holds a protected path.
TREE_ARGUMENTS = frozenset(
    {("delete", "path"), ("move", "source"), ("move", "destination"), ("copy", "destination")}
)
# Read, never changed: a copy's source.
READ_ARGUMENTS = frozenset({("copy", "source")})


def protected_hit(protected: Protected, tool: str, argument: str, real: Path) -> Path | None:
    """The protected path a write tool's argument would change, if any."""
    if (tool, argument) in READ_ARGUMENTS:
        return None
    if (tool, argument) in TREE_ARGUMENTS:
        return protected.held_by(real)
    return protected.under(real)


def refusal(shown: str, hit_shown: str) -> ToolError:
    """The one line a protected path gets; `shown` and `hit_shown` as answers show them."""
    which = "" if shown == hit_shown else f" would change '{hit_shown}', which"
    return ToolError(
        f"refused: '{shown}'{which} is protected ({WHAT}); no approval can change it "
        "— edit it yourself outside fsagent"
    )
