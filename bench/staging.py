"""What is named while it is built, in the staging folder or in place (issue 40,
mcp_servers/staging.py): a folder copy's tree is built at the top of its root and renamed across
into the destination's folder, where before it was built in that folder itself; on the portable
path (no O_TMPFILE) a 100-byte write's temp file the same way. Both measured side by side in one
run, interleaved rounds, through the server's own tools in process (the same code; the staging
switched off as Landlock ABI 1 switches it off), in a folder of /var/tmp (a real disk, where
/tmp may be a tmpfs): a copy of a folder of 1,000 files of 100 bytes into `docs/sub`, and
write_file of 100 bytes over `docs/sub/a.txt` (portable calls: a child process with
FSAGENT_PORTABLE_CALLS=1, which must be set before the server's modules are imported); and the
staging folder's own cost alone (the walk from the root to it, two statx, held and let go).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, Row, median, row

ROUNDS = 7
FILES = 1_000
WRITES = 40  # a round; each write fsyncs its file and the journal
FINDS = 1_000
CHILD = "--child"


def tools_on(root: Path) -> Any:
    """The server's tools on `root`, journalled (as `build_server` makes them)."""
    from mcp_servers.filesystem import FileTools
    from mcp_servers.journal import open_journals
    from mcp_servers.protected import Protected
    from mcp_servers.sandbox import Sandbox

    sandbox = Sandbox((root,))
    tools = FileTools(sandbox, Protected(sandbox, ()))
    tools.journals, _ = open_journals((root,), tools.places.root_fds)
    return tools


def child(kind: str) -> dict[str, list[float]]:
    """Seconds per act, staged and in place, interleaved (run in the child process)."""
    from mcp_servers import staging

    times: dict[str, list[float]] = {"staged": [], "in place": []}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as place:
        root = Path(place) / "root"
        (root / "docs" / "sub").mkdir(parents=True)
        (root / "docs" / "sub" / "a.txt").write_bytes(b"a" * 100)
        os.environ["FSAGENT_JOURNAL_DIR"] = str(Path(place) / "journal")
        (root / "d").mkdir()
        for number in range(FILES):
            (root / "d" / f"f{number:04}.txt").write_bytes(b"x" * 100)
        tools = tools_on(root)
        if kind == "find":  # the staging folder alone: found, reached, held and let go
            with tools.places.folder(root / "docs" / "sub") as folder:
                for _ in range(ROUNDS):
                    started = time.perf_counter()
                    for _ in range(FINDS):
                        with staging.staging_for(folder, "docs/sub", None) as into:
                            assert into.fd != folder
                    times["staged"].append((time.perf_counter() - started) / FINDS)
                    times["in place"].append(0.0)
            return times
        for number in range(ROUNDS):
            for how in ("staged", "in place"):
                staging.allow_across_folders(how == "staged")
                started = time.perf_counter()
                if kind == "copy":
                    tools.copy("d", "docs/sub/e")
                else:
                    for _ in range(WRITES):
                        tools.write_file("docs/sub/a.txt", "y" * 100)
                spent = time.perf_counter() - started
                times[how].append(spent if kind == "copy" else spent / WRITES)
                shutil.rmtree(root / "docs" / "sub" / "e", ignore_errors=True)
            assert not [n for n in os.listdir(root) if n.startswith(".fsagent-")], number
    return times


def measure() -> list[Row]:
    if not sys.platform.startswith("linux"):
        return []
    rows: list[Row] = []
    for kind, portable in (("copy", "0"), ("write", "1"), ("find", "0")):
        env = {**os.environ, "FSAGENT_PORTABLE_CALLS": portable, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-m", "bench.staging", CHILD, kind],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        times = json.loads(done.stdout)
        staged, in_place = median(times["staged"]), median(times["in place"])
        if kind == "find":
            name = "the staging folder of docs/sub: walked to, statx twice, held (per act)"
            rows.append(row(name, staged * 1e6, None, "µs", "a few µs beside ms of writes"))
        elif kind == "copy":
            name = f"copy of a folder of {FILES:,} files into docs/sub, staged vs in place"
            rows.append(row(name, staged * 1e3, in_place * 1e3, "ms", "the same within noise"))
        else:
            name = "portable write_file of 100 bytes into docs/sub, staged vs in place"
            rows.append(row(name, staged * 1e3, in_place * 1e3, "ms", "the same within noise"))
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        print(json.dumps(child(sys.argv[2])))
    else:
        for line in measure():
            print(line)
