"""Exactly-once apply of the change log into Delta Lake tables (deltalake, no JVM jars).

Per run ("micro-batch"): the change log of what is new since the last committed position, the last
change per primary key by order key (deletes kept as tombstones, a primary-key change as a delete of
the old key plus an insert), then per table one MERGE guarded by the order key — a replayed or late
batch changes nothing — committed with the batch's binlog position as the Delta app-transaction
version and in the commit metadata. Tables without a primary key get an append-only change table.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.dialects import delta as sql
from binlake.spark.changelog import PARTIAL_JSON_MARK, ROW_OPS, partial_json_error
from binlake.spark.delta_renames import rename_delta_targets
from binlake.spark.renames import layout_columns, renamed_changes
from binlake.spark.typed import arrow_type, convert
from binlake.targetnames import NAME_BOOK, NameBook, inside, path_name

ORDER, DELETED, GTID, COMMIT_TS = (
    "_binlake_order_key",
    "_binlake_deleted",
    "_binlake_gtid",
    "_binlake_commit_ts",
)
APP_ID = "binlake-sync"
SNAPSHOT_BOOK = "_binlake_snapshots.json"  # the Parquet snapshot files binlake wrote
Phase = Callable[[str], None] | None  # told what a sync does now, for progress displays


@dataclass
class SyncReport:
    tables: dict[str, int] = field(default_factory=dict)  # table -> rows merged
    skipped: list[str] = field(default_factory=list)  # already at this version (a replay)
    renamed: list[str] = field(default_factory=list)  # renames the targets followed ("a -> b")
    snapshots: dict[str, int] = field(default_factory=dict)  # Parquet snapshots written: table -> rows
    changes: int = 0
    version: int = 0
    position: str = ""


def batch_version(file_number: int, txn_position: int) -> int:
    return file_number * 10**13 + txn_position


def committed_version(target: str | Path, table: str) -> int | None:
    """The batch version a target table (by directory name) has committed, if any."""
    from deltalake import DeltaTable

    path = inside(Path(target), table)
    if not (path / "_delta_log").exists():
        return None
    return DeltaTable(str(path)).transaction_version(APP_ID)


def table_path(target: Path, db: str, table: str) -> Path:
    """Where table ``db.table`` (sink-space names) lives under ``target``: an injective file name
    that cannot leave it, recorded in the target's name book."""
    name = path_name(db, table)
    NameBook.open(target / NAME_BOOK).claim(name, db, table)
    return inside(target, name)


def read_table(target: str | Path, db: str, table: str) -> pa.Table:
    """Source table ``db.table`` as synced (see ``read_delta``)."""
    from binlake.targetnames import escape_reserved

    return read_delta(target, path_name(db, escape_reserved(table)))


def latest_per_key(df: Any) -> Any:
    """The last change per (db, table, primary key) by order key; a primary-key change also yields a
    tombstone for the old key. Rows of tables without a key are all kept."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keyed = df.where(F.col("pk").isNotNull())
    moved = keyed.where(
        (F.col("op") == "update") & F.col("pk_before").isNotNull() & (F.col("pk_before") != F.col("pk"))
    )
    tombstones = moved.select(
        *[c for c in df.columns if c not in ("op", "pk", "order_key", "after")],
        F.lit("delete").alias("op"),
        F.col("pk_before").alias("pk"),
        F.concat(F.col("order_key"), F.lit("0")).alias("order_key"),
        F.lit(None).cast("string").alias("after"),
    )
    rows = keyed.select(
        *[c for c in df.columns if c != "order_key"],
        F.concat(F.col("order_key"), F.lit("1")).alias("order_key"),
    )
    both = rows.unionByName(tombstones)
    w = Window.partitionBy("db", "table", "pk").orderBy(F.col("order_key").desc())
    return both.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") == 1).drop("_rn")


def layout_runs(latest: Any, db: str, table: str) -> Iterator[tuple[str, str | None, Iterator[Any]]]:
    """One table's changes layout by layout — in the order the layouts were written, each layout's
    rows in order — from ONE Spark job (a job per layout made DDL-heavy batches crawl). Each run must
    be consumed before the next."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest = F.max("order_key").over(Window.partitionBy("columns", "renamed"))
    rows = (
        latest.where((F.col("db") == db) & (F.col("table") == table))
        .withColumn("_binlake_newest", newest)
        .orderBy("_binlake_newest", "order_key")
        .toLocalIterator()
    )
    for (layout, renamed), run in itertools.groupby(rows, key=_layout_of):
        yield layout, renamed, run


