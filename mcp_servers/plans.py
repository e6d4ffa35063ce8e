"""What a write call would touch, as this server reads it, and the checks that bind an approval
to it.

`plan(tool, args)` is read-only: for each path argument of a write call it returns the
canonical path the server would act on (decoded from the shown form of `names.py`,
normalised, resolved the way the tool itself resolves it) and the state found there now:
whether it exists, its type, size and sha256 for a file, the link text for a symlink, and for
a folder the full count of what is inside and a fingerprint of it; for a path that does not
exist, the folders a write there would create (`creates`); whether the server refuses to
change it (`protected`, protected.py); and whether it goes through a name the server keeps for
its own entries (`reserved`, reserved.py: every tool refuses it). The client judges its
rules and shows its preview from this answer, never from the text the model wrote, so
`docs/..\\x2ffsagent.toml` is judged as `fsagent.toml`.

Each entry gives the path in two forms. `root` and `relative` are raw: the root's absolute
real path and the path below it (posix, "." for the root itself), as the OS names them (a
byte that is not UTF-8 is a lone surrogate, `os.fsdecode`'s form; the JSON holds it as a
`\\udcXX` escape, which `json.loads` reads back the same). Compare paths in this form.
`path` is the form answers show people (names.py), for messages only.

`expect` (a plan's `paths`, given back on the write) is a precondition like HTTP `If-Match`:
each write tool resolves its path arguments once (`target`), refuses one whose place is not
the place the plan named, and compares the state it reads through the very descriptors it
then acts by (`check_state`) with the state the plan gave; capture.py then makes sure the act
lands on that entry. Anything that differs refuses the call, and nothing changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any

from mcp.server.fastmcp.exceptions import ToolError

from mcp_servers.answers import plural
from mcp_servers.budget import check_budget
from mcp_servers.capture import now_at, same
from mcp_servers.dirfd import LIST_FLAGS, PATH_FLAGS, is_ours
from mcp_servers.fileio import kind_of, open_checked, sha256_of_fd
from mcp_servers.names import parse, quoted, show
from mcp_servers.protected import Protected, protected_hit, refusal
from mcp_servers.reserved import reserved_name
from mcp_servers.sandbox import Resolved, Sandbox
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
MISSING: dict[str, Any] = {"exists": False}
ROOT_STATE: dict[str, Any] = {"exists": True, "type": "folder", "root": True}
Wanted = dict[str, Any] | None  # one argument's entry of `expect`, or None: nothing to compare


class PlanTools(ToolBase):
    """The read-only `plan` tool and the checks the write tools run before they act."""

    def __init__(self, sandbox: Sandbox, protected: Protected | None = None) -> None:
        super().__init__(sandbox)
        self.protected = protected if protected is not None else Protected(sandbox)

    def plan(self, tool: str, args: dict[str, Any]) -> str:
        """For a write call's arguments: the root-relative paths it would touch, as this
        server reads them, and their current state. Changes nothing."""
        return raw_json({"tool": tool, "paths": self.planned(tool, args)})

    def planned(self, tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        arguments = PATH_ARGUMENTS.get(tool)
        if arguments is None:
            raise ToolError(f"invalid_argument: {tool!r} is not a write tool")
        paths = []
        for name, as_entry in arguments:
            given = args.get(name)
            if not isinstance(given, str):
                raise ToolError(f"invalid_argument: {name} must be a string")
            resolved = self.resolve_argument(given, as_entry, reserved_ok=True)
            paths.append(
                {
                    "argument": name,
                    "given": given,
                    # False when the text spells with escapes what needs none (`\\x2f` for
                    # `/`): it reads as one place and names another.
                    "reads_as_shown": show(parse(given)) == given,
                    "root": str(resolved.root),
                    "relative": below_root(resolved),
                    "path": self.relative(resolved.real),
                    "state": self.state_of(resolved),
                    "protected": protected_hit(self.protected, tool, name, resolved.real)
                    is not None,
                    "reserved": reserved_name(resolved.real, resolved.root) is not None,
                    **self.creates(resolved),
                }
            )
        return paths

    def resolve_argument(self, given: str, as_entry: bool, reserved_ok: bool = False) -> Resolved:
        """Where a path argument lands; a reserved one refused unless `reserved_ok`."""
        resolve = self.sandbox.resolve_entry if as_entry else self.sandbox.resolve
        return resolve(given, reserved_ok=reserved_ok)

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
        if resolved.real in self.sandbox.roots:
            return ROOT_STATE
        with self.places.parent_if_there(resolved.real) as (folder, name):
            if folder is None:
                return MISSING
            state, _ = entry_state(folder, name, self.raw_relative(resolved.real))
            return state

    # -- what a write tool checks before it acts -------------------------------------------

    def wanted(self, tool: str, expect: Any) -> dict[str, dict[str, Any]]:
        """`expect` by argument ({} when there is none)."""
        if expect is None:
            return {}
        arguments = {name for name, _ in PATH_ARGUMENTS[tool]}
        if not isinstance(expect, list):
            raise ToolError("invalid_argument: expect must be the paths of a plan answer")
        found = {}
        for entry in expect:
            if not isinstance(entry, dict) or entry.get("argument") not in arguments:
                raise ToolError("invalid_argument: expect must be the paths of a plan answer")
            found[entry["argument"]] = entry
        return found

    def target(self, tool: str, argument: str, given: str, wanted: Wanted) -> Resolved:
        """Where a write tool's path argument lands, resolved once, as its plan resolves it:
        refused when it is protected, or not the place the preview showed."""
        as_entry = dict(PATH_ARGUMENTS[tool])[argument]
        resolved = self.resolve_argument(given, as_entry)
        hit = protected_hit(self.protected, tool, argument, resolved.real)
        if hit is not None:
            raise refusal(self.relative(resolved.real), self.relative(hit))
        if wanted is not None:
            self.check_place(argument, wanted, resolved)
        return resolved

    def check_place(self, argument: str, wanted: dict[str, Any], resolved: Resolved) -> None:
        """Compared raw: `root` and `relative` when given, else the shown `path` read back
        (names.py's form maps one to one onto raw paths). A client cannot always send the
        raw form back: a lone surrogate has no UTF-8, so no JSON-RPC request can hold it."""
        now = self.relative(resolved.real)
        if "root" in wanted and "relative" in wanted:
            before = (wanted["root"], wanted["relative"])
            same_place = before == (str(resolved.root), below_root(resolved))
        else:
            path = wanted.get("path")
            same_place = isinstance(path, str) and parse(path) == self.raw_relative(resolved.real)
        if not same_place:
            shown = wanted.get("path") or show(str(wanted.get("relative")))
            raise ToolError(
                f"precondition failed: {argument} is now '{now}', the preview showed "
                f"'{shown}'; nothing was changed"
            )

    def check_state(self, wanted: Wanted, resolved: Resolved, now: dict[str, Any]) -> None:
        """Refuse, changing nothing, when what is there now is not what the preview showed."""
        if wanted is None:
            return
        before = wanted.get("state") or {}
        if any(before.get(key) != now.get(key) for key in STATE_KEYS):
            raise ToolError(
                f"precondition failed: '{self.relative(resolved.real)}' changed since it was "
                f"previewed (was {describe(before)}, now {describe(now)}); nothing was "
                "changed. Look at it again before deciding"
            )


def below_root(resolved: Resolved) -> str:
    """The raw path below its root, posix ("." for the root itself)."""
    return resolved.real.relative_to(resolved.root).as_posix()


def raw_json(data: dict[str, Any]) -> str:
    """JSON whose raw paths keep their undecodable bytes: each lone surrogate becomes a
    `\\udcXX` escape, which json.loads reads back as the same character."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def file_state(fd: int, found: os.stat_result) -> dict[str, Any]:
    return {"exists": True, "type": "file", "size": found.st_size, "sha256": sha256_of_fd(fd)}


def content_state(data: bytes) -> dict[str, Any]:
    """The state of a file that holds `data` (read whole from its descriptor)."""
    digest = hashlib.sha256(data).hexdigest()
    return {"exists": True, "type": "file", "size": len(data), "sha256": digest}


def folder_state(listed: int) -> dict[str, Any]:
    return {"exists": True, "type": "folder", **fingerprint(listed)}


def entry_state(folder: int, name: str, shown: str) -> tuple[dict[str, Any], os.stat_result | None]:
    """The state of `name` in `folder` as a plan gives it, and the entry (its stat) that
    state was read from, for capture.py to act on exactly that one. `shown` (raw) names it
    in errors."""
    found = now_at(folder, name)
    if found is None:
        return MISSING, None
    if stat.S_ISREG(found.st_mode):
        fd, opened = open_checked(folder, name, shown)
        try:
            return file_state(fd, opened), opened
        finally:
            os.close(fd)
    if stat.S_ISLNK(found.st_mode):
        text = os.readlink(name, dir_fd=folder)
        if not same(now_at(folder, name), found):
            raise ToolError(f"{quoted(shown)} changed while it was read; nothing was changed")
        return {"exists": True, "type": "symlink", "link": show(text)}, found
    if stat.S_ISDIR(found.st_mode):
        listed = os.open(name, LIST_FLAGS, dir_fd=folder)
        try:
            return folder_state(listed), os.fstat(listed)
        finally:
            os.close(listed)
    return {"exists": True, "type": kind_of(found.st_mode)}, found


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
        return f"{kind} with {plural(state['files'], 'file')}, {plural(state['bytes'], 'byte')}"
    return kind
