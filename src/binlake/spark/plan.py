"""A batch of the change log planned once for every sink (``binlake.spark.sinks``).

What each sink needs of a batch, and what used to be computed by each of them in its own order:
its identity (the last transaction's position, the version a sink commits with the data), the
renames it makes (``binlake.spark.renames``) with its row changes under their names at its end, the
last change per key (a primary-key change also leaves a tombstone for the old key), and per table
its column layouts in the order they were written and its row count. A sink then asks for one
table's typed target rows (``BatchPlan.rows``), an Arrow stream on the driver.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from binlake.arrowlog.images import PARTIAL_JSON_KEY
from binlake.changes import KEY_WIDTH, TOMBSTONE
from binlake.dialects.mysql import quote_ident
from binlake.errors import BinlogError, UnappliableChangeError
from binlake.spark import trace
from binlake.spark.changelog import (
    ADD_COLUMN,
    NAME_OPS,
    PARTIAL_JSON_MARK,
    ROW_OPS,
    SCHEMA_OPS,
    partial_json_error,
)
from binlake.spark.renames import RenamePlan, follow_renames, layout_columns, renamed_changes, sink_names
from binlake.spark.typed import arrow_type
from binlake.spark.typedrows import (
    COMMIT_TS,
    DELETED,
    GTID,
    MASK,
    ORDER,
    Sources,
    arrow_batches,
    conform,
    fold_images,
    masked,
    path,
    presence,
    presence_column,
    spark_type,
    target_schema,
    typed_field,
    typed_rows,
)
from binlake.targetnames import escape_reserved

ADAPTIVE = "spark.sql.adaptive.enabled"
KEY = "_binlake_key"  # a change's primary key as JSON text, while finding the last change per key
JSON_TYPE = 245  # ColumnType.JSON: the only columns a partial JSON update is in
Phase = Callable[[str], None] | None  # told what a sync does now, for progress displays
Layout = tuple[list[dict[str, Any]], str | None]  # a change-log ``columns`` value and its ``renamed``


@contextmanager
def adaptive_off(spark: Any) -> Iterator[None]:
    """Spark's adaptive execution off for the actions run inside (the session's setting back after).

    Used for the first action over a frame the plan keeps (``persist``): adaptive execution builds
    a cache the query reads in a Spark job of its own, then reads it back from disk in the next
    (the 1 GB series' head: three jobs, the second re-reading ~100 MB of cache); without it the
    query's own tasks write the cache as they go (one job; in paired runs no faster on a loaded
    2-core machine: the fused job does the work the two did). A micro-batch runs without it
    throughout (``apply.stream_changes``)."""
    conf = spark.conf
    was = conf.get(ADAPTIVE)
    conf.set(ADAPTIVE, "false")
    try:
        yield
    finally:
        conf.set(ADAPTIVE, was)


def shown_name(db: str, table: str) -> str:
    """``db.table`` as reports show it, one string per table: backquoted when a name holds a dot or
    a backquote (`a.b`.`c` and `a`.`b.c` are two tables)."""
    if any(c in n for n in (db, table) for c in ".`"):
        return f"{quote_ident(db)}.{quote_ident(table)}"
    return f"{db}.{table}"


@dataclass
class SyncReport:
    """What a sink did with one batch."""

    tables: dict[str, int] = field(default_factory=dict)  # table -> rows merged
    skipped: list[str] = field(default_factory=list)  # already at this version (a replay)
    renamed: list[str] = field(default_factory=list)  # renames the targets followed ("a -> b")
    snapshots: dict[str, int] = field(default_factory=dict)  # Parquet snapshots written: table -> rows
    changes: int = 0
    version: int = 0
    position: str = ""  # "file:offset", for people; the two apart below
    file: str = ""  # the batch's last transaction: its binlog file (name) …
    txn_position: int = 0  # … and the offset of its first event there
    server_ids: list[int] = field(default_factory=list)  # the servers that wrote the batch
    filled: list[str] = field(default_factory=list)  # ADD COLUMN values given to rows held ("db.t: c")
    warnings: list[str] = field(default_factory=list)  # what the target could not follow exactly
    resumed: str = ""  # where a batch sync's read began, when not at the series' start (``resume``)


def batch_version(file_number: int, txn_position: int) -> int:
    """A batch's version (its last transaction's place in the file series): what a sink commits."""
    return file_number * 10**13 + txn_position


PARTIAL = "partial"  # a read's own word that a row's image lacks columns (``arrowlog.compact``)
EDITS = "json_edits"  # a read's own word that a row holds a partial JSON update (``arrowlog.compact``)
LAYOUT = "layout"  # a row's layout by number (``arrowlog.changelog.ColumnsOnce``; ``with_layouts``)
Layouts = dict[int, Any]  # a batch's layouts: number -> ``columns`` value (Spark rows)


def with_layouts(df: Any) -> Any:
    """``df`` with a ``layout`` number on every row: a read with ``columns`` ``first`` has one
    (and each layout's columns only on its first rows), any other change log (a snapshot's, a
    user's) gets a hash of its ``columns`` here. Every later step of a plan reads the number, not
    the list of column structs, and the batch's head finds what each number stands for."""
    from pyspark.sql import functions as F

    if LAYOUT in df.columns:
        return df
    return df.withColumn(LAYOUT, F.when(F.col("columns").isNotNull(), F.xxhash64("columns")))


# what a sink reads of the last change per key (``table_plans``, ``typed_rows`` of a keyed table):
# the shuffle that finds it carries nothing else (a ``before`` image is as wide as an ``after``)
LATEST_COLUMNS = (
    "db",
    "table",
    "op",
    "pk",
    "after",
    "order_key",
    "gtid",
    "commit_ts",
    "renamed",
    LAYOUT,
    PARTIAL,
)


def latest_per_key(df: Any, partitions: int | None = None) -> Any:
    """The last change per (db, table, primary key) by order key; a primary-key change also yields a
    tombstone for the old key, whose order key is the change's with ``part`` TOMBSTONE (it sorts just
    before it). Keys compare by their JSON form (``to_json``: a VARIANT is not a grouping key).
    ``partitions``: sort in that many pieces (a small batch: few tasks), else in the session's
    ``spark.sql.shuffle.partitions``. Only ``LATEST_COLUMNS`` are kept."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    wanted = [c for c in df.columns if c in LATEST_COLUMNS]  # (not what the sinks never read)
    both = keyed_changes(df.select(*wanted, "pk_before"))
    if partitions is not None:  # the window's grouping, so its sort needs no other exchange
        both = both.repartition(partitions, "db", "table", KEY)
    w = Window.partitionBy("db", "table", KEY).orderBy(F.col("order_key").desc())
    return (
        both.withColumn("_rn", F.row_number().over(w))
        .where(F.col("_rn") == 1)
        .drop("_rn", KEY, MOVED, "pk_before")
    )


MOVED = "_binlake_moved"  # a change whose key came from another (a primary-key update)


def keyed_changes(df: Any) -> Any:
    """The row changes of ``df`` with a key, each with its key as JSON text (``KEY``) and whether
    it moved the row here (``MOVED``), and a tombstone for the old key of each primary-key change."""
    from pyspark.sql import functions as F

    keyed = df.where(F.col("pk").isNotNull()).withColumn(KEY, F.to_json("pk"))
    keyed = keyed.withColumn(MOVED, key_moved(F.col(KEY)))
    tombstone = F.overlay(F.col("order_key"), F.lit(bytes([TOMBSTONE])), F.lit(KEY_WIDTH))
    replaced = {
        "op": F.lit("delete"),
        "pk": F.col("pk_before"),
        KEY: F.to_json("pk_before"),
        MOVED: F.lit(False),
        PARTIAL: F.lit(False),
        "order_key": tombstone,
        "after": F.lit(None).cast("variant"),
    }
    tombstones = keyed.where(F.col(MOVED)).select(
        *[replaced.get(c, F.col(c)).alias(c) for c in keyed.columns]
    )
    return keyed.unionByName(tombstones)


def key_moved(key: Any) -> Any:
    """A change is a primary-key update (a Spark column; ``key``: its ``pk`` as JSON text)."""
    from pyspark.sql import functions as F

    return (F.col("op") == "update") & F.col("pk_before").isNotNull() & (F.to_json("pk_before") != key)


def image_fields(df: Any) -> Any:
    """How many columns an insert's or update's after image holds (a Spark column of ``df``; NULL
    for other changes): fewer than its layout has where the source logs MINIMAL or NOBLOB images.
    A read that says which images lack columns (its ``partial`` column, ``changes=last``) gives 0
    for those and NULL for whole ones instead: the same comparison, without reading every image."""
    from pyspark.sql import functions as F

    if PARTIAL in df.columns:
        return F.when(F.col(PARTIAL), F.lit(0))
    writes = F.col("op").isin("insert", "update")
    return F.when(writes, F.size(F.variant_get(F.col("after"), "$", "map<string,variant>")))


def partial_layout(fields: int | None, columns: Any) -> bool:
    """A group of changes whose fewest image fields (``image_fields``) are fewer than their
    layout's ``columns``: some image lacks columns."""
    return fields is not None and fields < len(columns)


@dataclass(frozen=True)
class TablePlan:
    """One table of a batch: its layouts (oldest first), its rows (the last change per key for a
    keyed table, or a bound of it; every change for a keyless one) and whether it has a key."""

    db: str
    table: str
    layouts: list[Layout]
    rows: int
    keyless: bool
    partial: bool = False  # some image lacks columns (MINIMAL/NOBLOB): its changes are folded

    @property
    def name(self) -> str:
        return shown_name(self.db, self.table)


@dataclass(frozen=True)
class FillPlan:
    """An ADD COLUMN of a table (names at the end of the batch, in sink space): every row it held
    before ``order_key`` gets the column's value — unless ``unknown`` says why the binlog cannot tell
    it (the column is added, its old rows hold NULL)."""

    db: str
    table: str
    order_key: bytes
    layout: Layout  # the new column alone
    unknown: str | None

    @property
    def name(self) -> str:
        return shown_name(self.db, self.table)

    @property
    def column(self) -> str:
        """The added column's name (in sink space, at the end of the batch: a rename later in the
        batch gives it its new name)."""
        return str(layout_columns(*self.layout)[0]["name"])

    @property
    def warning(self) -> str:
        """What a report says of a fill that cannot be made."""
        return f"{self.name}: column {self.column}: rows held before keep NULL, {self.unknown}"


def fill_plans(df: Any) -> list[FillPlan]:
    """The batch's added columns in order (few: collected on the driver)."""
    from pyspark.sql import functions as F

    found = df.where(F.col("op") == ADD_COLUMN).select(
        "db", "table", "order_key", "columns", "renamed", "after"
    )
    out = []
    for r in sorted(found.collect(), key=lambda r: bytes(r["order_key"])):
        columns = [c.asDict(recursive=True) for c in r["columns"]]
        known = r["after"] is not None and columns[0]["name"] in r["after"].toPython()
        why = (
            None
            if known
            else "its value was computed by the server (an expression, AUTO_INCREMENT, the time)"
        )
        out.append(FillPlan(r["db"], r["table"], bytes(r["order_key"]), (columns, r["renamed"]), why))
    return out


def table_plans(df: Any, keyless: bool, layouts: Layouts, partitions: int | None = None) -> list[TablePlan]:
    """Each table's layouts in ``df``, in the order they were written (by their newest change), and
    its row count: one small Spark job for all tables (``partitions``: as in ``latest_per_key``).
    ``layouts``: what each row's ``layout`` number stands for (the batch's head found them)."""
    from pyspark.sql import functions as F

    found: dict[tuple[str, str], list[tuple[bytes, Layout, int, bool]]] = {}
    if partitions is not None:
        df = df.repartition(partitions, "db", "table")
    groups = df.groupBy("db", "table", LAYOUT, "renamed").agg(
        F.max("order_key").alias("k"), F.count(F.lit(1)).alias("n"), F.min(image_fields(df)).alias("fields")
    )
    for g in groups.collect():
        columns = [c.asDict(recursive=True) for c in layouts[g[LAYOUT]]]
        partial = partial_layout(g["fields"], columns)
        found.setdefault((g["db"], g["table"]), []).append(
            (bytes(g["k"]), (columns, g["renamed"]), g["n"], partial)
        )
    return [
        TablePlan(
            db,
            table,
            [lay for _, lay, *_ in sorted(ls, key=lambda x: x[0])],
            sum(n for _, _, n, _ in ls),
            keyless,
            any(p for *_, p in ls),
        )
        for (db, table), ls in sorted(found.items())
    ]


def union_columns(
    layouts: list[Layout], name: Callable[[str], str] = str
) -> tuple[list[dict[str, Any]], Sources]:
    """The target columns of a table's layouts (oldest first): every column in the order it first
    appeared, typed (and keyed) as in the newest layout that has it — older rows of a column whose
    type changed go into the new type — with the image names each layout uses."""
    out: dict[str, dict[str, Any]] = {}
    sources: Sources = {}
    for columns, renamed in layouts:
        for c in layout_columns(columns, renamed, name):
            out[c["name"]] = {k: v for k, v in c.items() if k != "from"}
            seen = sources.setdefault(c["name"], [])
            if (renamed, c["from"]) not in seen:
                seen.append((renamed, c["from"]))
    newest = {c["name"] for c in layout_columns(*layouts[-1], name)}
    for c in out.values():  # the key is the newest layout's
        c["pk"] = bool(c.get("pk")) and c["name"] in newest
    return list(out.values()), sources


class Counted:
    """An Arrow stream that counts the rows that passed through it."""

    def __init__(self, stream: pa.RecordBatchReader) -> None:
        self.n = 0

        def each() -> Iterator[pa.RecordBatch]:
            for b in stream:
                self.n += b.num_rows
                yield b

        self.stream = pa.RecordBatchReader.from_batches(stream.schema, each())


@dataclass(frozen=True)
class Contents:
    """How many changes of each kind a batch holds, counted with its head: the parts of a plan a
    batch has none of are known empty without a Spark job of their own. ``tables``: the batch's
    table plans when the head alone tells them (``simple_tables``), else None."""

    names: int = 0  # renames and drops (NAME_OPS)
    adds: int = 0  # ADD COLUMN
    keyless: int = 0  # row changes of tables without a primary key
    tables: tuple[TablePlan, ...] | None = None
    layouts: Layouts = field(default_factory=dict)  # the row changes' layouts by number
    # the rows the last change per key sorts: row changes and a tombstone per moved key (a read of
    # the last changes per key holds fewer than the changes it stands for, ``SyncReport.changes``)
    rows: int = 0


def batch_head(df: Any, source: str) -> tuple[SyncReport, dict[str, str]]:
    """A batch's identity: its last transaction's position (the version sinks commit atomically with
    the data) and its size; the metadata every commit of it carries. A change no sink can apply (a
    partial JSON update) is refused here, before any sink creates or writes anything."""
    report, metadata, _ = head_and_contents(df, source)
    return report, metadata


def head_and_contents(df: Any, source: str) -> tuple[SyncReport, dict[str, str], Contents]:
    """``batch_head`` and the batch's ``Contents``, in one Spark job: an aggregate per table, layout
    and kind of change (few groups), combined on the driver."""
    from pyspark.sql import functions as F

    report = SyncReport()
    df = with_layouts(df)

    def count(c: Any) -> Any:
        return F.sum(c.cast("long"))

    op = F.col("op")
    moved = key_moved(F.to_json("pk"))
    row = op.isin(*ROW_OPS)
    fields = image_fields(df)
    # how many changes a row stands for: 1, or what a read of the last changes per key counted
    stands_for = F.sum("changes") if "changes" in df.columns else F.count(F.lit(1))
    # the first partial JSON update, where the read says which updates are (``json_edits``)
    edits = F.struct("order_key", "db", "table", "file", "position", F.to_json("after").alias("after"))
    told = [F.min(F.when(F.col(EDITS), edits)).alias(EDITS)] if EDITS in df.columns else []
    groups = (
        df.groupBy("db", "table", LAYOUT, row.alias("row"), (row & F.col("pk").isNull()).alias("keyless"))
        .agg(
            # the newest row (structs compare field by field) and the size
            F.max(F.struct("order_key", "file", "file_number", "txn_position")).alias("top"),
            F.count(F.lit(1)).alias("n"),
            stands_for.alias("changes"),
            count(moved).alias("moved"),
            count(op.isin(*NAME_OPS)).alias("names"),
            count(op == ADD_COLUMN).alias("adds"),
            F.collect_set("server_id").alias("servers"),
            # images lacking columns (MINIMAL/NOBLOB): the fewest fields, of any write, of an
            # insert, and of a primary-key update with where it is
            F.min(fields).alias("fields"),
            F.min(F.when(op == "insert", fields)).alias("insert_fields"),
            F.min(F.when(moved & fields.isNotNull(), F.struct(fields.alias("n"), "file", "position"))).alias(
                "moved_fields"
            ),
            # what the layout number stands for (the rows that carry it): two values, two layouts
            F.min("columns").alias("columns"),
            F.max("columns").alias("columns_max"),
            *told,
        )
        .coalesce(1)  # a few groups: one task gathers them (not one per shuffle partition)
        .collect()
    )
    if not groups:
        return report, {}, Contents()
    rows = [g for g in groups if g["row"]]
    layouts = batch_layouts(rows)
    refuse_partial_moves(rows, layouts)
    refuse_unkeyed_rows(rows, layouts)
    if told:
        found = [g[EDITS] for g in rows if g[EDITS] is not None]
        if found:
            raise partial_json_error(min(found, key=lambda f: bytes(f["order_key"])))
    else:
        with trace.span("partial json"):
            refuse_partial_json(df, layouts)
    report.warnings += unknown_defaults(rows, layouts)
    top = max((g["top"] for g in groups), key=tuple)
    names, adds = (sum(int(g[k]) for g in groups) for k in ("names", "adds"))
    contents = Contents(
        names,
        adds,
        sum(g["n"] for g in rows if g["keyless"]),
        simple_tables(rows, layouts) if not names + adds else None,
        layouts,
        sum(g["n"] + int(g["moved"]) for g in rows),
    )
    report.version = batch_version(top["file_number"], top["txn_position"])
    report.file, report.txn_position = str(top["file"]), int(top["txn_position"])
    report.position = f"{report.file}:{report.txn_position}"
    report.changes = sum(int(g["changes"]) for g in rows)
    report.server_ids = sorted({int(i) for g in groups for i in g["servers"] if i is not None})
    metadata = {
        "binlake.position": report.position,
        "binlake.order_key": bytes(top["order_key"]).hex(),
        "binlake.source": source,
    }
    return report, metadata, contents


def batch_layouts(groups: list[Any]) -> Layouts:
    """What each layout number of a batch's row changes stands for, from the head's groups. Two
    column lists under one number (a hash collision), or a number no row of the batch carries the
    columns of (rows filtered out of a read with ``columns`` ``first``), are errors: a row is never
    typed by a layout it does not have."""
    layouts: Layouts = {}
    for g in groups:
        number, columns = g[LAYOUT], g["columns"]
        if columns is None:
            continue
        if columns != g["columns_max"] or layouts.setdefault(number, columns) != columns:
            raise BinlogError(f"change log: two layouts share the number {number} (a hash collision)")
    missing = {g[LAYOUT] for g in groups} - set(layouts)
    if missing:
        raise BinlogError(
            f"change log: the columns of layout {min(missing)} are in none of the batch's rows "
            "(a read with columns=first whose first rows of a layout were filtered out: read with "
            "columns=every to filter)"
        )
    return layouts


def refuse_partial_moves(groups: list[Any], layouts: Layouts) -> None:
    """Refuse a batch with a primary-key update whose after image lacks columns (MINIMAL): the
    row's other columns are in the old key's row, which the binlog does not hold, and a sink that
    moved the row with only what the image says would lose them."""
    for g in groups:
        found = g["moved_fields"]
        if found is not None and found["n"] < len(layouts[g[LAYOUT]]):
            raise _not_in_binlog(
                g,
                "a primary-key update whose row image lacks columns (binlog_row_image=MINIMAL or "
                "NOBLOB) moves a row whose other values the binlog does not hold",
                found["file"],
                found["position"],
            )


def refuse_unkeyed_rows(groups: list[Any], layouts: Layouts) -> None:
    """Refuse a batch with a row change of a keyed layout whose image lacks a key column (a MINIMAL
    insert that left out a key column with a DEFAULT): its key is not in the binlog, and taken
    for a keyless change it would be lost."""
    for g in groups:
        if g["keyless"] and any(c["pk"] for c in layouts[g[LAYOUT]]):
            raise _not_in_binlog(
                g,
                "a row change whose image lacks a primary-key column (binlog_row_image=MINIMAL: an "
                "INSERT that left a key column to its DEFAULT) has a key the binlog does not hold",
                g["top"]["file"],
                g["top"]["txn_position"],
            )


def _not_in_binlog(g: Any, what: str, file: str, offset: int) -> UnappliableChangeError:
    """The refusal of a change of head group ``g`` that needs what its images left out."""
    name = shown_name(g["db"], g["table"])
    return UnappliableChangeError(
        f"table {name}: {what}; nothing was written. Sync from a source logging FULL images "
        "(binlog_row_image=FULL) from a copy taken after that",
        table=name,
        column="",
        source=file,
        offset=offset,
    )


def unknown_defaults(groups: list[Any], layouts: Layouts) -> list[str]:
    """A warning per table with inserts whose images lack columns (MINIMAL/NOBLOB): such a column
    got its DEFAULT on the server, which the binlog does not carry; a sink writes NULL there."""
    tables = sorted(
        {
            shown_name(g["db"], g["table"])
            for g in groups
            if partial_layout(g["insert_fields"], layouts[g[LAYOUT]])
        }
    )
    return [
        f"{t}: inserts whose row images lack columns (binlog_row_image=MINIMAL or NOBLOB): those "
        "columns hold their server DEFAULT, which the binlog does not carry; NULL was written"
        for t in tables
    ]


def refuse_partial_json(df: Any, layouts: Layouts) -> None:
    """Refuse a batch holding a partial JSON update (no sink can apply one) before any sink creates
    or writes anything: one Spark job over the updates of tables with a JSON column, if any, looking
    at their JSON columns alone (a partial update's column holds an object of edits, ``{"json_diff":
    [{...}]}``, where it otherwise holds a string; MySQL's no-op assignment an empty list of them)."""
    from pyspark.sql import functions as F

    json_columns: dict[str, list[int]] = {}  # a JSON column's name -> the layouts that have it
    for number, columns in layouts.items():
        for c in columns:
            if c["type"] == JSON_TYPE:
                json_columns.setdefault(c["name"], []).append(number)
    if not json_columns:
        return
    after = F.col("after")
    tests = []
    for name, numbers in json_columns.items():
        at = path(name)
        edits = (
            F.try_variant_get(after, f'{at}["{PARTIAL_JSON_KEY}"]', "variant").isNotNull()
            if at is not None
            else F.to_json(after).contains(PARTIAL_JSON_MARK)  # a name no path quotes
        )
        tests.append(F.col(LAYOUT).isin(numbers) & edits)
    partial = (F.col("op") == "update") & functools.reduce(operator.or_, tests)
    first = F.min(F.struct("order_key", "db", "table", "file", "position", F.to_json(after).alias("after")))
    found = df.where(partial).select(first.alias("p")).collect()[0]["p"]
    if found is not None:
        raise partial_json_error(found)


def simple_tables(groups: list[Any], layouts: Layouts) -> tuple[TablePlan, ...] | None:
    """The table plans of a batch without DDL (no rename, drop or added column) from its head's
    groups of row changes, when each table's changes have one layout: then it is the layout of its
    last changes too, and ``table_plans`` over the last change per key would find the same (its row
    count here a bound: changes, and a tombstone for each key a change moved). None: several layouts
    in a table (only the last changes' decide), planned by ``table_plans``."""
    found: dict[tuple[bool, str, str], list[Any]] = {}
    for g in groups:
        found.setdefault((g["keyless"], g["db"], escape_reserved(g["table"])), []).append(g)
    if any(len(gs) > 1 for gs in found.values()):
        return None
    return tuple(
        TablePlan(
            db,
            table,
            [([c.asDict(recursive=True) for c in layouts[g[LAYOUT]]], None)],
            g["n"] + (0 if keyless else int(g["moved"])),
            keyless,
            partial_layout(g["fields"], layouts[g[LAYOUT]]),
        )
        for (keyless, db, table), (g,) in sorted(found.items())
    )


# row changes per piece of a small batch's sort: one task sorts them in well under a second
ROWS_PER_SORT = 50_000


def one_of(column: str, values: list[bytes]) -> Any:
    """``column IN (values)`` (binary values) as one Spark expression, parsed in one call: a literal
    per value (``F.lit``) is a call into the JVM each, and a batch adding hundreds of columns spent
    a second making them. The values are written as ``X'…'`` literals: hex digits only."""
    from pyspark.sql import functions as F

    listed = ", ".join("X'" + v.hex() + "'" for v in values)
    return F.expr(f"`{column}` IN ({listed})")


def sort_partitions(df: Any, rows: int) -> int | None:
    """How many pieces a batch of ``rows`` row changes (``Contents.rows``) is sorted and grouped in:
    a small batch (fewer pieces than the session's ``spark.sql.shuffle.partitions``) in as few as
    hold it — each piece is a task, and a micro-batch of a few hundred changes in 64 tasks spends
    its time starting them; a big one in the session's number (None)."""
    configured = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    wanted = max(1, -(-rows // ROWS_PER_SORT))
    return wanted if wanted < configured else None


class BatchPlan:
    """One batch as every sink applies it (module docstring). ``positioned=False``: changes that are
    not a stretch of the binlog (a snapshot's chunks, each at its own point): a sink applies them
    under the order-key guard alone and records no batch position. The parts beyond the batch's
    identity are computed when a sink first asks (a sink that finds the batch applied asks for
    none of them) and kept until the plan closes."""

    def __init__(self, kept: Any, source: str, positioned: bool) -> None:
        self.source, self.positioned = source, positioned
        self._kept = kept
        with trace.span("batch_head"), adaptive_off(kept.sparkSession):
            # metadata empty: nothing in the batch
            self.report, self.metadata, self.contents = head_and_contents(kept, source)
        self.partitions = sort_partitions(kept, self.contents.rows)
        self._renamed: tuple[Any, RenamePlan] | None = None
        self._latest: Any = None
        self._tables: list[TablePlan] | None = None
        self._fills: list[FillPlan] | None = None
        self._ops: Any = None
        self._fill_rows: dict[Callable[[str], str], dict[bytes, tuple[list[dict[str, Any]], pa.Table]]] = {}

    @property
    def empty(self) -> bool:
        return not self.metadata

    @property
    def last_order_key(self) -> bytes:
        return bytes.fromhex(self.metadata["binlake.order_key"])

    @property
    def changes(self) -> Any:
        """The row changes under their names at the end of the batch (a DataFrame)."""
        from pyspark.sql import functions as F

        return self._renames_and_changes()[0].where(F.col("op").isin(*ROW_OPS))

    @property
    def fills(self) -> list[FillPlan]:
        """The columns the batch adds whose value the rows tables held get (in order), for a sink
        to apply; those whose value the binlog cannot tell are the report's warnings. None for
        changes that are not a stretch of the binlog (``positioned=False``: no DDL in them).
        One per column (its last): a later fill of a column covers every row an earlier one did
        (a column dropped and added again: the rows held get the new value)."""
        if self._fills is None and (not self.contents.adds or not self.positioned):
            self._fills = []
        if self._fills is None:
            with trace.span("fills"):
                found = fill_plans(self._added_columns())
            # the last add of each column decides (MySQL's column names ignore case); one whose
            # value the binlog cannot tell is a warning, and no earlier value of the column is given
            last = {(f.db, f.table, f.column.lower()): f for f in found}
            self.report.warnings += [f.warning for f in last.values() if f.unknown is not None]
            self._fills = sorted((f for f in last.values() if f.unknown is None), key=lambda f: f.order_key)
        return self._fills

    def fill_rows(
        self, f: FillPlan, name: Callable[[str], str] = str
    ) -> tuple[list[dict[str, Any]], pa.Table]:
        """Fill ``f``'s value as one typed target row (the column, ``_binlake_order_key``: rows
        below it get the value) and its target column; typed as row changes are. Every fill of the
        batch is typed in one Spark job (the first a sink asks for)."""
        if name not in self._fill_rows:
            self._fill_rows[name] = self._typed_fills(name)
        return self._fill_rows[name][f.order_key]

    def _typed_fills(self, name: Callable[[str], str]) -> dict[bytes, tuple[list[dict[str, Any]], pa.Table]]:
        """Every fill's value typed as its column, in one small Spark job over the batch's DDL
        changes: one expression per distinct target type (an ADD_COLUMN's ``after`` holds the one
        column, under the name its own ``columns`` give), not one per fill."""
        from pyspark.sql import functions as F

        fills = self.fills
        if not fills:
            return {}
        laid = [union_columns([f.layout], name)[0] for f in fills]
        types = [spark_type(arrow_type(columns[0])) for columns in laid]
        by_type: dict[str, list[bytes]] = {}
        for f, t in zip(fills, types, strict=True):
            by_type.setdefault(t, []).append(f.order_key)
        slot = {t: f"_binlake_fill_{i}" for i, t in enumerate(by_type)}
        key = F.col("order_key")
        image = F.try_variant_get(F.col("after"), "$", "map<string,variant>")
        value = F.element_at(image, F.col("columns")[0]["name"])
        typed = [
            F.when(one_of("order_key", keys), typed_field(value, t)).alias(slot[t])
            for t, keys in by_type.items()
        ]
        rows = self._added_columns().where(one_of("order_key", [f.order_key for f in fills]))
        system = [key.alias(ORDER), F.lit(False).alias(DELETED), F.col("gtid").alias(GTID)]
        with trace.span("fill values"):
            got = rows.select(*typed, *system, F.col("commit_ts").alias(COMMIT_TS)).toArrow()
        at = {bytes(k): i for i, k in enumerate(got.column(ORDER).to_pylist())}
        out = {}
        for f, columns, t in zip(fills, laid, types, strict=True):
            row = got.slice(at[f.order_key], 1)
            one = row.select([slot[t], ORDER, DELETED, GTID, COMMIT_TS])
            one = one.rename_columns([columns[0]["name"], ORDER, DELETED, GTID, COMMIT_TS])
            schema = target_schema(columns)
            out[f.order_key] = (
                columns,
                pa.Table.from_batches([conform(b, schema) for b in one.to_batches()], schema),
            )
        return out

    def table_fills(self, t: TablePlan) -> list[FillPlan]:
        """The fills of keyed table ``t`` (a keyless one's change table keeps changes as they were)."""
        if t.keyless:
            return []
        return [f for f in self.fills if (f.db, f.table) == (t.db, t.table)]

    @property
    def renames(self) -> RenamePlan:
        """The renames (and drops) the batch makes."""
        return self._renames_and_changes()[1]

    def _renames_and_changes(self) -> tuple[Any, RenamePlan]:
        if self._renamed is None:
            with trace.span("renames"):
                self._renamed = renamed_changes(
                    self._kept, names=self.contents.names > 0, ops=self._schema_ops()
                )
        return self._renamed

    def _schema_ops(self) -> Any:
        """The batch's DDL changes (renames, drops, added columns: few), kept while the plan is
        open: the renames, the fills and their values read them without scanning the batch again."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        if self._ops is None:
            self._ops = self._kept.where(F.col("op").isin(*SCHEMA_OPS)).persist(StorageLevel.MEMORY_AND_DISK)
        return self._ops

    def _added_columns(self) -> Any:
        """The batch's ADD COLUMN changes under their names at the end of the batch, in sink space."""
        from pyspark.sql import functions as F

        plan = self._renames_and_changes()[1]
        return follow_renames(sink_names(self._schema_ops().where(F.col("op") == ADD_COLUMN)), plan)

    @property
    def latest(self) -> Any:
        """The last change per key (a DataFrame, kept on disk while the plan is open)."""
        from pyspark import StorageLevel

        if self._latest is None:
            self._latest = latest_per_key(self.changes, self.partitions).persist(StorageLevel.DISK_ONLY)
        return self._latest

    @property
    def tables(self) -> list[TablePlan]:
        """Keyed tables (their last change per key), then keyless ones (every change)."""
        from pyspark.sql import functions as F

        if self._tables is None and self.contents.tables is not None:
            self._tables = list(self.contents.tables)
        if self._tables is None:
            keyless = self.changes.where(F.col("pk").isNull())
            with trace.span("table_plans"), adaptive_off(self._kept.sparkSession):
                self._tables = table_plans(self.latest, False, self.contents.layouts, self.partitions)
                if any(t.partial for t in self._tables):
                    self._tables = self._every_layout(self._tables)
                if self.contents.keyless:
                    self._tables += table_plans(keyless, True, self.contents.layouts, self.partitions)
        return self._tables

    def _every_layout(self, tables: list[TablePlan]) -> list[TablePlan]:
        """``tables`` (keyed, planned from the last change per key) with the layouts of every change
        of the partial ones: their rows fold earlier changes too, which may name a column otherwise
        (a rename in the batch)."""
        from pyspark.sql import functions as F

        keyed = self.changes.where(F.col("pk").isNotNull())
        every = {
            (t.db, t.table): t for t in table_plans(keyed, False, self.contents.layouts, self.partitions)
        }
        return [replace(t, layouts=every[(t.db, t.table)].layouts) if t.partial else t for t in tables]

    def rows(
        self,
        t: TablePlan,
        name: Callable[[str], str] = str,
        chunk_rows: int | None = None,
        after: bytes | None = None,
        *,
        filled: bool = False,
    ) -> tuple[list[dict[str, Any]], Counted]:
        """Table ``t``'s typed target rows on the driver (an Arrow stream, counted; about
        ``chunk_rows`` at a time) and its target columns (names through ``name``, a dialect's
        length limit). Keyless tables' changes in order, only those after order key ``after``.
        ``filled``: a keyed table's rows changed before a column the batch adds carry that
        column's value (``table_fills``; rows the target held before the batch are the sink's)."""
        from pyspark.sql import functions as F

        columns, sources = union_columns(t.layouts, name)
        # a partial table's folded rows need them whatever the sink: an image after the ADD COLUMN
        # may leave the column out, and the fill, not NULL, is then its value (``fold``)
        fills = self.table_fills(t) if filled or t.partial else []
        folded = []
        for f in fills:
            fill_columns, row = self.fill_rows(f, name)
            column = fill_columns[0]
            if column["name"] not in sources:
                columns.append(column)
            folded.append((column["name"], f.order_key, row.column(0)[0]))
        this = (F.col("db") == t.db) & (F.col("table") == t.table)
        known: int | None = t.rows
        schema = target_schema(columns, keyless=t.keyless)
        if t.keyless:
            rows = self.changes.where(F.col("pk").isNull() & this)
            if after is not None:  # fewer rows than planned: let the slicer count them
                rows, known = rows.where(F.col("order_key") > F.lit(after)), None
            typed = typed_rows(rows.orderBy("order_key"), columns, sources, True, partial=t.partial)
        elif t.partial:  # each key's changes folded column by column (``fold_images``)
            changes = keyed_changes(self.changes.where(this))
            restart = (F.col("op") != "update") | F.col(MOVED)
            typed = typed_rows(
                changes, columns, sources, False, partial=True, keep=[KEY, restart.alias(MOVED)]
            )
            for added, key, _ in folded:  # a change before the ADD COLUMN does not set it: ``fold`` does
                flag = presence_column(columns, added)
                typed = typed.withColumn(flag, F.col(flag) & (F.col(ORDER) >= F.lit(key)))
            typed = masked(fold_images(typed, columns, KEY, MOVED, self.partitions), columns)
            schema = schema.append(pa.field(MASK, pa.string()))
        else:
            typed = typed_rows(self.latest.where(this), columns, sources, False)
        # the first keyed table's rows may be the first action over ``latest`` (a batch without DDL)
        reads_latest = not (t.keyless or t.partial)
        with (
            trace.span(f"rows {t.name}"),
            adaptive_off(typed.sparkSession) if reads_latest else nullcontext(),
        ):
            stream = arrow_batches(typed, schema, chunk_rows, known)
            if folded:
                stream = pa.RecordBatchReader.from_batches(schema, (fold(b, folded, columns) for b in stream))
            return columns, Counted(stream)

    def close(self) -> None:
        if self._ops is not None:
            self._ops.unpersist()
            self._ops = None
        if self._latest is not None:
            with trace.span("unpersist latest"):
                self._latest.unpersist()
            self._latest = None


def fold(
    batch: pa.RecordBatch, fills: list[tuple[str, bytes, pa.Scalar]], columns: list[dict[str, Any]]
) -> pa.RecordBatch:
    """``batch`` with each fill's value (column, order key, value) in the live rows changed before
    it (order keys compare as bytes: their encoding's order is theirs), which then set the column.
    Folded rows (a ``MASK`` saying which columns of ``columns`` they set) also get it where no
    change after the ADD COLUMN set the column: the row was there when the column was added."""
    import pyarrow.compute as pc

    order, live = batch.column(ORDER), pc.invert(batch.column(DELETED))
    arrays = dict(zip(batch.schema.names, batch.columns, strict=True))
    places = presence(batch.schema, columns)
    for name, key, value in fills:
        target = batch.schema.field(name).type
        before = pc.less(order, pa.scalar(key, pa.binary()))
        at = places.get(name)
        if at is not None:  # a MASK place is 1-based, a slice 0-based
            unset = pc.not_equal(pc.utf8_slice_codeunits(arrays[MASK], at - 1, at), "1")
            before = pc.or_(before, unset)
        before = pc.and_(before, live).fill_null(False)
        arrays[name] = pc.if_else(before, value.cast(target), arrays[name])
        if at is not None:
            arrays[MASK] = pc.if_else(
                before, pc.utf8_replace_slice(arrays[MASK], at - 1, at, "1"), arrays[MASK]
            )
    return pa.RecordBatch.from_arrays(list(arrays.values()), schema=batch.schema)


# change-log columns no part of a plan reads: a batch is kept without them
UNREAD = ("source", "last_committed", "sequence_number")


def kept_part(df: Any) -> Any:
    """What a plan reads of change-log batch ``df``: without ``UNREAD`` columns, and a keyed row
    change without its ``before`` image (its key is ``pk_before``; only a keyless table's delete and
    a rename read one). Keeping a batch costs per column it holds: these were a third of it."""
    from pyspark.sql import functions as F

    keyed = F.col("op").isin(*ROW_OPS) & F.col("pk").isNotNull()
    before = F.when(~keyed, F.col("before")).alias("before")
    return df.select(*[before if c == "before" else F.col(c) for c in df.columns if c not in UNREAD])


@contextmanager
def planned(df: Any, source: str = "", *, positioned: bool = True) -> Iterator[BatchPlan]:
    """The plan of change-log batch ``df``, kept (on disk) while a sink runs its several Spark
    actions over it: without that every action would decode the binlogs again."""
    from pyspark import StorageLevel

    # on disk: held in the JVM heap the change log crowded out the sort of last-change-per-key
    kept = kept_part(with_layouts(df)).persist(StorageLevel.DISK_ONLY)
    plan = None
    try:
        plan = BatchPlan(kept, source, positioned)
        yield plan
    finally:
        if plan is not None:
            plan.close()
        with trace.span("unpersist batch"):
            kept.unpersist()
