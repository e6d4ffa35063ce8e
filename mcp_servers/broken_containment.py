"""A test-only switch that breaks the server's own containment, to show what the kernel holds.

FSAGENT_TEST_BROKEN_CONTAINMENT=DIR makes the descriptor every root is reached by lead to DIR
instead, and turns the check that a root is still the folder opened at start off: every tool
then acts in DIR with the names the check by name admitted in the root, as a bug in
`dirfd.py` would. Without the kernel sandbox the tools read, list, write and rename in DIR;
with it the kernel refuses them (`tests/mcp_servers/test_kernel_sandbox_holds.py`). Never set
outside tests.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mcp_servers.dirfd import PATH_FLAGS, Places

BROKEN_ENV = "FSAGENT_TEST_BROKEN_CONTAINMENT"
logger = logging.getLogger("fsagent.filesystem")


def break_containment_if_asked(places: Places) -> None:
    elsewhere = os.environ.get(BROKEN_ENV)
    if not elsewhere:
        return
    logger.warning("%s is set: every root leads to %s (tests only)", BROKEN_ENV, elsewhere)
    places.root_fds = {root: os.open(Path(elsewhere), PATH_FLAGS) for root in places.root_fds}
    vars(places)["check_root"] = lambda root: None  # this instance's check, replaced
