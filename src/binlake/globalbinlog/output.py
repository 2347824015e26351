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
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from binlake.errors import IncompleteTailError
from binlake.events import encode_body
from binlake.events.base import HEADER_V4
from binlake.events.control import Rotate, RowsQuery, Xid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import DDL_KIND, HEARTBEAT
from binlake.globalbinlog.vtso import Vtso
from binlake.reader import FIRST_EVENT, BinlogReader
from binlake.series import BinlogSeries
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper
from binlake.wire import crc32
from binlake.writer import BinlogWriter

CTS_MARK = "CTS::"


class GlobalBinlogWriter:
    """Append merged transactions to ``directory`` as a binlog series. A directory that already
    holds one is continued: ``last_vtso`` says what it has (see ``cut_back``)."""

    def __init__(
        self, directory: str | Path, *, max_file_size: int | None = 256 << 20, server_id: int = 1
    ) -> None:
        self.last_vtso, first = cut_back(Path(directory), server_id)
        self.writer = BinlogWriter(
            directory, flavor="mysql57", server_id=server_id, max_file_size=max_file_size, first_number=first
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
        """Write one transaction; False when it carries nothing to write (heartbeat, empty) or the
        series has it already (a rerun after a crash)."""
        events = g.events
        if g.kind == HEARTBEAT or not events or (self.last_vtso is not None and g.vtso <= self.last_vtso):
            return False
        if g.kind == DDL_KIND:
            return self._write_ddl(g)
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

    def _write_ddl(self, g: GlobalTxn) -> bool:
        """DDL as MySQL writes it: each statement its own event group, no BEGIN and no XID (readers
        and `dump --type ddl` find it as DDL); the vtso mark goes just before it."""
        for e in g.events:
            if isinstance(e.body, Query):
                ts = e.header.timestamp
                self.writer.transaction(
                    [(EventType.ROWS_QUERY, RowsQuery(f"{CTS_MARK}{g.vtso}"), ts), (e.type_code, e.body, ts)]
                )
        self.transactions += 1
        return True

    def close(self) -> list[Path]:
        return self.writer.close()


def _mark(t: Transaction) -> Vtso | None:
    for e in t.events:
        if isinstance(e.body, RowsQuery) and e.body.query.startswith(CTS_MARK):
            return e.body.query.removeprefix(CTS_MARK)
    return None


def _complete(path: Path) -> tuple[list[tuple[int, Vtso | None]], int]:
    """(end, vtso) of each complete transaction of a file, and where its header events end."""
    header_end, out = FIRST_EVENT, list[tuple[int, Vtso | None]]()
    g = TransactionGrouper(keep_events=True)
    try:
        for ev in BinlogReader(path):
            if ev.type_code in (EventType.FORMAT_DESCRIPTION, EventType.PREVIOUS_GTIDS) and not out:
                header_end = ev.end_offset
            out += [(t.end, _mark(t)) for t in g.feed(0, ev) if t.kind != UNFINISHED]
    except IncompleteTailError:
        pass  # the crash cut the last event: it goes with the unfinished transaction
    return out, header_end


def cut_back(directory: Path, server_id: int = 1) -> tuple[Vtso | None, int]:
    """Continue a global binlog a crashed run left: cut its last file back to the last complete
    transaction, close it with a ROTATE to the next file, and say which vtso it ends with and which
    file number comes next. (None, 1) for a new directory."""
    index = directory / "binlog.index"
    if not index.exists():
        return None, 1
    files = BinlogSeries.open(index).files
    done, header_end = _complete(files[-1])
    end = done[-1][0] if done else header_end
    last_vtso = next((v for _, v in reversed(done) if v), None)
    for f in reversed(files[:-1]):  # the last file has no transaction yet: the one before ends it
        if last_vtso is not None:
            break
        last_vtso = next((v for _, v in reversed(_complete(f)[0]) if v), None)
    path = files[-1]
    fde = next(iter(BinlogReader(path))).body
    number = int(path.name.rsplit(".", 1)[1]) + 1
    body = encode_body(EventType.ROTATE, Rotate(4, f"binlog.{number:06d}"), fde)
    size = 19 + len(body) + (4 if fde.checksum_alg else 0)
    raw = HEADER_V4.pack(int(path.stat().st_mtime), EventType.ROTATE, server_id, size, end + size, 0) + body
    with open(path, "r+b") as out:
        out.truncate(end)
        out.seek(end)
        out.write(raw + (struct.pack("<I", crc32(raw)) if fde.checksum_alg else b""))
    return last_vtso, number


def write_binlog(
    txns: Iterable[GlobalTxn], directory: str | Path, max_file_size: int | None = 256 << 20
) -> list[Path]:
    """Write (or continue: what the directory has already is skipped) the global binlog; the files."""
    w = GlobalBinlogWriter(directory, max_file_size=max_file_size)
    for g in txns:
        w.write(g)
    w.close()
    return BinlogSeries.open(Path(directory) / "binlog.index").files


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