def _layout_of(row: Any) -> tuple[str, str | None]:
    """A change-log row's column layout: its ``columns`` and their ``renamed`` mapping."""
    return row["columns"], row["renamed"]


def _typed_batch(rows: list[Any], columns: list[dict[str, Any]], deleted_values: bool = False) -> pa.Table:
    """Typed rows; a delete keeps only its key (a tombstone) unless ``deleted_values`` (change tables)."""
    types = [arrow_type(c) for c in columns]
    data: dict[str, list[Any]] = {c["name"]: [] for c in columns}
    meta: dict[str, list[Any]] = {ORDER: [], DELETED: [], GTID: [], COMMIT_TS: []}
    written = [c.get("from", c["name"]) for c in columns]  # the images' names (before a rename)
    for r in rows:
        image = json.loads(r["after"] if r["op"] != "delete" else (r["before"] or "null")) or {}
        deleted = r["op"] == "delete"
        if deleted and not image:
            keys = [w for w, c in zip(written, columns, strict=True) if c.get("pk")]
            image = dict(zip(keys, json.loads(r["pk"]), strict=False))
        for c, t, w in zip(columns, types, written, strict=True):
            v = image.get(w) if (not deleted or deleted_values or c.get("pk")) else None
            data[c["name"]].append(convert(v, c, t))
        meta[ORDER].append(r["order_key"])
        meta[DELETED].append(deleted)
        meta[GTID].append(r["gtid"])
        meta[COMMIT_TS].append(r["commit_ts"])
    arrays = {c["name"]: pa.array(data[c["name"]], type=t) for c, t in zip(columns, types, strict=True)}
    arrays[ORDER] = pa.array(meta[ORDER], pa.string())
    arrays[DELETED] = pa.array(meta[DELETED], pa.bool_())
    arrays[GTID] = pa.array(meta[GTID], pa.string())
    arrays[COMMIT_TS] = pa.array(meta[COMMIT_TS], pa.timestamp("us", tz="UTC"))
    return pa.table(arrays)


def _chunks(it: Iterable[Any], size: int) -> Iterator[list[Any]]:
    buf: list[Any] = []
    for x in it:
        buf.append(x)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


class _Counted:
    """An iterator that counts what passed through it."""

    def __init__(self, it: Iterator[Any]) -> None:
        self.it, self.n = it, 0

    def __iter__(self) -> Iterator[Any]:
        for x in self.it:
            self.n += 1
            yield x


def _batch_stream(rows: Iterable[Any], columns: list[dict[str, Any]], size: int) -> pa.RecordBatchReader:
    """Typed rows as one Arrow stream in batches of ``size``, so a whole table goes into one Delta
    commit (all or nothing) while memory holds one batch."""
    schema = _typed_batch([], columns).schema

    def batches() -> Iterator[pa.RecordBatch]:
        for chunk in _chunks(rows, size):
            yield from _typed_batch(chunk, columns).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


Layout = tuple[str, str | None]  # a change-log ``columns`` value and its ``renamed`` mapping


def keyless_tables(df: Any) -> Iterator[tuple[tuple[str, str], list[Layout], Any]]:
    """Each table without a primary key: its layouts (oldest first) and its changes in order (a
    DataFrame)."""
    from pyspark.sql import functions as F

    keyless = df.where(F.col("pk").isNull())
    found: dict[tuple[str, str], list[tuple[str, Layout]]] = {}
    for g in (
        keyless.groupBy("db", "table", "columns", "renamed").agg(F.max("order_key").alias("k")).collect()
    ):
        found.setdefault((g["db"], g["table"]), []).append((g["k"], (g["columns"], g["renamed"])))
    for (db, table), layouts in sorted(found.items()):
        rows = keyless.where((F.col("db") == db) & (F.col("table") == table)).orderBy("order_key")
        yield (db, table), [lay for _, lay in sorted(layouts, key=lambda x: x[0])], rows


