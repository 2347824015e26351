"""Review of the PARTIAL_UPDATE_ROWS observer (``spark.changelog.PartialUpdates``): every read shape
that hands the compaction ``suspects`` (a range starting mid-file, a selection, both) flags the
same partial JSON updates as a compaction that searches every row (``suspects=None``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake.arrowlog.changelog import ColumnsOnce, Trim, transaction_batches
from binlake.arrowlog.compact import last_per_key
from binlake.events.types import EventType
from binlake.filters import Selection
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_batches, file_transactions

PARTIAL = "blackbeam-rust_mysql_common/json.binlog.000001"  # MySQL 8.0.22: PARTIAL_UPDATE_ROWS at 3750


def _flags(rows: list[dict[str, Any]]) -> list[tuple[int, bytes]]:
    return [(r["position"], r["order_key"]) for r in rows if r["json_edits"]]


@pytest.mark.parametrize(
    "read",
    [
        {},
        {"start": "txn"},
        {"selection": Selection(tables=["t"])},
        {"start": "txn", "selection": Selection(operations=["update"])},
    ],
    ids=["whole", "range", "selection", "range-and-selection"],
)
def test_told_reads_flag_what_a_full_search_flags(corpus: Path, read: dict[str, Any]) -> None:
    path = corpus / PARTIAL
    events = list(BinlogReader(path))
    (partial,) = [e.offset for e in events if e.kind == EventType.PARTIAL_UPDATE_ROWS]
    # the range starts at the partial update's transaction (the GTID event before it)
    txn = max(e.offset for e in events if e.offset < partial and e.kind == EventType.ANONYMOUS_GTID)
    start = txn if read.get("start") else None
    selection = read.get("selection")
    trim = Trim(ColumnsOnce(), keyed_before=False, last=True)
    told = pa.Table.from_batches(
        list(file_batches(path, trim=trim, start=start, selection=selection)), trim.read_schema
    ).to_pylist()
    trim.once = ColumnsOnce()
    txns = file_transactions(path, None, start, None, selection, raw_rows=True)
    built = list(transaction_batches(txns, trim=trim))
    searched = pa.Table.from_batches(last_per_key(built, trim.schema), trim.read_schema).to_pylist()
    assert _flags(told) == _flags(searched)
    assert _flags(told) and {p for p, _ in _flags(told)} == {partial}


class _Unlisted(set[int]):
    """Suspects that may be asked about a position but never listed: a read's set grows with every
    PARTIAL_UPDATE_ROWS event, and listing (or sorting) it per window made the work windows x events."""

    def __iter__(self) -> Any:
        raise AssertionError("the suspects were listed")


def test_suspects_are_looked_up_not_listed(corpus: Path) -> None:
    path = corpus / PARTIAL
    suspects = _Unlisted(e.offset for e in BinlogReader(path) if e.kind == EventType.PARTIAL_UPDATE_ROWS)
    suspects |= set(range(10**6, 10**6 + 50_000))  # later events of a long read: not this window's
    trim = Trim(ColumnsOnce(), keyed_before=False, last=True)
    built = list(transaction_batches(file_transactions(path, raw_rows=True), trim=trim))
    told = pa.Table.from_batches(last_per_key(built, trim.schema, 3, suspects=suspects), trim.read_schema)
    searched = pa.Table.from_batches(last_per_key(built, trim.schema, 3), trim.read_schema)
    assert _flags(told.to_pylist()) == _flags(searched.to_pylist()) != []
