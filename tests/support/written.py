"""Binlog files a private server wrote for a test: the statements after a setup, closed and copied."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def closed_since(db: Any, start: int, into: Path) -> Path:
    """A directory holding copies of the server's binlogs from file ``start`` (1-based) on, the
    active one closed first: what the server wrote since."""
    into.mkdir()
    for f in db.flush_binlogs()[start - 1 : -1]:
        (into / f.name).write_bytes(f.read_bytes())
    return into


def written(db: Any, setup: list[str], statements: list[str], into: Path) -> Path:
    """Run ``setup``, then ``statements`` on server ``db`` (a private MariaDB or MySQL); a directory
    of copies of the binlog files holding the statements (and not the setup)."""
    db.execute(*setup)
    start = len(db.flush_binlogs())
    db.execute(*statements)
    return closed_since(db, start, into)
