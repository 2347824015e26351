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
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.errors import UnappliableChangeError
from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.rows import ABSENT, Rows
from binlake.events.table_map import TableMap
from binlake.filters import Selection
from binlake.reader import BinlogReader
from binlake.render.values import PARTIAL_JSON_KEY, json_value
from binlake.schema.renames import TableDrop, TableRename, renames_in
from binlake.txn import DDL, UNFINISHED, Transaction, TransactionGrouper
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType

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

ROW_OPS = ("insert", "update", "delete")
RENAME_TABLE, RENAME_COLUMN, DROP_TABLE = "rename_table", "rename_column", "drop_table"  # for the sinks
NAME_OPS = (RENAME_TABLE, RENAME_COLUMN, DROP_TABLE)

# How a partial JSON update starts in an image's text. Only such a value writes it unescaped (a string
# holding the same characters is written with \"), so a sink finds these rows with one substring test.
PARTIAL_JSON_MARK = json.dumps({PARTIAL_JSON_KEY: []})[:-2]  # {"json_diff": [

_NUMBER = re.compile(r"\.(\d+)$")


def file_number(path: str | Path) -> int:
    m = _NUMBER.search(str(path))
    return int(m.group(1)) if m else 0


def order_key(file_no: int, txn_pos: int, event_index: int, row_index: int) -> str:
    return f"{file_no:010d}{txn_pos:013d}{event_index:07d}{row_index:07d}"


def columns_json(tm: TableMap) -> str:
    """The table's columns as the binlog's metadata or the schema history gave them (names,
    signedness, charsets, the primary key; ``values`` of ENUM and SET columns when known)."""
    return json.dumps([_column(c, c.index in tm.primary_key) for c in tm.columns])


def _column(c: ColumnDef, pk: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.label,
        "type": c.real_type,
        "meta": c.meta,
        "unsigned": c.unsigned,
        "collation": c.collation,
        "pk": pk,
    }
    values = c.enum_values if c.real_type == ColumnType.ENUM else c.set_values
    if c.real_type in (ColumnType.ENUM, ColumnType.SET) and values is not None:
        out["values"] = values
    return out


def _image(tm: TableMap, img: list[Any] | None) -> str | None:
    if img is None:
        return None
    return json.dumps(
        {c.label: json_value(v, c) for c, v in zip(tm.columns, img, strict=True) if v is not ABSENT},
        ensure_ascii=False,
    )


def _pk(tm: TableMap, img: list[Any] | None) -> str | None:
    """The primary key of an image, as a JSON list (None: no key, or the image does not carry it)."""
    if not tm.primary_key or img is None or any(img[i] is ABSENT for i in tm.primary_key):
        return None
    return json.dumps([json_value(img[i], tm.columns[i]) for i in tm.primary_key], ensure_ascii=False)


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
    fno = file_number(t.source)
    commit = dt.datetime.fromtimestamp(t.commit_time_us / 1e6, dt.timezone.utc) if t.commit_time_us else None
    cols_cache: dict[int, str] = {}
    for ei, ev in enumerate(t.events):
        b = ev.body
        if isinstance(b, Query) and t.kind == DDL:
            if selection is None or selection.keeps_event(t, ev):
                yield from _rename_rows(t, ev, b, source, fno, ei, commit, selection)
            continue
        if not isinstance(b, Rows) or b.table is None or b.undecoded_reason:
            continue
        if selection is not None and not selection.keeps_event(t, ev):
            continue
        tm = b.table
        cols = cols_cache.get(id(tm))
        if cols is None:
            cols = cols_cache[id(tm)] = columns_json(tm)
        for ri, (before, after) in enumerate(b.rows):
            yield {
                **_where(t, ev, source, fno, order_key(fno, t.start, ei, ri), commit),
                "db": tm.database,
                "table": tm.table,
                "op": b.operation,
                "before": _image(tm, before),
                "after": _image(tm, after),
                # a minimal after image leaves out a key that did not change: the before image has it
                "pk": _pk(tm, after) or _pk(tm, before),
                "pk_before": _pk(tm, before) if b.operation == "update" else None,
                "columns": cols,
            }


def _where(
    t: Transaction, ev: Event, source: str, fno: int, key: str, commit: dt.datetime | None
) -> dict[str, Any]:
    """The fields saying where a change-log row comes from and where it sorts."""
    return {
        "source": source,
        "file": Path(ev.source).name,
        "file_number": fno,
        "position": ev.offset,
        "txn_position": t.start,
        "order_key": key,
        "gtid": t.gtid,
        "last_committed": t.last_committed,
        "sequence_number": t.sequence_number,
        "commit_ts": commit,
        "server_id": ev.header.server_id,
    }


def _rename_rows(
    t: Transaction,
    ev: Event,
    q: Query,
    source: str,
    fno: int,
    ei: int,
    commit: dt.datetime | None,
    selection: Selection | Any | None,
) -> Iterator[dict[str, Any]]:
    """A DDL statement's renames as change-log rows: ``rename_table`` (db/table: the old name;
    before/after: ``{"db", "table"}``), ``rename_column`` (db/table: the table; before/after:
    ``{"column"}``) and ``drop_table`` (before: the name it frees), so sinks can follow them. Kept
    when either name is selected."""
    for ri, r in enumerate(renames_in(q.query, q.database)):
        after: dict[str, str] | None
        if isinstance(r, TableRename):
            names = [r.old, r.new]
            table, op = r.old, RENAME_TABLE
            before, after = {"db": r.old[0], "table": r.old[1]}, {"db": r.new[0], "table": r.new[1]}
        elif isinstance(r, TableDrop):
            names = [r.table]
            table, op = r.table, DROP_TABLE
            before, after = {"db": r.table[0], "table": r.table[1]}, None
        else:
            names = [r.table]
            table, op = r.table, RENAME_COLUMN
            before, after = {"column": r.old}, {"column": r.new}
        if selection is not None and not any(selection.keeps_table(*n) for n in names):
            continue
        yield {
            **_where(t, ev, source, fno, order_key(fno, t.start, ei, ri), commit),
            "db": table[0],
            "table": table[1],
            "op": op,
            "before": json.dumps(before, ensure_ascii=False),
            "after": json.dumps(after, ensure_ascii=False) if after is not None else None,
            "pk": None,
            "pk_before": None,
            "columns": None,
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
    for ev in reader:
        for t in g.feed(file_number(path), ev):
            if t.kind != UNFINISHED and (selection is None or selection.keeps_transaction(t)):
                yield from transaction_rows(t, source, selection)


def to_batches(rows: Iterator[dict[str, Any]], size: int = 4096) -> Iterator[pa.RecordBatch]:
    buf: list[dict[str, Any]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= size:
            yield pa.RecordBatch.from_pylist(buf, schema=CHANGELOG_SCHEMA)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=CHANGELOG_SCHEMA)
