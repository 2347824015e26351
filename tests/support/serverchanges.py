"""The row changes a private server's binlogs hold so far (every file closed first)."""

from __future__ import annotations

from typing import Any

from binlake.changes import RowChange, file_number, row_changes
from binlake.reader import BinlogReader
from binlake.txn import UNFINISHED, TransactionGrouper


def server_changes(server: Any, db: str) -> list[RowChange]:
    """Every change of database ``db`` in ``server``'s binlogs (a ``PrivateMariaDB``), in order."""
    out = []
    for f in server.flush_binlogs():
        g = TransactionGrouper(keep_events=True)
        for ev in BinlogReader(f):
            for t in g.feed(file_number(str(f)), ev):
                if t.kind != UNFINISHED:
                    out += [c for c in row_changes(t) if c.db == db]
    return out
