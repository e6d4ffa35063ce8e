"""Run the official MCP conformance suite's server scenarios against our filesystem server.

    python tests/mcp_servers/run_conformance.py [--scenario NAME ...]

With no scenario, the whole active suite runs and must fail exactly the scenarios listed in
conformance-baseline.yml beside this file (the suite's own `--expected-failures`: a new failure
or a baseline entry that now passes fails the run). With scenarios, each must pass.

The suite (`@modelcontextprotocol/conformance`, pinned below) needs Node 22 (it imports
`fs.globSync`), so both are installed with npm into CONFORMANCE_DIR by `make conformance`. It
tests a server at a URL; ours speaks stdio, so stdio_over_http.py carries the lines across.
Exit status: the suite's (0 when all is as expected), or 77 when the suite is not installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from stdio_over_http import Bridge

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BASELINE = HERE / "conformance-baseline.yml"
CONFORMANCE_DIR = Path(
    os.environ.get("FSAGENT_CONFORMANCE_DIR", Path.home() / ".cache" / "fsagent-conformance")
)
NOT_INSTALLED = 77  # the automake convention for "skipped"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", default=[])
    args = parser.parse_args()
    bin_dir = CONFORMANCE_DIR / "node_modules" / ".bin"
    if not (bin_dir / "conformance").exists() or not (bin_dir / "node").exists():
        print(
            f"the MCP conformance suite is not installed in {CONFORMANCE_DIR}: `make "
            "conformance` installs it (npm, Node 22 and @modelcontextprotocol/conformance)",
            file=sys.stderr,
        )
        return NOT_INSTALLED
    # Node 22 first on PATH: the suite's script starts with `#!/usr/bin/env node`.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="fsagent-conformance-") as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        (root / "notes.txt").write_text("a file for the suite to find\n")
        server = [sys.executable, "-m", "mcp_servers.filesystem", str(root)]
        bridge = Bridge(0, server, cwd=REPO)
        threading.Thread(target=bridge.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{bridge.server_address[1]}/mcp"
        suite = [str(bin_dir / "conformance"), "server", "--url", url]
        results = ["--output-dir", str(Path(scratch) / "results")]
        try:
            if not args.scenario:
                command = [*suite, *results, "--expected-failures", str(BASELINE)]
                return subprocess.run(command, env=env, cwd=scratch, check=False).returncode
            status = 0
            for scenario in args.scenario:
                command = [*suite, *results, "--scenario", scenario]
                done = subprocess.run(command, env=env, cwd=scratch, check=False)
                status = status or done.returncode
            return status
        finally:
            bridge.shutdown()
            bridge.close_all()


if __name__ == "__main__":
    sys.exit(main())
