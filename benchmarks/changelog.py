"""The change-log step, candidate by candidate, on one binlog file: what each costs over plain
decoding, in CPU seconds of one process each (issue #14 asks for the change log at >= 80% of plain
decoding's throughput).

    python benchmarks/changelog.py FILE [STEP ...]

Steps: ``decode`` (every event, every value), ``group`` (+ transactions, grouped as the change log
groups them: ``arrowlog.changelog.fed``, compiled when chosen; ``BINLAKE_PURE=1``: all pure), ``changes`` (+ the core
model: ``binlake.changes.row_changes``), ``variant`` (the change log's record batches: VARIANT
images built per layout, what the data source yields: ``file_batches``, one pass from the decoded
rows without the row changes where compiled), ``per-change`` (the same batches built from
``row_changes``, one ``RowChange`` per row), ``typed-arrow`` (the alternative measured
against it: per table layout, Arrow batches whose images are structs typed by
``binlake.spark.typed.arrow_type``, values converted only where the Arrow type differs from the
decoded one; one schema per layout, which a Spark data source of one schema cannot yield). Each step
runs in its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

from binlake.arrowlog.changelog import fed
from binlake.changes import Column, Layout, RowChange, file_number, row_changes
from binlake.errors import IncompleteTailError
from binlake.events.rows import ABSENT
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_batches, file_changes, to_batches
from binlake.spark.typed import arrow_type
from binlake.txn import UNFINISHED, TransactionGrouper
from binlake.values.json_binary import to_mysql_text
from binlake.values.temporal import MysqlDate, MysqlDateTime, format_time
from binlake.values.types import ColumnType

STEPS = ("decode", "group", "changes", "variant", "per-change", "typed-arrow")


def changes(path: str) -> Iterator[RowChange]:
    for t in fed(BinlogReader(path), file_number(path), TransactionGrouper()):
        if t.kind != UNFINISHED:
            yield from row_changes(t)


Convert = Callable[[Any], Any] | None


def _unless_null(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None or v is ABSENT else f(v)


def _converter(c: Column, at: pa.DataType) -> Convert:
    """None where pyarrow takes the decoded value as it is."""
    if c.type in (ColumnType.TIME, ColumnType.TIME2):
        return _unless_null(lambda v: format_time(v, c.meta))
    if c.type == ColumnType.JSON:
        return _unless_null(lambda v: to_mysql_text(v.value))
    if c.type == ColumnType.SET:
        return _unless_null(",".join)
    if pa.types.is_decimal(at) and c.type != ColumnType.NEWDECIMAL:
        return _unless_null(Decimal)
    if pa.types.is_date(at) or pa.types.is_timestamp(at):
        return _unless_null(lambda v: None if isinstance(v, (MysqlDate, MysqlDateTime)) else v)
    if pa.types.is_string(at):
        return _unless_null(lambda v: v if isinstance(v, str) else str(v))
    return None


_PLANS: dict[int, tuple[Layout, list[pa.DataType], list[Convert]]] = {}


def _plan(layout: Layout) -> tuple[Layout, list[pa.DataType], list[Convert]]:
    p = _PLANS.get(id(layout))
    if p is None:
        types = [
            arrow_type({"type": c.type, "meta": c.meta, "unsigned": c.unsigned, "collation": c.collation})
            for c in layout
        ]
        p = _PLANS[id(layout)] = (
            layout,
            types,
            [_converter(c, t) for c, t in zip(layout, types, strict=True)],
        )
    return p


def _images(layout: Layout, images: list[tuple[Any, ...] | None]) -> pa.StructArray:
    _, types, convs = _plan(layout)
    empty = (None,) * len(layout)
    cols = list(zip(*[im if im is not None else empty for im in images], strict=True))
    arrays = []
    for t, f, vals in zip(types, convs, cols, strict=True):
        values = [f(v) for v in vals] if f is not None else list(vals)
        try:
            arrays.append(pa.array(values, type=t))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # ABSENT (a minimal image): NULL there
            arrays.append(pa.array([None if v is ABSENT else v for v in values], type=t))
    mask = pa.array([im is None for im in images])
    return pa.StructArray.from_arrays(arrays, names=[c.name for c in layout], mask=mask)


def typed_batches(path: str, size: int = 4096) -> Iterator[pa.RecordBatch]:
    groups: dict[int, list[RowChange]] = {}
    n = 0
    for c in changes(path):
        if c.layout is None:
            continue
        groups.setdefault(id(c.layout), []).append(c)
        n += 1
        if n >= size:
            yield from _flush(groups)
            groups, n = {}, 0
    yield from _flush(groups)


def _flush(groups: dict[int, list[RowChange]]) -> Iterator[pa.RecordBatch]:
    for cs in groups.values():
        layout = cs[0].layout
        assert layout is not None
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([c.order_key.encode() for c in cs], pa.binary()),
                pa.array([c.op.value for c in cs]),
                pa.array([c.db for c in cs]),
                pa.array([c.table for c in cs]),
                pa.array([c.position for c in cs], pa.int64()),
                pa.array([c.origin.gtid for c in cs]),
                _images(layout, [c.before for c in cs]),
                _images(layout, [c.after for c in cs]),
            ],
            names=["order_key", "op", "db", "table", "position", "gtid", "before", "after"],
        )


def run(step: str, path: str) -> None:
    if step == "decode":
        for _ in BinlogReader(path):
            pass
    elif step == "group":
        for _ in fed(BinlogReader(path), 1, TransactionGrouper()):
            pass
    elif step == "changes":
        for _ in changes(path):
            pass
    elif step == "variant":
        for _ in file_batches(path):
            pass
    elif step == "per-change":
        for _ in to_batches(file_changes(path)):
            pass
    elif step == "typed-arrow":
        for _ in typed_batches(path):
            pass


def main() -> None:
    path, steps = sys.argv[1], sys.argv[2:] or list(STEPS)
    if len(steps) == 1 and os.environ.get("BINLAKE_BENCH_CHILD"):
        t0 = time.process_time()
        try:
            run(steps[0], path)
        except IncompleteTailError:
            pass  # a file cut short for a quick run
        print(time.process_time() - t0)
        return
    mb = os.path.getsize(path) / 1e6
    base = None
    for step in steps:
        out = subprocess.run(
            [sys.executable, __file__, path, step],
            env={**os.environ, "BINLAKE_BENCH_CHILD": "1"},
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        s = float(out.split()[-1])
        base = base or s
        print(f"{step:12s} {s:7.2f} s cpu  {mb / s:6.1f} MB/s  {base / s:5.0%} of {steps[0]}", flush=True)


if __name__ == "__main__":
    main()
