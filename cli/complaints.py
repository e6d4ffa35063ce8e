"""The one line an error gets on stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


def complain(error: object) -> None:
    """The one line an error gets on stderr. It may quote a thread name, a path or a
    server's words: made visible (core.text), so it cannot write to the screen itself."""
    from core.text import visible

    print(f"fsagent: {visible(str(error))}", file=sys.stderr)