def keyless_columns(layouts: list[Layout], name: Callable[[str], str] = str) -> list[dict[str, Any]]:
    """The columns of every layout (newest first, then columns only older layouts had); ``name``
    fits a column name to the target."""
    out: dict[str, dict[str, Any]] = {}
    for columns, renamed in reversed(layouts):
        for c in layout_columns(columns, renamed, name):
            out.setdefault(c["name"], {k: v for k, v in c.items() if k != "from"})
    return list(out.values())


def keyless_stream(
    rows: Iterable[Any], layouts: list[Layout], size: int, name: Callable[[str], str] = str
) -> pa.RecordBatchReader:
    """A keyless table's changes (row images, deletes' before-images too, ``_binlake_op``) as one
    Arrow stream in the columns of all its layouts: ADD COLUMN in the batch widens it."""
    union = _typed_batch([], keyless_columns(layouts, name)).schema.append(
        pa.field("_binlake_op", pa.string())
    )
    types = newest_types([layout_columns(c, r, name) for c, r in layouts])
    schema = pa.schema([f.with_type(types.get(f.name, f.type)) for f in union])

    def conform(t: pa.Table) -> pa.Table:
        n = t.num_rows
        return pa.table(
            {
                f.name: t[f.name].cast(f.type) if f.name in t.column_names else pa.nulls(n, f.type)
                for f in schema
            }
        )

    def batches() -> Iterator[pa.RecordBatch]:
        for chunk in _chunks(rows, size):
            for (layout, renamed), group in itertools.groupby(chunk, key=_layout_of):  # runs, in order
                run = list(group)
                t = _typed_batch(run, layout_columns(layout, renamed, name), deleted_values=True)
                t = t.append_column("_binlake_op", pa.array([x["op"] for x in run], pa.string()))
                yield from conform(t).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def newest_types(layouts: list[list[dict[str, Any]]]) -> dict[str, pa.DataType]:
    """Each column's Arrow type in the newest of ``layouts`` (oldest first) that has it."""
    out: dict[str, pa.DataType] = {}
    for columns in layouts:
        out.update({f.name: f.type for f in _typed_batch([], columns).schema})
    return out


def _cast_stream(stream: pa.RecordBatchReader, types: dict[str, pa.DataType]) -> pa.RecordBatchReader:
    """An older layout's batches with the newest types (INT rows of a table now BIGINT)."""
    schema = pa.schema([f.with_type(types.get(f.name, f.type)) for f in stream.schema])
    if schema == stream.schema:
        return stream
    return pa.RecordBatchReader.from_batches(schema, (b.cast(schema) for b in stream))


def widen_table(path: Path, types: dict[str, pa.DataType]) -> None:
    """Give an existing Delta table's columns their new types (a type change upstream) by rewriting
    it once, values cast (a value that does not fit is an error, nothing is lost). Idempotent: a rerun
    finds the table already rewritten."""
    from deltalake import DeltaTable, write_deltalake

    if not (path / "_delta_log").exists():
        return
    table = DeltaTable(str(path))
    schema = pa.schema(table.schema().to_arrow())
    changed = {f.name: types[f.name] for f in schema if f.name in types and f.type != types[f.name]}
    if not changed:
        return
    data = table.to_pyarrow_table()
    data = data.cast(pa.schema([f.with_type(changed.get(f.name, f.type)) for f in data.schema]))
    write_deltalake(str(path), data, mode="overwrite", schema_mode="overwrite")


