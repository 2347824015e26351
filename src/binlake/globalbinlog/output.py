"""Writing the merged stream: a global binlog series (MySQL 5.7 layout, the one PolarDB-X CDC writes)
that binlake and mariadb-binlog read, and a JSON-lines form for inspection and tests.

Each transaction: a GTID (``GLOBAL_UUID:N``, N = 1, 2, 3, ... over the series, so consumers resume
by GTID; logical clock serial: every transaction depends on the one before), BEGIN, a ROWS_QUERY
``CTS::<vtso>`` (its virtual TSO), the pieces' table maps and rows (table ids renumbered per output
file: two nodes may use one id for different tables), XID. A DDL: GTID, the mark, the statement.
Files rotate only between transactions. Heartbeat transactions are watermarks, not data: they are
left out of the binlog (the JSON lines keep them).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.errors import BadMagicError, BinlogError, IncompleteTailError
from binlake.events.control import RowsQuery, Xid
from binlake.events.gtid import Gtid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.globalbinlog.body import as_read
from binlake.globalbinlog.merge import GlobalTxn
from binlake.globalbinlog.sorter import DDL_KIND, HEARTBEAT
from binlake.globalbinlog.vtso import Vtso
from binlake.gtid import GtidAccumulator, GtidSet
from binlake.reader import BinlogReader
from binlake.series import BinlogSeries
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper
from binlake.writer import BinlogWriter

CTS_MARK = "CTS::"
# the source id of the global binlog's GTIDs unless told another (``merge --server-uuid``): fixed, so
# that two runs over the same nodes write the same bytes
GLOBAL_UUID = "6c0b1a6e-6e2c-5f0e-9a1d-62696e6c616b"
GTID_MAY_HAVE_SBR = 1  # the GTID flag MySQL sets on a statement (DDL); 0: rows only


class GlobalBinlogWriter:
    """Append merged transactions to ``directory`` as a binlog series. A directory that already
    holds one is continued exactly where an uninterrupted run would be (see ``recover``):
    ``last_vtso`` says what it has."""

    def __init__(
        self,
        directory: str | Path,
        *,
        max_file_size: int | None = 256 << 20,
        server_id: int = 1,
        server_uuid: str = GLOBAL_UUID,
    ) -> None:
        r = recover(Path(directory))
        if r and r.uuid and r.uuid != server_uuid:
            raise BinlogError(
                f"the global binlog in {directory} carries GTIDs of {r.uuid}, not {server_uuid}: "
                "continue it with the server UUID it was written with"
            )
        self.writer = BinlogWriter(
            directory,
            flavor="mysql57",
            server_id=server_id,
            max_file_size=max_file_size,
            first_number=r.number if r else 1,
            resume_at=r.end if r else None,
        )
        self.last_vtso = r.last_vtso if r else None
        self._ids: dict[tuple[Any, ...], int] = dict(r.table_ids) if r else {}
        self._file = self.writer.number
        self.xid = r.xid if r else 0
        self.uuid = server_uuid
        self.gno = r.gno if r else 0  # the last GTID number of the series
        self._seq = r.sequence if r else 0  # the logical clock restarts in every file, as MySQL's
        self._seq_file = self.writer.number
        if self.gno:  # the next file's PREVIOUS_GTIDS
            self.writer.executed = GtidAccumulator(GtidSet.from_dict({(server_uuid, ""): [(1, self.gno)]}))
        self.transactions = 0
        if r:  # a crash between a transaction and the rotation it called for
            self.writer.maybe_rotate(r.last_timestamp)

    def _table_id(self, tm: TableMap) -> int:
        if self.writer.number != self._file:  # a new file starts a new id space
            self._ids, self._file = {}, self.writer.number
        key = (tm.database, tm.table, tm.signature)
        if key not in self._ids:
            self._ids[key] = len(self._ids) + 1
        return self._ids[key]

    def write(self, g: GlobalTxn) -> bool:
        """Write one transaction; False when it carries nothing to write (heartbeat, empty) or the
        series has it already (a rerun after a crash). The pieces' events stream through: a
        piece held on disk (``spill.SpilledBody``) is read as it is written."""
        if g.kind == HEARTBEAT or (self.last_vtso is not None and g.vtso <= self.last_vtso):
            return False
        if g.kind == DDL_KIND:
            return self._write_ddl(g)
        body = self._body(g)
        first = next(body, None)
        if first is None:
            return False
        self.writer.transaction(self._framed(g, first, body))
        self.transactions += 1
        return True

    def _body(self, g: GlobalTxn) -> Iterator[tuple[int, Any, int]]:
        """The pieces' table maps (renumbered) and rows; (0, None, ts) for an event left out (its
        time still counts as the transaction's last)."""
        mapped: dict[int, TableMap] = {}  # (per piece) source table id -> renumbered map
        for p in g.pieces:
            mapped.clear()
            for e in as_read(p.events):  # rows are copied, never decoded
                b, t = e.body, e.header.timestamp
                if isinstance(b, TableMap):
                    tm = dataclasses.replace(b, table_id=self._table_id(b))
                    mapped[b.table_id] = tm
                    yield EventType.TABLE_MAP, tm, t
                elif isinstance(b, Rows):
                    tm = mapped[b.table_id]
                    yield e.type_code, dataclasses.replace(b, table_id=tm.table_id, table=tm), t
                elif isinstance(b, (Query, RowsQuery)):
                    yield e.type_code, b, t
                else:
                    yield 0, None, t

    def _framed(
        self, g: GlobalTxn, first: tuple[int, Any, int], body: Iterator[tuple[int, Any, int]]
    ) -> Iterator[tuple[int, Any, int]]:
        """BEGIN, the ``CTS::`` mark, the body, XID (at the time of the body's last event)."""
        ts = last = first[2]
        yield self._gtid(ts, 0)
        yield EventType.QUERY, Query(0, 0, 0, "", "BEGIN", {"flags2": 0, "sql_mode": 0}), ts
        yield EventType.ROWS_QUERY, RowsQuery(f"{CTS_MARK}{g.vtso}"), ts
        for item in itertools.chain([first], body):
            last = item[2]
            if item[1] is not None:
                yield item
        self.xid += 1
        yield EventType.XID, Xid(self.xid), last

    def _write_ddl(self, g: GlobalTxn) -> bool:
        """DDL as MySQL writes it: each statement its own event group, no BEGIN and no XID (readers
        and `dump --type ddl` find it as DDL); the vtso mark goes just before it."""
        wrote = False
        for e in g.events:
            if isinstance(e.body, Query):
                ts = e.header.timestamp
                self.writer.transaction(
                    [
                        self._gtid(ts, GTID_MAY_HAVE_SBR),
                        (EventType.ROWS_QUERY, RowsQuery(f"{CTS_MARK}{g.vtso}"), ts),
                        (e.type_code, e.body, ts),
                    ]
                )
                wrote = True
        self.transactions += wrote
        return wrote

    def _gtid(self, ts: int, flags: int) -> tuple[int, Gtid, int]:
        """The next transaction's GTID event: the next number, serial logical clock in this file."""
        if self.writer.number != self._seq_file:
            self._seq, self._seq_file = 0, self.writer.number
        self.gno += 1
        self._seq += 1
        body = Gtid(flags, self.uuid, self.gno, last_committed=self._seq - 1, sequence_number=self._seq)
        return EventType.GTID, body, ts

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> list[Path]:
        return self.writer.close()


