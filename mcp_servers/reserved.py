"""The names this server keeps for its own entries, refused as any tool's path.

The server's own entries live beside the person's, under names of one form: `.fsagent-<16
hex>.tmp` (a file being written, a folder being copied, an entry set aside while a move or a
delete checks it; dirfd.py), `.fsagent-kept-<16 hex>` (an entry kept aside when its name was
taken meanwhile; capture.py), and whatever a later part of the server names so: every name
that starts with `.fsagent-`. A call that named one could make an ordinary-looking rename a
delete (`move(important.db -> .fsagent-0123456789abcdef.tmp)`: hidden from every listing,
removed at a later start), or reach into an entry set aside mid-act. So a path whose real form
has such a name anywhere below its root is refused by every tool before it acts (sandbox.py),
and `plan` answers `reserved: true` for it, so a client refuses it before it asks anyone.

The rule is here, once, for the plan and the act.
"""

from __future__ import annotations

from pathlib import Path

RESERVED_PREFIX = ".fsagent-"


def reserved_name(real: Path, root: Path) -> str | None:
    """The first name of `real` below `root` that is the server's own, or None."""
    for name in real.relative_to(root).parts:
        if name.startswith(RESERVED_PREFIX):
            return name
    return None


def why_reserved(shown: str, name: str) -> str:
    """The one line a call gets for a path (`shown`, quoted) through the reserved `name`
    (quoted)."""
    return (
        f"reserved: {shown} goes through {name}, a name this server keeps for its own "
        f"temporary and set-aside entries (every name starting '{RESERVED_PREFIX}'); nothing "
        "was done: choose another name"
    )