def merge_table(
    path: Path, batch: Any, keys: list[str], version: int | None, metadata: dict[str, str]
) -> None:
    """Upsert ``batch`` (a table or an Arrow stream) by key, newer order keys winning, in one commit
    that records ``version`` as the app transaction (None: an idempotent step before the last)."""
    from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake

    txns = [Transaction(APP_ID, version)] if version is not None else None
    props = CommitProperties(custom_metadata=metadata, app_transactions=txns)
    if not (path / "_delta_log").exists():
        path.mkdir(parents=True, exist_ok=True)
        write_deltalake(str(path), batch, mode="append", commit_properties=props)
        return
    predicate = sql.keys_equal(keys)
    table = DeltaTable(str(path))
    have = pa.schema(table.schema().to_arrow())
    added = [f for f in batch.schema if f.name not in have.names]
    if added:  # ADD COLUMN upstream (its own commit; a rerun finds the column there)
        table.alter.add_columns(Schema.from_arrow(pa.schema(added)).fields)
        table = DeltaTable(str(path))
    # columns dropped or renamed upstream stay in the table; a row changed after that reads NULL there
    gone = [name for name in have.names if name not in batch.schema.names]
    q = sql.quote_ident
    updates = {q(c): sql.column("s", c) for c in batch.schema.names} | {q(c): "NULL" for c in gone}
    newer = f"{sql.column('s', ORDER)} > {sql.column('t', ORDER)}"
    (
        table.merge(batch, predicate, source_alias="s", target_alias="t", commit_properties=props)
        .when_matched_update(updates, predicate=newer)
        # every column named and quoted here: delta-rs's insert_all does not quote the names it makes
        .when_not_matched_insert({q(c): sql.column("s", c) for c in batch.schema.names})
        .execute()
    )
    if version is not None and DeltaTable(str(path)).transaction_version(APP_ID) != version:
        commit_empty(path, props)  # a MERGE that changed no row commits nothing, nor the version


def commit_empty(path: Path, props: Any, *, overwrite: bool = False) -> None:
    """A commit of no rows carrying ``props`` (the app-transaction version, metadata): the position
    alone, or with ``overwrite`` every row removed (the rows stay in the table history)."""
    from deltalake import DeltaTable, write_deltalake

    nothing = pa.schema(DeltaTable(str(path)).schema().to_arrow()).empty_table()
    write_deltalake(str(path), nothing, mode="overwrite" if overwrite else "append", commit_properties=props)


def change_log(spark: Any, source: str, options: dict[str, str] | None = None) -> Any:
    """The change log of every complete transaction of ``source`` (the ``binlog`` data source)."""
    return spark.read.format("binlog").options(**(options or {})).load(source)


def sync_to_delta(
    spark: Any,
    source: str,
    target: str | Path,
    *,
    options: dict[str, str] | None = None,
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
) -> SyncReport:
    """Apply every complete transaction of ``source`` to Delta tables under ``target/db.table``."""
    df = change_log(spark, source, options)
    return apply_changes(df, target, source=source, chunk_rows=chunk_rows, on_phase=on_phase)


def batch_head(df: Any, source: str) -> tuple[SyncReport, dict[str, str]]:
    """A batch's identity: its last transaction's position (the version sinks commit atomically with
    the data) and its size; the metadata every commit of it carries. A change no sink can apply (a
    partial JSON update) is refused here, before any sink creates or writes anything."""
    from pyspark.sql import functions as F

    report = SyncReport()
    partial = (F.col("op") == "update") & F.col("after").contains(PARTIAL_JSON_MARK)
    head = df.agg(  # one Spark job: the newest row (structs compare field by field) and the size
        F.max(F.struct("order_key", "file", "file_number", "txn_position")).alias("top"),
        F.sum(F.col("op").isin(*ROW_OPS).cast("long")).alias("changes"),
        F.min(F.when(partial, F.struct("order_key", "db", "table", "file", "position", "after"))).alias(
            "partial"
        ),
    ).collect()[0]
    if head["partial"] is not None:
        raise partial_json_error(head["partial"])
    top = head["top"]
    if top is None:
        return report, {}
    report.version = batch_version(top["file_number"], top["txn_position"])
    report.position = f"{top['file']}:{top['txn_position']}"
    report.changes = int(head["changes"] or 0)
    return report, {
        "binlake.position": report.position,
        "binlake.order_key": top["order_key"],
        "binlake.source": source,
    }


