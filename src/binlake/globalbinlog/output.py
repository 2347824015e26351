"""Writing the merged stream: a global binlog series (MySQL 5.7 layout, the one PolarDB-X CDC writes)
that binlake and mariadb-binlog read, and a JSON-lines form for inspection and tests.

Each transaction: BEGIN, a ROWS_QUERY ``CTS::<vtso>`` (its virtual TSO), the pieces' table maps and
rows (table ids renumbered per output file: two nodes may use one id for different tables), XID.
Files rotate only between transactions. Heartbeat transactions are watermarks, not data: they are
left out of the binlog (the JSON lines keep them).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from binlake.events.control import RowsQuery, Xid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import HEARTBEAT
from binlake.writer import BinlogWriter

CTS_MARK = "CTS::"


class GlobalBinlogWriter:
    """Append merged transactions to ``directory`` as a binlog series."""

    def __init__(
        self, directory: str | Path, *, max_file_size: int | None = 256 << 20, server_id: int = 1
    ) -> None:
        self.writer = BinlogWriter(
            directory, flavor="mysql57", server_id=server_id, max_file_size=max_file_size
        )
        self._ids: dict[tuple[Any, ...], int] = {}
        self._file = self.writer.number
        self.xid = 0
        self.transactions = 0

    def _table_id(self, tm: TableMap) -> int:
        if self.writer.number != self._file:  # a new file starts a new id space
            self._ids, self._file = {}, self.writer.number
        key = (tm.database, tm.table, tm.signature)
        if key not in self._ids:
            self._ids[key] = len(self._ids) + 1
        return self._ids[key]

    def write(self, g: GlobalTxn) -> bool:
        """Write one transaction; False when it carries nothing to write (heartbeat, empty)."""
        events = g.events
        if g.kind == HEARTBEAT or not events:
            return False
        ts = events[0].header.timestamp
        out: list[tuple[int, Any, int]] = [
            (EventType.QUERY, Query(0, 0, 0, "", "BEGIN", {"flags2": 0, "sql_mode": 0}), ts),
            (EventType.ROWS_QUERY, RowsQuery(f"{CTS_MARK}{g.vtso}"), ts),
        ]
        mapped: dict[int, TableMap] = {}  # (per piece) source table id -> renumbered map
        for p in g.pieces:
            mapped.clear()
            for e in p.events:
                b, t = e.body, e.header.timestamp
                if isinstance(b, TableMap):
                    tm = dataclasses.replace(b, table_id=self._table_id(b))
                    mapped[b.table_id] = tm
                    out.append((EventType.TABLE_MAP, tm, t))
                elif isinstance(b, Rows):
                    tm = mapped[b.table_id]
                    out.append((e.type_code, dataclasses.replace(b, table_id=tm.table_id, table=tm), t))
                elif isinstance(b, (Query, RowsQuery)):
                    out.append((e.type_code, b, t))
        self.xid += 1
        out.append((EventType.XID, Xid(self.xid), events[-1].header.timestamp))
        self.writer.transaction(out)
        self.transactions += 1
        return True

    def close(self) -> list[Path]:
        return self.writer.close()


def write_binlog(
    txns: Iterable[GlobalTxn], directory: str | Path, max_file_size: int | None = 256 << 20
) -> list[Path]:
    w = GlobalBinlogWriter(directory, max_file_size=max_file_size)
    for g in txns:
        w.write(g)
    return w.close()


def jsonl_record(g: GlobalTxn) -> dict[str, Any]:
    return {
        "vtso": g.vtso,
        "kind": g.kind,
        "cts": g.cts,
        "txn_id": g.txn_id,
        "pieces": [
            {
                "node": p.node,
                "branch": p.branch,
                "start": list(p.start),
                "rows": sum(len(r.rows) for r in p.rows),
                "tables": sorted({f"{r.table.database}.{r.table.table}" for r in p.rows if r.table}),
            }
            for p in g.pieces
        ],
    }


def write_jsonl(txns: Iterable[GlobalTxn], path: str | Path) -> int:
    n = 0
    with open(path, "w") as f:
        for g in txns:
            f.write(json.dumps(jsonl_record(g), sort_keys=True) + "\n")
            n += 1
    return n
