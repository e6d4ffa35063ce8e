"""The roots a command acts in: checked as folders before anything starts, and a thread's own
(the roots it was started with) held against the ones given.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import StartupError

if TYPE_CHECKING:
    from cli.settings import Settings
    from store.base import Store


def check_roots(roots: tuple[Path, ...]) -> list[Path]:
    """Resolve roots up front so a typo is a clear start-up error, not a server crash."""
    resolved = []
    for root in roots:
        if not root.is_dir():
            raise StartupError(
                f"--root {root}: {not_a_folder(root)}; pass an existing folder the agent may use"
            )
        resolved.append(root.resolve())
    return resolved


def not_a_folder(path: Path) -> str:
    """What is at `path`, which is not a folder, in a few words."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a broken symlink" if path.is_symlink() else "no such folder"
    except OSError as error:
        return f"cannot be reached ({error.strerror})"
    kinds = [
        (stat.S_ISREG, "a file, not a folder"),
        (stat.S_ISFIFO, "a named pipe, not a folder"),
        (stat.S_ISSOCK, "a socket, not a folder"),
        (stat.S_ISCHR, "a device, not a folder"),
        (stat.S_ISBLK, "a device, not a folder"),
    ]
    return next((kind for test, kind in kinds if test(mode)), "not a folder")


LEAVE_ROOT_OUT = "leave --root out to act in its roots"


@dataclass(frozen=True)
class InRoots:
    """The settings a thread acts on, and what the banner says of their roots."""

    settings: Settings
    note: str = ""  # "this thread's": the roots it was started with, taken without --root


async def thread_roots(
    store: Store, name: str, settings: Settings, *, way_back: str = LEAVE_ROOT_OUT
) -> InRoots:
    """A thread acts in the roots it was started with (store migration 6), for the chat,
    approve, deny and undo alike: without --root it takes those (and its rules file, unless
    --policy names one). Given other roots, it is refused with one line naming both, unless
    --other-root says to act in these, or the person says so at a terminal. A new thread, or
    one from before fsagent kept its roots, acts where it is told."""
    from core.opening import OtherRoots, check_roots

    recorded = await store.thread_settings(name)
    if not recorded or not recorded.get("roots"):
        return InRoots(settings)
    started = tuple(Path(root) for root in recorded["roots"])
    if not settings.roots_given:
        policy = settings.policy or (Path(recorded["policy"]) if recorded.get("policy") else None)
        return InRoots(dataclasses.replace(settings, roots=started, policy=policy), "this thread's")
    given = tuple(Path(os.path.realpath(root)) for root in settings.roots)  # noqa: ASYNC240
    try:
        await check_roots(store, name, given, other_roots=settings.other_root, way_back=way_back)
    except OtherRoots as refused:
        if not sys.stdin.isatty() or not other_roots_confirmed(str(refused)):
            raise
    return InRoots(settings)


def other_roots_confirmed(refusal: str) -> bool:
    """At a terminal, the person decides whether a thread acts in roots it was not started
    with: `refusal` says which, and an empty answer (or end of input) is no."""
    from terminal.commands import confirm

    told = refusal.split(";", 1)[0]
    print(f"fsagent: {told}.", file=sys.stderr)
    return confirm("Act in the roots given for this session? [y/N] ").strip().lower() in (
        "y",
        "yes",
    )