def _mark(t: Transaction) -> Vtso | None:
    for e in t.events:
        if isinstance(e.body, RowsQuery) and e.body.query.startswith(CTS_MARK):
            return e.body.query.removeprefix(CTS_MARK)
    return None


@dataclass
class Resumed:
    """Where a global binlog a previous run left is continued: everything an uninterrupted writer
    would hold in memory after the last complete transaction on disk."""

    number: int  # the file to continue (the last one holding a complete transaction)
    end: int  # just past its last complete transaction
    last_vtso: Vtso | None  # the last vtso mark of the series
    xid: int  # the last XID of the series (XIDs continue without gaps or repeats)
    table_ids: dict[tuple[Any, ...], int]  # the file's table ids (one id space per file)
    last_timestamp: int  # of the last event kept (a rotation that is due happens at it)
    uuid: str | None = None  # the source id of its GTIDs (None: a series written without GTIDs)
    gno: int = 0  # its last GTID number
    sequence: int = 0  # the logical clock's last sequence number in the file continued


@dataclass
class _ReadBack:
    end: int = 0
    vtso: Vtso | None = None
    xid: int | None = None
    table_ids: dict[tuple[Any, ...], int] = dataclasses.field(default_factory=dict)
    timestamp: int = 0
    gtid: str | None = None
    sequence: int = 0


