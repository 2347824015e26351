"""Exactly-once apply of the change log into Delta Lake tables (deltalake, no JVM jars).

Per run ("micro-batch"): the change log of what is new since the last committed position, the last
change per primary key by order key (deletes kept as tombstones, a primary-key change as a delete of
the old key plus an insert), then per table one MERGE guarded by the order key — a replayed or late
batch changes nothing — committed with the batch's binlog position as the Delta app-transaction
version and in the commit metadata. Tables without a primary key get an append-only change table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.changes import KEY_WIDTH, TOMBSTONE
from binlake.dialects import delta as sql
from binlake.spark.changelog import PARTIAL_JSON_MARK, ROW_OPS, partial_json_error
from binlake.spark.delta_renames import rename_delta_targets
from binlake.spark.renames import layout_columns, renamed_changes
from binlake.spark.typed import arrow_type
from binlake.spark.typedrows import COMMIT_TS, DELETED, GTID, ORDER, arrow_batches, target_schema, typed_rows
from binlake.targetnames import NAME_BOOK, NameBook, inside, path_name

KEY = "_binlake_key"  # a change's primary key as JSON text, while finding the last change per key
JSON_TYPE = 245  # ColumnType.JSON: the only columns a partial JSON update is in
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
    tombstone for the old key, whose order key is the change's with ``part`` TOMBSTONE (it sorts just
    before it). Keys compare by their JSON form (``to_json``: a VARIANT is not a grouping key)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keyed = df.where(F.col("pk").isNotNull()).withColumn(KEY, F.to_json("pk"))
    moved = keyed.where(
        (F.col("op") == "update") & F.col("pk_before").isNotNull() & (F.to_json("pk_before") != F.col(KEY))
    )
    tombstone = F.overlay(F.col("order_key"), F.lit(bytes([TOMBSTONE])), F.lit(KEY_WIDTH))
    replaced = {
        "op": F.lit("delete"),
        "pk": F.col("pk_before"),
        KEY: F.to_json("pk_before"),
        "order_key": tombstone,
        "after": F.lit(None).cast("variant"),
    }
    tombstones = moved.select(*[replaced.get(c, F.col(c)).alias(c) for c in keyed.columns])
    both = keyed.unionByName(tombstones)
    w = Window.partitionBy("db", "table", KEY).orderBy(F.col("order_key").desc())
    return both.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") == 1).drop("_rn", KEY)


Layout = tuple[list[dict[str, Any]], str | None]  # a change-log ``columns`` value and its ``renamed``


def table_layouts(df: Any) -> dict[tuple[str, str], list[Layout]]:
    """Each table's column layouts in ``df``, in the order they were written (by their newest
    change): one small Spark job for every table."""
    from pyspark.sql import functions as F

    found: dict[tuple[str, str], list[tuple[bytes, Layout]]] = {}
    for g in df.groupBy("db", "table", "columns", "renamed").agg(F.max("order_key").alias("k")).collect():
        columns = [c.asDict(recursive=True) for c in g["columns"]]
        found.setdefault((g["db"], g["table"]), []).append((bytes(g["k"]), (columns, g["renamed"])))
    return {t: [lay for _, lay in sorted(ls, key=lambda x: x[0])] for t, ls in sorted(found.items())}


Sources = dict[str, list[tuple[str | None, str]]]  # target column -> (renamed, name in the images)


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


class _Counted:
    """An Arrow stream that counts the rows that passed through it."""

    def __init__(self, stream: pa.RecordBatchReader) -> None:
        self.n = 0

        def each() -> Iterator[pa.RecordBatch]:
            for b in stream:
                self.n += b.num_rows
                yield b

        self.stream = pa.RecordBatchReader.from_batches(stream.schema, each())


def table_stream(
    df: Any,
    db: str,
    table: str,
    layouts: list[Layout],
    *,
    keyless: bool,
    name: Callable[[str], str] = str,
    chunk_rows: int | None = None,
) -> tuple[list[dict[str, Any]], _Counted]:
    """One table's changes in ``df`` as typed target rows on the driver (an Arrow stream, counted;
    about ``chunk_rows`` rows at a time), and the target columns; keyless tables' changes in order."""
    from pyspark.sql import functions as F

    columns, sources = union_columns(layouts, name)
    rows = df.where((F.col("db") == db) & (F.col("table") == table))
    if keyless:
        rows = rows.orderBy("order_key")
    typed = typed_rows(rows, columns, sources, keyless)
    return columns, _Counted(arrow_batches(typed, target_schema(columns, keyless=keyless), chunk_rows))


