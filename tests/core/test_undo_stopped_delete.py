"""The undo of a recursive delete that stopped part-way (issue 40): the server put what it
could not delete back under the folder's name and said what went (mcp_servers/stopped.py);
the undo makes again what went, leaves what is still there as it is, and says so before the
person approves. The real CLI, the real MCP server, a real SQLite thread file, an immutable
file (chattr +i) that stops the delete."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: undo must not need LM Studio
SIX = {
    "a.txt": "A\n",
    "b.txt": "B\n",
    "c.txt": "C\n",
    "sub/keep.txt": "keep\n",
    "sub/b.txt": "sub b\n",
    "sub/z.txt": "sub z\n",
}


def contents(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in folder.rglob("*")
        if path.is_file()
    }


def test_a_stopped_delete_is_undone_as_far_as_it_went(workspace: Workspace) -> None:
    folder = workspace.root / "d"
    for name, content in SIX.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    keep = folder / "sub" / "keep.txt"
    subprocess.run(["chattr", "+i", str(keep)], check=True)
    try:
        call = tool_call("delete", {"path": "d", "recursive": True}, id="c1")
        turn = [reply(tool_calls=[call]), text("It stopped.")]
        with FakeLLM(turn, auto_route="filesystem") as llm:
            wrote = workspace.run(llm.base_url, "delete d\ny\n")
            left = contents(folder)
            undone = workspace.invoke(NO_LLM, "y\n", "undo", "t")
            audited = workspace.invoke(NO_LLM, "", "audit", "--json", thread=None)
    finally:
        subprocess.run(["chattr", "-i", str(keep)], check=True)

    assert wrote.returncode == 0, wrote.stderr
    said = re.search(r"delete 'd' stopped: (\d+) of 6 files deleted; (\d+) remain", wrote.stdout)
    assert said is not None, wrote.stdout
    assert int(said.group(2)) == len(left) and "sub/keep.txt" in left
    assert undone.returncode == 0, undone.stdout + undone.stderr
    out = undone.stdout
    # The plan says the truth: what it makes again, and that the rest is still there.
    for name in SIX:
        made = f"makes d/{name} again"
        assert (made in out) == (name not in left), (name, out)
    assert f"(the delete stopped part-way: {len(left)} of its files are still there" in out
    assert contents(folder) == SIX  # every file back, the immutable one untouched
    # The audit has a row for each file made again, none for what was still there.
    undo_rows = [row for row in json.loads(audited.stdout) if row["decision"] == "undo"]
    made = sorted(row["args"]["path"] for row in undo_rows)
    assert made == sorted(str(folder / name) for name in SIX if name not in left)
