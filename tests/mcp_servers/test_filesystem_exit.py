"""The server's own exit (mcp_servers/filesystem.py `exit_without_teardown`): it skips the
interpreter's teardown of the modules, never what the interpreter does before it. A call
still working on a worker thread when the client leaves (one answered as timed out and
abandoned) finishes its act before the process ends, as the interpreter's wait for its
threads lets it."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from mcp_session import RawServer, tool_text
from race_pause import NEVER_PAUSED_SECONDS, Pauses
from server_log import Log

from mcp_servers.journal import JOURNAL_DIR_ENV
from mcp_servers.race_hook import STEP_PAUSE_ENV


def test_an_abandoned_act_still_working_when_the_client_leaves_is_finished_first(
    tmp_path: Path,
) -> None:
    root, journals = tmp_path / "root", tmp_path / "journals"
    root.mkdir()
    (root / "notes.txt").write_text("old\n")
    pauses = Pauses(tmp_path / "pause")
    env = {STEP_PAUSE_ENV: str(pauses.folder), JOURNAL_DIR_ENV: str(journals)}
    try:
        server = RawServer(
            [root], "--verbose", "--call-timeout", "1", env=env, stderr=subprocess.PIPE
        )
        log = Log(server.process)
        asked = server.call("write_file", path="notes.txt", content="new\n")
        # Held where its journal has the act recorded and its rename not yet done, until
        # its budget is spent and it is answered as abandoned.
        while pauses.next_line() != "paused recorded temp":
            pauses.go()
        text, is_error = tool_text(server.answer(asked, timeout=NEVER_PAUSED_SECONDS))
        assert is_error and "abandoned" in text
        assert server.process.stdin is not None
        server.process.stdin.close()  # the client leaves; the call's thread is still held
        # The loop has ended, and the server says it waits for the one call still working.
        log.until(r"the session is over; waiting for 1 call\(s\) still working")
        pauses.go()
        threading.Thread(target=pauses.answer_all, daemon=True).start()
        assert server.process.wait(timeout=NEVER_PAUSED_SECONDS) == 0
        # The act ran to its end: its record closed, nothing for the next start's recovery,
        # no temp entry beside the file, the file whole.
        assert [p.stat().st_size for p in journals.rglob("*.journal")] == [0]
        assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]
        assert (root / "notes.txt").read_text() in ("old\n", "new\n")
    finally:
        pauses.close()
