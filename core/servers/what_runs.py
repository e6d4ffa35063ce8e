"""What a configured server would run, as the lines a person reads before accepting it: the
command and its arguments, the folder, the names of the variables it is given, its network
and its sandbox (docs/other-servers.md, "A project's servers are accepted once").

Every value is a file's text, written by whoever wrote the project: each is shown as a Python
string literal passed through `core.text.visible`, so no control or format character reaches
the screen, and a space inside an argument is seen as one. An environment variable's value is
not shown (it may be a secret the person's own shell gave); its name is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from core.servers import sandbox_rules
from core.servers.config import ServerSpec
from core.text import visible


def quoted(text: str) -> str:
    """One value of the entry, on one line, every hidden character written out."""
    return visible(repr(text), keep="")


def what_runs(
    spec: ServerSpec, roots: Sequence[Path], environ: Mapping[str, str], *, confined: bool
) -> list[str]:
    """The entry as lines: what would run, where, with what, held how. `confined`: whether
    the kernel sandbox would hold it (core.servers.launch.is_confined)."""
    if spec.transport == "http":
        lines = [f"  url: {quoted(spec.url)}"]
        for header, value in spec.headers.items():
            lines.append(f"  header {quoted(header)}: {quoted(value)}")
        return [*lines, "  (reached over HTTP: nothing runs on this machine)"]
    lines = [f"  command: {' '.join(quoted(part) for part in (spec.command, *spec.args))}"]
    cwd = spec.cwd if spec.cwd is not None else str(roots[0])
    lines.append(f"  in: {quoted(cwd)}{'' if spec.cwd is not None else ' (the first root)'}")
    if spec.env:
        names = ", ".join(quoted(name) for name in spec.env)
        lines.append(f"  env: {names} (values not shown)")
    if spec.network:
        lines.append("  network: yes (network = true)")
    else:
        held = "none" if confined else "not held: it runs without the sandbox"
        lines.append(f"  network: {held}")
    if confined:
        state = sandbox_rules.state_folder(spec.name, environ)
        lines.append(
            f"  sandbox: writes only to the roots and {quoted(str(state))}; reads the "
            "system and its own install"
        )
    elif not spec.sandbox:
        lines.append("  sandbox: off (sandbox = false): it runs with your rights")
    else:
        lines.append("  sandbox: none (this kernel has no Landlock): it runs with your rights")
    return lines