def column_types(columns: list[dict[str, Any]]) -> dict[str, pa.DataType]:
    return {c["name"]: arrow_type(c) for c in columns}


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
    json_table = F.exists(F.col("columns"), lambda c: c["type"] == JSON_TYPE)
    after = F.to_json(F.col("after"))
    partial = (F.col("op") == "update") & json_table & after.contains(PARTIAL_JSON_MARK)
    head = df.agg(  # one Spark job: the newest row (structs compare field by field) and the size
        F.max(F.struct("order_key", "file", "file_number", "txn_position")).alias("top"),
        F.sum(F.col("op").isin(*ROW_OPS).cast("long")).alias("changes"),
        F.min(
            F.when(partial, F.struct("order_key", "db", "table", "file", "position", after.alias("after")))
        ).alias("partial"),
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
        "binlake.order_key": bytes(top["order_key"]).hex(),
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
    df: Any,
    target: str | Path,
    *,
    source: str = "",
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
    positioned: bool = True,
) -> SyncReport:
    """Apply a change-log DataFrame (a whole batch, or one streaming micro-batch) exactly once.
    ``on_phase`` hears what it does now (for a progress display). ``positioned=False``: changes
    that are not a stretch of the binlog (a snapshot's chunks, each at its own position): applied
    under the order-key guard alone, no table records or compares a batch position."""
    with decoded_once(df) as kept:
        return _apply_changes(kept, Path(target), source, chunk_rows, on_phase or (lambda _: None), positioned)


def _apply_changes(
    df: Any,
    target: Path,
    source: str,
    chunk_rows: int,
    on_phase: Callable[[str], None],
    positioned: bool = True,
) -> SyncReport:
    from pyspark import StorageLevel

    on_phase("reading the change log")
    report, metadata = batch_head(df, source)
    if not metadata:  # nothing at all (a batch of renames only still has renames to follow)
        return report
    df, plan = renamed_changes(df)
    upto = bytes.fromhex(metadata["binlake.order_key"])
    report.renamed = rename_delta_targets(target, plan, report.version, upto)
    _append_keyless(df, target, report, metadata, chunk_rows)
    latest = latest_per_key(df).persist(StorageLevel.DISK_ONLY)
    for (db, table), layouts in table_layouts(latest).items():
        name = f"{db}.{table}"
        on_phase(f"merging {name}")
        path = table_path(target, db, table)
        done = committed_version(target, path.name) if positioned else None
        if done is not None and done >= report.version:
            report.skipped.append(name)
            continue
        # one MERGE per table in the columns of all its layouts of the batch (ADD COLUMN evolves
        # the table), each column in its type in the newest layout (a type change widens it)
        columns, counted = table_stream(latest, db, table, layouts, keyless=False, chunk_rows=chunk_rows)
        widen_table(path, column_types(columns))
        keys = [c["name"] for c in columns if c.get("pk")]
        shown = json.dumps(columns)
        version = report.version if positioned else None
        merge_table(path, counted.stream, keys, version, {**metadata, "binlake.columns": shown})
        report.tables[name] = counted.n
    latest.unpersist()
    return report


def _append_keyless(
    df: Any, target: Path, report: SyncReport, metadata: dict[str, str], chunk_rows: int | None = None
) -> None:
    """Tables without a primary key: every change appended to a change table (``_binlake_op`` says
    which), once: a batch re-reading changes already appended (a rerun over a grown directory)
    appends only those after the order key the table's last append recorded."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from pyspark.sql import functions as F

    keyless = df.where(F.col("pk").isNull())
    for (db, table), layouts in table_layouts(keyless).items():
        name = f"{db}.{table}"
        path = table_path(target, db, table)
        done = committed_version(target, path.name)
        if done is not None and done >= report.version:
            report.skipped.append(name)
            continue
        upto = appended_upto(path)
        rows = keyless.where(F.col("order_key") > F.lit(upto)) if upto else keyless
        columns, counted = table_stream(rows, db, table, layouts, keyless=True, chunk_rows=chunk_rows)
        props = CommitProperties(
            custom_metadata={**metadata, "binlake.columns": json.dumps(columns)},
            app_transactions=[Transaction(APP_ID, report.version)],
        )
        path.mkdir(parents=True, exist_ok=True)
        # one commit per table and batch: appends are not idempotent, so never split them
        write_deltalake(
            str(path), counted.stream, mode="append", schema_mode="merge", commit_properties=props
        )
        report.tables[name] = counted.n


def appended_upto(path: Path) -> bytes | None:
    """The order key up to which a change table holds its source's changes (its last batch's)."""
    from deltalake import DeltaTable

    if not (path / "_delta_log").exists():
        return None
    for commit in DeltaTable(str(path)).history():
        if "binlake.order_key" in commit:
            return bytes.fromhex(str(commit["binlake.order_key"]))
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
