"""Typed target rows from the change log's VARIANT images, computed in Spark (the JVM), and brought
to the driver as Arrow record batches.

Each target column is ``variant_get(image, '$["name"]', <its Spark type>)`` (``binlake.spark.typed``
gives the type from the declared MySQL type); date and time types use ``try_variant_get``, so a zero
or partial date (a string in the change log) becomes NULL as documented, while any other value that
does not fit its column is an error, never lost silently. A name no JSON path can quote (it holds
both ``'`` and ``"``) is looked up in the image as a map.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from binlake.spark.typed import arrow_type

ORDER, DELETED, GTID, COMMIT_TS, OP = (
    "_binlake_order_key",
    "_binlake_deleted",
    "_binlake_gtid",
    "_binlake_commit_ts",
    "_binlake_op",
)
# while a table's changes are folded (``fold_images``): column i holds a value the row's changes set
PRESENT = "_binlake_has_"
# then one text of '1'/'0' per target column, 1-based as SQL's SUBSTR counts (``masked``): which of
# its columns a row sets; a row without it sets every column. Never a target column: a sink reads it
# to leave the others alone (one column, however wide the table: a flag column per column would
# double a stage's width past what a database allows)
MASK = "_binlake_set"


def spark_type(t: pa.DataType) -> str:
    """The Spark SQL type ``variant_get`` casts to for an Arrow target type."""
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_list(t):
        return f"array<{spark_type(t.value_type)}>"
    return _SPARK[t]


_SPARK = {
    pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
    pa.float32(): "float", pa.float64(): "double", pa.date32(): "date", pa.string(): "string",
    pa.binary(): "binary", pa.bool_(): "boolean",
}  # fmt: skip


TEMPORAL = ("date", "timestamp", "timestamp_ntz")  # the Spark types of dates and timestamps


def path(name: str) -> str | None:
    """A JSON path selecting field ``name`` (None: none can, see the module docstring)."""
    if '"' not in name:
        return f'$["{name}"]'
    if "'" not in name:
        return f"$['{name}']"
    return None


def field(image: Any, name: str, t: pa.DataType) -> Any:
    """Field ``name`` of VARIANT ``image`` as Arrow type ``t`` (a Spark column)."""
    from pyspark.sql import functions as F

    p = path(name)
    if p is not None:
        return typed_field(image, spark_type(t), p)
    as_map = F.try_variant_get(image, "$", "map<string,variant>")
    return typed_field(F.element_at(as_map, F.lit(name)), spark_type(t))


def typed_field(value: Any, t: str, at: str = "$") -> Any:
    """VARIANT ``value`` (at JSON path ``at``) as Spark type ``t``; a date or timestamp that does
    not fit (a zero date) is NULL, any other value that does not fit an error (module docstring)."""
    from pyspark.sql import functions as F

    get = F.try_variant_get if t in TEMPORAL else F.variant_get
    return get(value, at, t)


def target_schema(columns: Sequence[dict[str, Any]], *, keyless: bool = False) -> pa.Schema:
    """The Arrow schema of a target table for ``columns`` (sink column dicts) and system columns."""
    fields = [pa.field(c["name"], arrow_type(c)) for c in columns]
    fields += [
        pa.field(ORDER, pa.binary()),
        pa.field(DELETED, pa.bool_()),
        pa.field(GTID, pa.string()),
        pa.field(COMMIT_TS, pa.timestamp("us", tz="UTC")),
    ]
    if keyless:
        fields.append(pa.field(OP, pa.string()))
    return pa.schema(fields)


Sources = dict[str, list[tuple[str | None, str]]]  # target column -> (renamed, name in the images)


def typed_rows(
    df: Any,
    columns: Sequence[dict[str, Any]],
    sources: Sources,
    keyless: bool,
    *,
    partial: bool = False,
    keep: Sequence[Any] = (),
) -> Any:
    """One table's changes as typed target rows (a DataFrame). ``columns``: the target columns
    (name, types, ``pk``); ``sources[name]``: (``renamed`` value, name in the images) for every
    layout the column has (a rename within the batch gives one column two image names; none: the
    column is NULL here, a sink's fill gives it its value). Keyed tables: key columns from ``pk``,
    the rest from ``after`` (NULL for a delete, a tombstone); keyless: every column from the image
    the change has (a delete's ``before``) and ``_binlake_op``. ``partial``: images may lack
    columns (MINIMAL/NOBLOB): a keyed row says which of its columns it sets (``PRESENT``); a
    keyless update takes a column its after image lacks from its before image (which, without a
    key, holds every column). ``keep``: columns of ``df`` kept as they are."""
    from pyspark.sql import functions as F

    out = _column_values(columns, sources, keyless, partial)
    out += [
        F.col("order_key").alias(ORDER),
        (F.col("op") == "delete").alias(DELETED),
        F.col("gtid").alias(GTID),
        F.col("commit_ts").alias(COMMIT_TS),
    ]
    if keyless:
        out.append(F.col("op").alias(OP))
    elif partial:
        out += _presence(columns, sources)
    return df.select(*out, *keep)


def _column_values(
    columns: Sequence[dict[str, Any]], sources: Sources, keyless: bool, partial: bool
) -> list[Any]:
    """The typed value of each of ``columns`` in a change-log row (Spark columns; see ``typed_rows``)."""
    from pyspark.sql import functions as F

    op = F.col("op")
    deleted = op == "delete"
    image = F.when(deleted, F.col("before")).otherwise(F.col("after")) if keyless else F.col("after")
    out = []
    for c in columns:
        t = arrow_type(c)
        src = F.col("pk") if (c.get("pk") and not keyless) else image
        value = _per_layout(c, sources, lambda n: field(src, n, t))  # noqa: B023 (used at once)
        if value is None:
            value = F.lit(None).cast(spark_type(t))
        elif keyless and partial:  # an update's unchanged column: as its before image holds it
            unchanged = _per_layout(c, sources, lambda n: ~has_field(F.col("after"), n))
            was = _per_layout(c, sources, lambda n: field(F.col("before"), n, t))  # noqa: B023
            value = F.when((op == "update") & unchanged, was).otherwise(value)
        if not keyless and not c.get("pk"):
            value = F.when(~deleted, value)
        out.append(value.alias(c["name"]))
    return out


def _presence(columns: Sequence[dict[str, Any]], sources: Sources) -> list[Any]:
    """Per column of a keyed table but its key, whether a row change sets it (``PRESENT`` + its
    place in ``columns``): an update where its after image holds the column, an insert or a delete
    always (a column an insert's image lacks is NULL: its server default is not in the binlog)."""
    from pyspark.sql import functions as F

    out = []
    for i, c in enumerate(columns):
        if c.get("pk"):
            continue
        has = _per_layout(c, sources, lambda n: has_field(F.col("after"), n))
        sets = F.col("op") != "update"
        out.append((sets if has is None else sets | F.coalesce(has, F.lit(False))).alias(f"{PRESENT}{i}"))
    return out


def _per_layout(c: dict[str, Any], sources: Sources, pick: Any) -> Any:
    """``pick(name in the image)`` for target column ``c``, by the layout of the row (a column
    renamed in the batch has two names); None: no layout of the batch has the column."""
    from pyspark.sql import functions as F

    names = sources.get(c["name"], [])
    if not names:
        return None
    if len({n for _, n in names}) == 1:
        return pick(names[0][1])
    (renamed, n), *rest = names
    value = F.when(_layout_is(renamed), pick(n))
    for renamed, n in rest:
        value = value.when(_layout_is(renamed), pick(n))
    return value


def has_field(image: Any, name: str) -> Any:
    """VARIANT object ``image`` holds field ``name`` (a JSON null is a value; a missing field is SQL
    NULL to ``variant_get``)."""
    from pyspark.sql import functions as F

    p = path(name)
    if p is not None:
        return F.variant_get(image, p, "variant").isNotNull()
    return F.element_at(F.try_variant_get(image, "$", "map<string,variant>"), F.lit(name)).isNotNull()


def presence_column(columns: Sequence[dict[str, Any]], name: str) -> str:
    """The ``PRESENT`` column of target column ``name`` (one of ``columns``, not a key)."""
    return f"{PRESENT}{next(i for i, c in enumerate(columns) if c['name'] == name)}"


def masked(folded: Any, columns: Sequence[dict[str, Any]]) -> Any:
    """``fold_images``' rows with their ``PRESENT`` flags as one ``MASK`` (a key column: '1')."""
    from pyspark.sql import functions as F

    names = set(folded.columns)
    bits = [
        F.when(F.col(f"{PRESENT}{i}"), F.lit("1")).otherwise(F.lit("0"))
        if f"{PRESENT}{i}" in names
        else F.lit("1")
        for i in range(len(columns))
    ]
    return folded.withColumn(MASK, F.concat(*bits)).drop(*(n for n in names if n.startswith(PRESENT)))


def presence(schema: pa.Schema, columns: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Target column -> its place (1-based) in ``MASK`` where rows of ``schema`` carry one (every
    non-key column of ``columns``), else nothing: every row sets every column."""
    if MASK not in schema.names:
        return {}
    return {c["name"]: i + 1 for i, c in enumerate(columns) if not c.get("pk")}


def fold_images(
    typed: Any, columns: Sequence[dict[str, Any]], key: str, restart: str, partitions: int | None = None
) -> Any:
    """One row per key (column ``key``) of a keyed table's typed changes with ``PRESENT`` columns
    (``typed_rows(partial=True)``), each column as the key's last change that set it — since its
    last ``restart`` (an insert, a delete, a key moved here: the row began again). A column no such
    change set keeps its ``PRESENT`` false: the sink leaves the target's value. ``partitions``: fold
    in that many pieces (a small batch: few tasks; ``plan.sort_partitions``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = F.col(ORDER)
    if partitions is not None:  # the window's and the grouping's partitioning: no other exchange
        typed = typed.repartition(partitions, key)
    began = F.max(F.when(F.col(restart), order)).over(Window.partitionBy(key))
    live = typed.withColumn("_began", began).where(F.col("_began").isNull() | (order >= F.col("_began")))
    names = typed.columns
    aggs = []
    for i, c in enumerate(columns):
        flag = f"{PRESENT}{i}"
        if flag in names:
            aggs += [
                F.max_by(named(c["name"]), F.when(F.col(flag), order)).alias(c["name"]),
                F.max(flag).alias(flag),
            ]
        else:
            aggs.append(F.max_by(named(c["name"]), order).alias(c["name"]))
    aggs += [F.max(ORDER).alias(ORDER)] + [F.max_by(n, order).alias(n) for n in (DELETED, GTID, COMMIT_TS)]
    return live.groupBy(key).agg(*aggs).drop(key)


def named(name: str) -> Any:
    """The column called ``name``, whatever it holds (a bare string is parsed: a dot is a struct
    field, a backtick a quote)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _layout_is(renamed: str | None) -> Any:
    """A change-log row is of the layout whose ``renamed`` value this is."""
    from pyspark.sql import functions as F

    return F.col("renamed").isNull() if renamed is None else F.col("renamed") == F.lit(renamed)


def arrow_batches(
    df: Any, schema: pa.Schema, slice_rows: int | None = None, rows: int | None = None
) -> pa.RecordBatchReader:
    """``df``'s rows on the driver as Arrow batches of ``schema``, in order key order where ``df``
    is ordered (Spark's own Arrow collection: no Python objects per row). With ``slice_rows`` the
    driver never holds more than about that many rows: a bigger ``df`` is cut into order-key ranges
    collected one after another (``mapInArrow`` could stream partitions, but needs pandas).
    ``rows``: ``df``'s row count (or a bound of it) where the caller knows it, saving a Spark job."""
    if slice_rows:
        n = df.count() if rows is None else rows
        if n > slice_rows:
            slices = _sliced(df, schema, -(-n // slice_rows))
            # the first slice read now, not when the stream is: its Spark actions (the first over
            # ``df``'s kept frames, ``plan.adaptive_off``) run in the caller's context
            first = next(slices, None)
            return pa.RecordBatchReader.from_batches(
                schema, itertools.chain(() if first is None else (first,), slices)
            )
    table = df.toArrow()
    return pa.RecordBatchReader.from_batches(schema, (conform(b, schema) for b in table.to_batches()))


def _sliced(df: Any, schema: pa.Schema, slices: int) -> Iterator[pa.RecordBatch]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    parts = df.repartitionByRange(slices, ORDER).sortWithinPartitions(ORDER).persist(StorageLevel.DISK_ONLY)
    try:
        for i in range(slices):
            for b in parts.where(F.spark_partition_id() == i).toArrow().to_batches():
                yield conform(b, schema)
    finally:
        parts.unpersist()


def conform(b: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch from Spark in the target's exact Arrow types (Spark's own differ in detail: time zone
    names, large types)."""
    arrays = []
    for f in schema:
        a = b.column(f.name)
        if a.type != f.type:
            if pa.types.is_timestamp(a.type) and pa.types.is_timestamp(f.type):
                a = a.cast(pa.int64()).cast(f.type) if a.type.unit == f.type.unit else a.cast(f.type)
            else:
                a = a.cast(f.type)
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