def _read_back(path: Path) -> _ReadBack | None:
    """What the complete transactions of one output file hold; None when it has none (a crash left
    it with a partial header, or it was never written)."""
    got, seen = None, _ReadBack()
    g = TransactionGrouper(keep_events=True)
    try:
        for ev in BinlogReader(path):
            for t in g.feed(0, ev):
                if t.kind == UNFINISHED:
                    continue
                for e in t.events:
                    if isinstance(e.body, TableMap):
                        key = (e.body.database, e.body.table, e.body.signature)
                        seen.table_ids.setdefault(key, e.body.table_id)
                seen.end, seen.timestamp = t.end, t.events[-1].header.timestamp
                seen.vtso, seen.xid = _mark(t) or seen.vtso, t.xid if t.xid is not None else seen.xid
                seen.gtid, seen.sequence = t.gtid or seen.gtid, t.sequence_number or seen.sequence
                got = dataclasses.replace(seen, table_ids=dict(seen.table_ids))
    except (FileNotFoundError, BadMagicError, IncompleteTailError):
        pass  # a crash cut it: what follows the last complete transaction is written again
    return got


def recover(directory: Path) -> Resumed | None:
    """Bring a global binlog a run left (finished or killed at any byte) back to its last complete
    transaction, so that continuing it writes what an uninterrupted run writes, byte for byte:
    files after the last one holding a complete transaction go (at most a new file's header: they
    are rewritten identically), the index is cut to match. None: nothing to continue (a new
    series starts; a crash before its first transaction leaves nothing worth keeping)."""
    index = directory / "binlog.index"
    if not index.exists():
        return None
    names = [ln.strip().removeprefix("./") for ln in index.read_text().splitlines() if ln.strip()]
    paths = [directory / n for n in names]
    last = next(((i, r) for i in reversed(range(len(paths))) if (r := _read_back(paths[i]))), None)
    keep = last[0] + 1 if last else 0
    for p in paths[keep:]:
        p.unlink(missing_ok=True)
    if not last:
        index.unlink()
        return None
    if keep < len(paths):
        tmp = index.with_name(index.name + ".tmp")
        tmp.write_text("".join(f"./{n}\n" for n in names[:keep]))
        os.replace(tmp, index)
    i, r = last
    vtso, xid, gtid = r.vtso, r.xid, r.gtid
    for p in reversed(paths[:i]):  # a file of DDL only carries no XID
        if vtso is not None and xid is not None and gtid is not None:
            break
        older = _read_back(p)
        if older is not None:
            vtso, xid = vtso or older.vtso, xid if xid is not None else older.xid
            gtid = gtid or older.gtid
    number = int(paths[i].name.rsplit(".", 1)[1])
    uuid, _, gno = gtid.rpartition(":") if gtid else ("", "", "0")
    return Resumed(
        number, r.end, vtso, xid or 0, r.table_ids, r.timestamp, uuid or None, int(gno), r.sequence
    )


def write_binlog(
    txns: Iterable[GlobalTxn],
    directory: str | Path,
    max_file_size: int | None = 256 << 20,
    server_uuid: str = GLOBAL_UUID,
) -> list[Path]:
    """Write (or continue: what the directory has already is skipped) the global binlog; the files."""
    w = GlobalBinlogWriter(directory, max_file_size=max_file_size, server_uuid=server_uuid)
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
