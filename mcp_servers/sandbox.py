"""Root resolution and path containment for the filesystem server.

Every path a tool receives goes through a `Sandbox` before anything touches the disk. The rules:

- Roots are resolved once, at start: `~` expanded, all symlinks resolved.
- Containment is checked component-wise on real paths, never by string prefix, so a root
  `/allowed` does not admit `/allowed_evil`.
- An existing path is resolved with all its links. A new path resolves its nearest existing
  ancestor, which must be inside a root; the rest of the path may not contain `..`.
- A symlink whose target leaves the roots (directly, through a chain, or dangling) is never
  followed; the path is refused with a `security_error:` message that names the roots.
- Names in path arguments are in the shown form of `names.py` (`\\xNN` for a byte that is
  not UTF-8, `\\\\` for a backslash).

This is the check by name. Tools then act through descriptors (`dirfd.py`), so what was
checked here cannot be swapped for a link before it is used.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from mcp_servers.names import parse, quoted, quoted_given, windows_style
from mcp_servers.reserved import reserved_name, why_reserved

MAX_PATH_LENGTH = 4096
SECURITY_PREFIX = "security_error:"


class SandboxError(Exception):
    """A path argument that cannot be used; the message is one line for the client."""


class SecurityError(SandboxError):
    """A path that leaves the allowed roots, or an action on a root itself."""


class RootError(Exception):
    """A root given at start that is missing or not a folder."""


@dataclass(frozen=True)
class Resolved:
    """A path inside the sandbox: its real location and whether something is there now."""

    real: Path
    root: Path
    exists: bool


def resolve_roots(raw_roots: list[str]) -> tuple[Path, ...]:
    """Resolve the roots given on the command line, or raise RootError naming the bad one."""
    roots: list[Path] = []
    for raw in raw_roots:
        expanded = os.path.expanduser(raw)
        if not os.path.exists(expanded):
            raise RootError(f"root does not exist: {raw} (each ROOT must be an existing folder)")
        real = Path(os.path.realpath(expanded))
        if not real.is_dir():
            raise RootError(f"root is a file, not a folder: {raw} (give its folder instead)")
        if real not in roots:
            roots.append(real)
    if not roots:
        raise RootError("no root given")
    return tuple(roots)


def is_within(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or below it, comparing whole components."""
    folder_parts = folder.parts
    return path.parts[: len(folder_parts)] == folder_parts


