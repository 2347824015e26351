"""Held-back transactions without their rows in memory (issue #17 item 11): a piece that waits for
its node's watermark keeps only where its body is in the node's binlog (file, start, end); its
events are read again from there when it is written. A checkpoint pickles that reference (a few
dozen bytes), not the rows (a 40,000-row transaction held back made a 3.9 MB checkpoint), and a
merge holds one event of a transaction at a time while it reads the nodes and while it writes.

The node's binlog is the spill file: nothing is written twice. It must stay until the merge has
written the piece (``binlake mirror`` keeps what it fetched; a node's purged file is read nowhere).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from binlake.errors import IncompleteTailError
from binlake.events.base import Event
from binlake.events.control import RowsQuery
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.series import BinlogSeries, Position, check_magic_of
from binlake.tail import just_created
from binlake.txn import DDL, UNFINISHED, Transaction, TransactionGrouper

_BODY = (Rows, TableMap, RowsQuery)


def is_body(e: Event, ddl: bool) -> bool:
    """What a merged transaction keeps of a node's transaction: row events, their table maps and
    Rows_query (annotations), the statement of a DDL; no XA control, GTID or TSO carrier events."""
    b = e.body
    return isinstance(b, _BODY) or type(b).__name__ == "AnnotateRows" or (ddl and isinstance(b, Query))


@dataclass(frozen=True)
class SpilledBody(Sequence[Event]):
    """A piece's body events, read from its node's binlog when they are needed (each iteration
    reads them again: nothing is kept)."""

    path: str
    start: int  # the transaction's first event (its body lies in this one file)
    end: int  # just past its last event
    ddl: bool = False
    require_fde: bool = True

    def __iter__(self) -> Iterator[Event]:
        series = BinlogSeries.open(Path(self.path))
        at = Position(0, self.path, self.start)
        for _, e in series.events(
            start=at, stop=Position(0, self.path, self.end), require_fde=self.require_fde
        ):
            if is_body(e, self.ddl):
                yield e

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Event]: ...
    def __getitem__(self, i: Any) -> Any:
        return list(self)[i]


def _control(e: Event) -> bool:
    """What the sorter reads of a transaction besides its body: XA PREPARE, TSO carriers, statements."""
    return not isinstance(e.body, _BODY)


def light_transactions(
    files: list[Path], require_fde: bool = True, start: tuple[int, int] | None = None
) -> Iterator[Transaction]:
    """A node's complete transactions in binlog order, as ``merge.node_transactions`` gives them,
    but each holding only its control events (XA PREPARE, TSO carriers, statements), its tables
    and the reference of its body (``body_of``): however large, one transaction's rows are never
    all in memory."""
    files = list(files)
    if files:
        check_magic_of(files[-1], active=True)
        if just_created(files[-1], active=True):
            files.pop()
    if not files:
        return
    series = BinlogSeries.open(*files)
    g = TransactionGrouper(keep_events=False)
    at = Position(start[0], str(series.files[start[0]]), start[1]) if start else None
    kept: list[Event] = []
    try:
        for seq, ev in series.events(start=at, require_fde=require_fde):
            if _control(ev):
                kept.append(ev)
            for t in g.feed(seq, ev):
                if t.kind == UNFINISHED:
                    continue
                t.events, kept = kept, []
                yield t
    except IncompleteTailError as e:
        if e.source != str(series.files[-1]):
            raise


@dataclass(frozen=True)
class BodyOf:
    """How a node sorter gets a piece's body from a light transaction: a ``SpilledBody`` when it has
    rows, else the control events it kept (a DDL's statement)."""

    require_fde: bool = True

    def __call__(self, t: Transaction) -> Sequence[Event]:
        if t.rows or t.tables:
            return SpilledBody(t.source, t.start, t.end, t.kind == DDL, self.require_fde)
        return [e for e in t.events if is_body(e, t.kind == DDL)]
