"""Thread files as an earlier release wrote them, restored from their SQL dumps (for the
store's migration tests and the early prompt's)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

RELEASE_0_1_0 = Path(__file__).parent / "store" / "release-0.1.0.sql"


def restore(dump: Path, db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(dump.read_text(encoding="utf-8"))
    conn.close()