class Sandbox:
    def __init__(self, roots: tuple[Path, ...]) -> None:
        self.roots = roots

    # -- checks ---------------------------------------------------------------------------

    def root_of(self, real: Path) -> Path | None:
        """The innermost root that contains `real`, if any."""
        containing = [root for root in self.roots if is_within(real, root)]
        return max(containing, key=lambda root: len(root.parts)) if containing else None

    def is_inside(self, real: Path) -> bool:
        return self.root_of(real) is not None

    def contains_a_root(self, real: Path) -> bool:
        """True when `real` is a root or a folder holding one (so removing it removes a root)."""
        return any(is_within(root, real) for root in self.roots)

    def refuse(self, given: str, why: str = "is outside the allowed roots") -> SecurityError:
        roots = ", ".join(quoted(str(root))[1:-1] for root in self.roots)
        shown = quoted_given(given)
        return SecurityError(f"{SECURITY_PREFIX} {shown} {why} (allowed roots: {roots})")

    # -- resolution -----------------------------------------------------------------------

    def resolve(self, given: str, *, reserved_ok: bool = False) -> Resolved:
        """Resolve a path for reading or writing: links are followed, but only inside.

        The result is a real path with no symlink in it, so acting on it cannot be redirected
        outside except by a change made in the meantime (callers open with O_NOFOLLOW). A
        path through one of the server's own names is refused (reserved.py) unless
        `reserved_ok` (the plan, which says so instead).
        """
        resolved = self.resolve_lexical(given, self.absolute(given))
        return resolved if reserved_ok else self.refuse_reserved(given, resolved)

    def refuse_reserved(self, given: str, resolved: Resolved) -> Resolved:
        """`resolved`, unless its real path goes through a name the server keeps for itself."""
        name = reserved_name(resolved.real, resolved.root)
        if name is not None:
            raise SandboxError(why_reserved(quoted_given(given), quoted(name)))
        return resolved

    def resolve_lexical(self, given: str, lexical: str) -> Resolved:
        """`resolve` for an absolute raw path; `given` is what errors name."""
        try:
            real = Path(os.path.realpath(lexical, strict=True))
        except FileNotFoundError:
            return self.resolve_missing(given, lexical)
        except OSError as error:
            self.refuse_if_outside(given, lexical)
            raise self.unusable(given, error) from None
        return self.inside_or_refuse(given, real, exists=True)

    def resolve_entry(self, given: str, *, reserved_ok: bool = False) -> Resolved:
        """Resolve a path naming a directory entry itself (for delete and move).

        The parent folder is resolved; the final name is kept, so a symlink is acted on as a
        link, never through it. A link whose target leaves the roots is still refused, and so
        is a path through a reserved name (see `resolve`).
        """
        resolved = self.entry_of(given)
        return resolved if reserved_ok else self.refuse_reserved(given, resolved)

    def entry_of(self, given: str) -> Resolved:
        lexical = self.absolute(given)
        name = os.path.basename(lexical)
        if name in ("", ".", "..") or Path(os.path.realpath(lexical)) in self.roots:
            return self.resolve_lexical(given, lexical)
        parent = self.resolve_lexical(given, os.path.dirname(lexical))
        if not parent.exists:
            return self.resolve_lexical(given, lexical)
        entry = parent.real / name
        if not entry.is_symlink():
            return self.resolve_lexical(given, str(entry))
        self.check_link_target(given, entry)
        return Resolved(real=entry, root=parent.root, exists=True)

    def check_link_target(self, given: str, link: Path) -> None:
        """Refuse a symlink whose target (followed to the end) is outside, dangling or a loop."""
        try:
            target = Path(os.path.realpath(link, strict=True))
        except FileNotFoundError:
            target = Path(os.path.realpath(link))  # dangling: where it would create a file
        except OSError as error:
            self.refuse_if_outside(given, str(link))
            raise self.unusable(given, error) from None
        if not self.is_inside(target):
            raise self.refuse(given, "is a symlink to a place outside the allowed roots")

    def absolute(self, given: str) -> str:
        """Validate the argument and make it absolute (relative paths start at the first root)."""
        if not isinstance(given, str):
            raise SandboxError(f"path must be a string, got {type(given).__name__}")
        if len(given) > MAX_PATH_LENGTH:
            raise SandboxError(f"path is {len(given)} characters long (at most {MAX_PATH_LENGTH})")
        if given.strip() == "":
            raise SandboxError("path is empty")
        if windows_style(given):
            raise SandboxError(
                f"{given!r} is a Windows-style path, and this server runs on a POSIX machine: "
                "separate folders with '/', with no drive letter (e.g. 'notes/todo.txt', "
                "relative to the first root, or an absolute path such as '/home/me/notes.txt')"
            )
        raw = parse(given)
        if "\x00" in raw:
            raise SandboxError("path contains a NUL byte")
        # `~` is expanded so '~/notes' means what a person means; the result is still checked.
        # '~user' is not: whether it says "outside" or "not found" would tell whether that
        # user exists, so it is a name like any other.
        expanded = os.path.expanduser(raw) if raw == "~" or raw.startswith("~/") else raw
        lexical = os.path.join(self.roots[0], expanded)
        self.refuse_dots_outside(given, lexical)
        return lexical

    def refuse_dots_outside(self, given: str, lexical: str) -> None:
        """Refuse a path whose '..' steps back from a place outside the roots, whether or not
        that place exists: the answer must not tell what exists outside."""
        parts = lexical.split("/")
        for number, part in enumerate(parts):
            if part != "..":
                continue
            before = os.path.normpath("/".join(parts[:number]) or "/")
            if not self.is_inside(Path(before)):
                raise self.refuse(given)

    def resolve_missing(self, given: str, lexical: str) -> Resolved:
        """A path that does not exist yet: its nearest existing ancestor must be inside."""
        head, tail = lexical, []
        while not os.path.lexists(head):
            head, name = os.path.split(head)
            tail.append(name)
        tail.reverse()
        if ".." in tail:
            raise self.refuse(given, "goes through '..' below a folder that does not exist")
        try:
            ancestor = Path(os.path.realpath(head, strict=True))
        except FileNotFoundError:
            # Only a dangling symlink exists without resolving; its target may be outside.
            self.check_link_target(given, Path(head))
            dangling = SandboxError(
                f"{quoted_given(given)} goes through a dangling symlink; use its target"
            )
            raise dangling from None
        except OSError as error:
            self.refuse_if_outside(given, head)
            raise self.unusable(given, error) from None
        real = ancestor.joinpath(*[part for part in tail if part not in ("", ".")])
        self.inside_or_refuse(given, ancestor, exists=True)
        if not ancestor.is_dir():
            raise SandboxError(f"{quoted_given(given)}: {quoted(ancestor.name)} is not a folder")
        return self.inside_or_refuse(given, real, exists=False)

    def refuse_if_outside(self, given: str, lexical: str) -> None:
        """Say "outside" before any other complaint about a path that points outside."""
        if not self.is_inside(Path(os.path.realpath(lexical))):
            raise self.refuse(given)

    def inside_or_refuse(self, given: str, real: Path, *, exists: bool) -> Resolved:
        root = self.root_of(real)
        if root is None:
            raise self.refuse(given)
        return Resolved(real=real, root=root, exists=exists)

    def unusable(self, given: str, error: OSError) -> SandboxError:
        shown = quoted_given(given)
        if error.errno == errno.ELOOP:
            return SandboxError(f"{shown} is a symlink loop")
        if error.errno == errno.ENAMETOOLONG:
            return SandboxError(f"{shown}: a name in it is too long")
        if error.errno == errno.ENOTDIR:
            return SandboxError(f"{shown}: a part of it is a file, not a folder")
        return SandboxError(f"{shown}: {error.strerror or error}")