@contextmanager
def decoded_once(df: Any) -> Iterator[Any]:
    """The change log kept (memory, spilling to disk) while a sink runs its several Spark actions
    over it: without this every action decodes the binlogs again."""
    from pyspark import StorageLevel

    # on disk: the change log carries whole row images as JSON; held in the JVM heap it crowded out
    # the sort of last-change-per-key (a 1 GB binlog spent its time in full GCs)
    kept = df.persist(StorageLevel.DISK_ONLY)
    try:
        yield kept
    finally:
        kept.unpersist()


def apply_changes(
    df: Any, target: str | Path, *, source: str = "", chunk_rows: int = 50_000, on_phase: Phase = None
) -> SyncReport:
    """Apply a change-log DataFrame (a whole batch, or one streaming micro-batch) exactly once.
    ``on_phase`` hears what it does now (for a progress display)."""
    with decoded_once(df) as kept:
        return _apply_changes(kept, Path(target), source, chunk_rows, on_phase or (lambda _: None))


def _apply_changes(
    df: Any, target: Path, source: str, chunk_rows: int, on_phase: Callable[[str], None]
) -> SyncReport:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    on_phase("reading the change log")
    report, metadata = batch_head(df, source)
    if not metadata:  # nothing at all (a batch of renames only still has renames to follow)
        return report
    df, plan = renamed_changes(df)
    report.renamed = rename_delta_targets(target, plan, report.version, metadata["binlake.order_key"])
    _append_keyless(df, target, report, metadata, chunk_rows)
    latest = latest_per_key(df).persist(StorageLevel.DISK_ONLY)
    tables: dict[tuple[str, str], list[tuple[str, str, str | None]]] = {}  # (newest order key, layout)
    layouts_seen = latest.groupBy("db", "table", "columns", "renamed").agg(F.max("order_key").alias("newest"))
    for row in layouts_seen.collect():
        tables.setdefault((row["db"], row["table"]), []).append(
            (row["newest"], row["columns"], row["renamed"])
        )
    for (db, table), layouts in sorted(tables.items()):
        name = f"{db}.{table}"
        on_phase(f"merging {name}")
        path = table_path(target, db, table)
        done = committed_version(target, path.name)
        if done is not None and done >= report.version:
            report.skipped.append(name)
            continue
        n = 0
        # one commit per column layout (DDL changes it), oldest first, so ADD COLUMN evolves the
        # table; every column takes its type in the newest layout (a type change widens the table).
        # Only the last commit records the batch version: a run killed in between replays the
        # earlier ones, which the order-key guard makes idempotent.
        ordered = [(c, r) for _, c, r in sorted(layouts, key=lambda x: x[0])]
        newest = newest_types([layout_columns(c, r) for c, r in ordered])
        widen_table(path, newest)
        for i, (layout, renamed, rows) in enumerate(layout_runs(latest, db, table)):
            columns = layout_columns(layout, renamed)
            keys = [c["name"] for c in columns if c.get("pk")]
            counted = _Counted(rows)
            stream = _cast_stream(_batch_stream(counted, columns, chunk_rows), newest)
            version = report.version if i == len(ordered) - 1 else None
            shown = json.dumps(columns)
            merge_table(path, stream, keys, version, {**metadata, "binlake.columns": shown})
            n += counted.n
        report.tables[name] = n
    latest.unpersist()
    return report


