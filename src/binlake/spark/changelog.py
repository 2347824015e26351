"""The change log: one row per row change, one schema for every table, built from transactions.

Values of ``before``/``after`` are JSON objects (column -> value) in the documented encoding of
``binlake.render.values.json_value``; ``columns`` describes the table's columns (name, MySQL type,
metadata) so typed tables can be derived exactly. ``order_key`` is a fixed-width string that sorts in
commit order across a series: file number, transaction start, event index, row index.

``op`` is insert / update / delete for row changes, and ``rename_table`` / ``rename_column`` for the
renames DDL makes (before/after hold the old and new name; no images, key or columns) and
``drop_table`` (before: the name it frees), which sinks follow so a renamed table or column keeps its
rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.changes import NAME_OPS as _NAME_OPS
from binlake.changes import NO_NODE, Column, Layout, Op, OrderKey, RowChange, file_number, row_changes
from binlake.changes import ROW_OPS as _ROW_OPS
from binlake.errors import UnappliableChangeError
from binlake.events.rows import ABSENT
from binlake.filters import Selection
from binlake.reader import BinlogReader
from binlake.render.values import PARTIAL_JSON_KEY, json_value
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper

CHANGELOG_FIELDS: list[tuple[str, pa.DataType]] = [
    ("source", pa.string()),
    ("file", pa.string()),
    ("file_number", pa.int64()),
    ("position", pa.int64()),
    ("txn_position", pa.int64()),
    ("order_key", pa.string()),
    ("gtid", pa.string()),
    ("last_committed", pa.int64()),
    ("sequence_number", pa.int64()),
    ("commit_ts", pa.timestamp("us", tz="UTC")),
    ("server_id", pa.int64()),
    ("db", pa.string()),
    ("table", pa.string()),
    ("op", pa.string()),
    ("before", pa.string()),
    ("after", pa.string()),
    ("pk", pa.string()),
    ("pk_before", pa.string()),
    ("columns", pa.string()),
]
CHANGELOG_SCHEMA = pa.schema(CHANGELOG_FIELDS)
SPARK_DDL = (
    "source STRING, file STRING, file_number BIGINT, position BIGINT, txn_position BIGINT, order_key STRING, "
    "gtid STRING, last_committed BIGINT, sequence_number BIGINT, commit_ts TIMESTAMP, server_id BIGINT, "
    "db STRING, `table` STRING, op STRING, before STRING, after STRING, pk STRING, pk_before STRING, columns STRING"
)

ROW_OPS = tuple(o.value for o in _ROW_OPS)
NAME_OPS = tuple(o.value for o in _NAME_OPS)
RENAME_TABLE, RENAME_COLUMN, DROP_TABLE = NAME_OPS  # for the sinks

# How a partial JSON update starts in an image's text. Only such a value writes it unescaped (a string
# holding the same characters is written with \"), so a sink finds these rows with one substring test.
PARTIAL_JSON_MARK = json.dumps({PARTIAL_JSON_KEY: []})[:-2]  # {"json_diff": [


def order_key(file_no: int, txn_pos: int, event_index: int, row_index: int) -> str:
    return f"{file_no:010d}{txn_pos:013d}{event_index:07d}{row_index:07d}"


def order_key_text(k: OrderKey) -> str:
    """An order key as the fixed-width text the change log sorts by: a file series' 37 digits, or
    a global binlog's vtso (54) followed by event and row (7 + 7)."""
    if k.node == NO_NODE:
        return order_key(k.major, k.minor, k.event, k.row)
    return f"{k.major:019d}{k.minor:019d}{k.seq:010d}{k.node.decode('ascii')}{k.event:07d}{k.row:07d}"


def columns_json(layout: Layout) -> str:
    """The table's columns as the binlog's metadata or the schema history gave them (names,
    signedness, charsets, the primary key; ``values`` of ENUM and SET columns when known)."""
    return json.dumps([_column(c) for c in layout])


def _column(c: Column) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "type": c.type,
        "meta": c.meta,
        "unsigned": c.unsigned,
        "collation": c.collation,
        "pk": c.pk,
    }
    if c.values is not None:
        out["values"] = list(c.values)
    return out


def _image(layout: Layout, img: tuple[Any, ...] | None) -> str | None:
    if img is None:
        return None
    return json.dumps(
        {c.name: json_value(v, c) for c, v in zip(layout, img, strict=True) if v is not ABSENT},
        ensure_ascii=False,
    )


