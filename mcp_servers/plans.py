"""What a write call would touch, as this server reads it, and the check that binds an approval
to it.

`plan(tool, args)` is read-only: for a write call's arguments it returns, for each path
argument, the canonical path the server would act on (decoded from the shown form of
`names.py`, normalised, resolved the way the tool itself resolves it) and the state found
there now: whether it exists, its type, size and sha256 for a file, the link text for a
symlink, and for a folder the full count of what is inside and a fingerprint of it; for a
path that does not exist, the folders a write there would create (`creates`). The
client judges its rules and shows its preview from this answer, never from the text the model
wrote, so `docs/..\\x2ffsagent.toml` is judged as `fsagent.toml`.

`expect` (a plan's `paths`, given back on the write) is a precondition like HTTP `If-Match`:
before a write tool acts, the state is read again through the same descriptors the tool acts
by, and if anything differs from what the person's preview showed, the call is refused and
nothing changes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import to_json
from mcp_servers.budget import check_budget
from mcp_servers.dirfd import LIST_FLAGS, PATH_FLAGS, entry_stat, is_ours
from mcp_servers.fileio import kind_of, open_checked, sha256_of_fd
from mcp_servers.names import parse, show
from mcp_servers.sandbox import Resolved
from mcp_servers.tool_base import ToolBase

# The path arguments of each write tool, and whether the tool acts on the entry itself (a link
# as a link: delete, move, and what copy and move replace) or follows links inside the roots.
PATH_ARGUMENTS: dict[str, tuple[tuple[str, bool], ...]] = {
    "write_file": (("path", False),),
    "patch_file": (("path", False),),
    "make_dir": (("path", False),),
    "touch": (("path", False),),
    "delete": (("path", True),),
    "copy": (("source", False), ("destination", True)),
    "move": (("source", True), ("destination", True)),
}
STATE_KEYS = ("exists", "type", "size", "sha256", "link", "files", "folders", "bytes", "tree")


class PlanTools(ToolBase):
    """The read-only `plan` tool and the `expect` check the write tools run first."""

    def plan(self, tool: str, args: dict[str, Any]) -> str:
        """For a write call's arguments: the root-relative paths it would touch, as this
        server reads them, and their current state. Changes nothing."""
        return to_json({"tool": tool, "paths": self.planned(tool, args)})

    def planned(self, tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        arguments = PATH_ARGUMENTS.get(tool)
        if arguments is None:
            raise ToolError(f"invalid_argument: {tool!r} is not a write tool")
        paths = []
        for name, as_entry in arguments:
            given = args.get(name)
            if not isinstance(given, str):
                raise ToolError(f"invalid_argument: {name} must be a string")
            resolved = (self.sandbox.resolve_entry if as_entry else self.sandbox.resolve)(given)
            paths.append(
                {
                    "argument": name,
                    "given": given,
                    # False when the text spells with escapes what needs none (`\\x2f` for
                    # `/`): it reads as one place and names another.
                    "reads_as_shown": show(parse(given)) == given,
                    "root": show(str(resolved.root)),
                    "relative": show(resolved.real.relative_to(resolved.root).as_posix()),
                    "path": self.relative(resolved.real),
                    "state": self.state_of(resolved),
                    **self.creates(resolved),
                }
            )
        return paths

    def creates(self, resolved: Resolved) -> dict[str, list[str]]:
        """For a path that does not exist: the folders a write there would make on its way,
        outermost first (`creates`), so the client's undo record needs no call of its own.
        Left out when it cannot be known (a name on the way that is not a folder)."""
        if resolved.exists or resolved.real in self.sandbox.roots:
            return {}
        root, names = self.places.names_below_root(resolved.real)
        folder = os.dup(self.places.root_fds[root])
        try:
            for depth, name in enumerate(names[:-1]):
                try:
                    below = os.open(name, PATH_FLAGS, dir_fd=folder)
                except FileNotFoundError:
                    missing = range(depth + 1, len(names))
                    return {"creates": [self.relative(root.joinpath(*names[:n])) for n in missing]}
                except OSError:
                    return {}
                os.close(folder)
                folder = below
            return {"creates": []}
        finally:
            os.close(folder)

    def state_of(self, resolved: Resolved) -> dict[str, Any]:
        if not resolved.exists:
            return {"exists": False}
        if resolved.real in self.sandbox.roots:
            return {"exists": True, "type": "folder", "root": True}
        with self.places.parent(resolved.real) as (folder, name):
            try:
                found = entry_stat(folder, name)
            except FileNotFoundError:
                return {"exists": False}
            state: dict[str, Any] = {"exists": True, "type": kind_of(found.st_mode)}
            if stat.S_ISREG(found.st_mode):
                fd, opened = open_checked(folder, name, self.raw_relative(resolved.real))
                try:
                    state |= {"size": opened.st_size, "sha256": sha256_of_fd(fd)}
                finally:
                    os.close(fd)
            elif stat.S_ISLNK(found.st_mode):
                state["link"] = show(os.readlink(name, dir_fd=folder))
            elif stat.S_ISDIR(found.st_mode):
                listed = os.open(name, LIST_FLAGS, dir_fd=folder)
                try:
                    state |= fingerprint(listed)
                finally:
                    os.close(listed)
        return state

    def check_expect(self, tool: str, args: dict[str, Any], expect: Any) -> None:
        """Refuse the call, changing nothing, if what it would touch is not what the plan
        `expect` came from showed."""
        if expect is None:
            return
        if not isinstance(expect, list):
            raise ToolError("invalid_argument: expect must be the paths of a plan answer")
        now = {entry["argument"]: entry for entry in self.planned(tool, args)}
        for wanted in expect:
            if not isinstance(wanted, dict) or wanted.get("argument") not in now:
                raise ToolError("invalid_argument: expect must be the paths of a plan answer")
            found = now[wanted["argument"]]
            if found["path"] != wanted.get("path"):
                raise ToolError(
                    f"precondition failed: {wanted['argument']} is now '{found['path']}', the "
                    f"preview showed '{wanted.get('path')}'; nothing was changed"
                )
            before, after = wanted.get("state") or {}, found["state"]
            if any(before.get(key) != after.get(key) for key in STATE_KEYS):
                raise ToolError(
                    f"precondition failed: '{found['path']}' changed since it was previewed "
                    f"(was {describe(before)}, now {describe(after)}); nothing was changed. "
                    "Look at it again before deciding"
                )


def fingerprint(folder: int) -> dict[str, Any]:
    """The full count below a listable folder (no cap) and a sha256 over every entry's path,
    type, size and modification time, following no link: any file added, removed, renamed
    or written below changes it. os.fwalk holds one descriptor per level, not per folder.
    A subfolder that cannot be read fails the plan (fwalk would skip it silently, and the
    count would understate); our own temporary entries are left out, as every listing does."""
    digest = hashlib.sha256()
    files = folders = size = 0

    def unreadable(error: OSError) -> None:
        raise error

    walk = os.fwalk(".", dir_fd=folder, follow_symlinks=False, onerror=unreadable)
    for top, dirnames, filenames, current in walk:
        check_budget()
        dirnames[:] = sorted(name for name in dirnames if not is_ours(name))
        for name in sorted(dirnames + [name for name in filenames if not is_ours(name)]):
            found = os.stat(name, dir_fd=current, follow_symlinks=False)
            path = f"{top}/{name}"
            digest.update(
                f"{path}\0{stat.S_IFMT(found.st_mode)}\0{found.st_size}\0"
                f"{found.st_mtime_ns}\0".encode("utf-8", "surrogateescape")
            )
            if stat.S_ISDIR(found.st_mode):
                folders += 1
            else:
                files += 1
                if stat.S_ISREG(found.st_mode):
                    size += found.st_size
    return {"files": files, "folders": folders, "bytes": size, "tree": digest.hexdigest()}


def describe(state: dict[str, Any]) -> str:
    if not state.get("exists"):
        return "missing"
    kind = str(state.get("type"))
    if "sha256" in state:
        return f"{kind} of {state.get('size', 0):,} bytes, sha256 {str(state['sha256'])[:12]}"
    if "link" in state:
        return f"symlink to '{state['link']}'"
    if "files" in state:
        return f"{kind} with {state['files']:,} files, {state['bytes']:,} bytes"
    return kind