def _append_keyless(
    df: Any, target: Path, report: SyncReport, metadata: dict[str, str], chunk_rows: int
) -> None:
    """Tables without a primary key: every change appended to a change table (``_binlake_op`` says
    which), once: a batch re-reading changes already appended (a rerun over a grown directory)
    appends only those after the order key the table's last append recorded."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from pyspark.sql import functions as F

    for (db, table), layouts, rows in keyless_tables(df):
        name = f"{db}.{table}"
        path = table_path(target, db, table)
        done = committed_version(target, path.name)
        if done is not None and done >= report.version:
            report.skipped.append(name)
            continue
        upto = appended_upto(path)
        if upto:
            rows = rows.where(F.col("order_key") > upto)
        counted = _Counted(rows.toLocalIterator())
        stream = keyless_stream(counted, layouts, chunk_rows)
        props = CommitProperties(
            custom_metadata={**metadata, "binlake.columns": json.dumps(keyless_columns(layouts))},
            app_transactions=[Transaction(APP_ID, report.version)],
        )
        path.mkdir(parents=True, exist_ok=True)
        # one commit per table and batch: appends are not idempotent, so never split them
        write_deltalake(str(path), stream, mode="append", schema_mode="merge", commit_properties=props)
        report.tables[name] = counted.n


def appended_upto(path: Path) -> str | None:
    """The order key up to which a change table holds its source's changes (its last batch's)."""
    from deltalake import DeltaTable

    if not (path / "_delta_log").exists():
        return None
    for commit in DeltaTable(str(path)).history():
        if "binlake.order_key" in commit:
            return str(commit["binlake.order_key"])
    return None


def read_delta(target: str | Path, table: str) -> pa.Table:
    """A synced table as it reads: tombstones and system columns removed."""
    from deltalake import DeltaTable

    t = DeltaTable(str(inside(Path(target), table))).to_pyarrow_table()
    t = t.filter(pa.compute.invert(t[DELETED]))
    return t.drop_columns([ORDER, DELETED, GTID, COMMIT_TS])


def delta_tables(target: str | Path) -> list[str]:
    return (
        sorted(p.name for p in Path(target).iterdir() if (p / "_delta_log").exists())
        if os.path.isdir(target)
        else []
    )


def stream_changes(
    spark: Any,
    source: str,
    checkpoint: str | Path,
    apply: Callable[[Any], SyncReport],
    *,
    available_now: bool = True,
    interval: str = "2 seconds",
    options: dict[str, str] | None = None,
) -> Any:
    """Follow ``source`` and hand each micro-batch's change log to ``apply`` (a sink's exactly-once
    apply: it commits the batch position with the data; Spark's checkpoint holds the offsets).
    ``available_now``: process what is there and stop; else keep following every ``interval``.
    The query's ``reports`` lists what each batch did."""
    reports: list[SyncReport] = []

    def each(batch: Any, batch_id: int) -> None:
        reports.append(apply(batch))

    writer = (
        spark.readStream.format("binlog")
        .options(**(options or {}))
        .load(source)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
    query = writer.start()
    if available_now:
        query.awaitTermination()
    query.reports = reports
    return query


def stream_to_delta(
    spark: Any,
    source: str,
    target: str | Path,
    checkpoint: str | Path,
    *,
    available_now: bool = True,
    interval: str = "2 seconds",
    options: dict[str, str] | None = None,
) -> Any:
    """``stream_changes`` into Delta tables under ``target``."""
    return stream_changes(
        spark,
        source,
        checkpoint,
        lambda batch: apply_changes(batch, target, source=source),
        available_now=available_now,
        interval=interval,
        options=options,
    )


def export_parquet(source: str | Path, target: str | Path) -> dict[str, int]:
    """A Parquet snapshot ``<table dir>.parquet`` of every synced table (tombstones and system
    columns removed), each file replaced whole; snapshots binlake wrote of tables no longer there
    (renamed upstream) go — no other file is ever removed. The source's name book is copied, so
    ``db.table`` is found again (see ``binlake.targetnames``)."""
    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    where = Path(target)
    where.mkdir(parents=True, exist_ok=True)
    book = where / SNAPSHOT_BOOK
    written: list[str] = json.loads(book.read_text()) if book.exists() else []
    tables = delta_tables(source)
    for name in tables:
        table = read_delta(source, name)
        file = inside(where, f"{name}.parquet")
        tmp = file.with_name(f".{file.name}.tmp")
        pq.write_table(table, str(tmp))
        if file.name not in written:  # recorded before it exists: a kill leaves nothing unlisted
            written.append(file.name)
            _save_json(book, written)
        os.replace(tmp, file)  # readers see the old snapshot or the new one
        out[name] = table.num_rows
    keep = {f"{name}.parquet" for name in tables}
    for stale in [n for n in written if n not in keep]:
        inside(where, stale).unlink(missing_ok=True)
        written.remove(stale)
    _save_json(book, written)
    names = NameBook.open(Path(source) / NAME_BOOK)
    _save_json(where / NAME_BOOK, {f"{n}.parquet": names.source(n) for n in tables})
    return out


def _save_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False, sort_keys=True))
    os.replace(tmp, path)