def _pk(layout: Layout, key: tuple[Any, ...] | None) -> str | None:
    """A primary key as a JSON list (None: no key, or the image does not carry it)."""
    if key is None:
        return None
    return json.dumps(
        [json_value(v, c) for v, c in zip(key, (c for c in layout if c.pk), strict=True)], ensure_ascii=False
    )


def partial_json_error(row: Any) -> UnappliableChangeError:
    """The error for an update whose ``after`` holds a partial JSON update (``row``: a change-log
    row with db, table, file, position, after): one line naming the table, column and position."""
    image = json.loads(row["after"])
    column = next(c for c, v in image.items() if isinstance(v, dict) and PARTIAL_JSON_KEY in v)
    return UnappliableChangeError(
        f"table {row['db']}.{row['table']}, column {column}: a partial JSON update "
        "(binlog_row_value_options=PARTIAL_JSON) carries only edits of a document the binlog does not "
        "hold; nothing was written. Have the source log whole documents (binlog_row_value_options='') "
        "and sync from a copy taken after that",
        table=f"{row['db']}.{row['table']}",
        column=column,
        source=row["file"],
        offset=row["position"],
    )


def transaction_rows(
    t: Transaction, source: str, selection: Selection | Any | None = None
) -> Iterator[dict[str, Any]]:
    """Change-log rows of one transaction."""
    return changelog_rows(row_changes(t, selection, source))


def changelog_rows(changes: Iterable[RowChange]) -> Iterator[dict[str, Any]]:
    """Row changes as change-log rows."""
    cols_cache: dict[int, str] = {}
    for c in changes:
        o = c.origin
        k = c.order_key
        row = {
            "source": o.source,
            "file": c.file,
            "file_number": o.file_number,
            "position": c.position,
            "txn_position": o.txn_position,
            "order_key": order_key_text(k),
            "gtid": o.gtid,
            "last_committed": o.last_committed,
            "sequence_number": o.sequence_number,
            "commit_ts": _commit_ts(o.commit_time_us),
            "server_id": c.server_id,
            "db": c.db,
            "table": c.table,
            "op": c.op.value,
        }
        layout = c.layout
        if layout is None:  # a rename or drop
            before, after = _NAME_JSON[c.op](c.before), c.after and _NAME_JSON[c.op](c.after)
            row.update(before=before, after=after, pk=None, pk_before=None, columns=None)
            yield row
            continue
        cols = cols_cache.get(id(layout))
        if cols is None:
            cols = cols_cache[id(layout)] = columns_json(layout)
        row.update(
            before=_image(layout, c.before),
            after=_image(layout, c.after),
            pk=_pk(layout, c.key),
            pk_before=_pk(layout, c.key_before),
            columns=cols,
        )
        yield row


def _commit_ts(us: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc) if us else None


def _names(fields: tuple[str, ...]) -> Callable[[Any], str]:
    return lambda v: json.dumps(dict(zip(fields, v, strict=True)), ensure_ascii=False)


_NAME_JSON = {
    Op.RENAME_TABLE: _names(("db", "table")),
    Op.DROP_TABLE: _names(("db", "table")),
    Op.RENAME_COLUMN: _names(("column",)),
}


def file_changes(
    path: str | Path,
    source: str = "",
    observers: list[Any] | None = None,
    start: int | None = None,
    stop: int | None = None,
    selection: Selection | Any | None = None,
) -> Iterator[dict[str, Any]]:
    """Change-log rows of the complete transactions of one binlog file (an unfinished tail is not
    emitted: it is re-read once the server has finished it)."""
    g = TransactionGrouper(keep_events=True)
    reader = BinlogReader(path, observers=observers, start_position=start, stop_position=stop)
    fno = file_number(str(path))
    for ev in reader:
        for t in g.feed(fno, ev):
            if t.kind != UNFINISHED and (selection is None or selection.keeps_transaction(t)):
                yield from transaction_rows(t, source, selection)


__all__ = ["file_number"]


def to_batches(rows: Iterator[dict[str, Any]], size: int = 4096) -> Iterator[pa.RecordBatch]:
    buf: list[dict[str, Any]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= size:
            yield pa.RecordBatch.from_pylist(buf, schema=CHANGELOG_SCHEMA)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=CHANGELOG_SCHEMA)
