"""Typed target rows from the change log's VARIANT images, computed in Spark (the JVM), and brought
to the driver as Arrow record batches.

Each target column is ``variant_get(image, '$["name"]', <its Spark type>)`` (``binlake.spark.typed``
gives the type from the declared MySQL type); date and time types use ``try_variant_get``, so a zero
or partial date (a string in the change log) becomes NULL as documented, while any other value that
does not fit its column is an error, never lost silently. A name no JSON path can quote (it holds
both ``'`` and ``"``) is looked up in the image as a map.
"""

from __future__ import annotations

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


def typed_rows(
    df: Any,
    columns: Sequence[dict[str, Any]],
    sources: dict[str, list[tuple[str | None, str]]],
    keyless: bool,
) -> Any:
    """One table's changes as typed target rows (a DataFrame). ``columns``: the target columns
    (name, types, ``pk``); ``sources[name]``: (``renamed`` value, name in the images) for every
    layout the column has (a rename within the batch gives one column two image names; none: the
    column is NULL here, a sink's fill gives it its value). Keyed tables: key columns from ``pk``,
    the rest from ``after`` (NULL for a delete, a tombstone); keyless: every column from the image
    the change has (a delete's ``before``) and ``_binlake_op``."""
    from pyspark.sql import functions as F

    out = _column_values(columns, sources, keyless)
    out += [
        F.col("order_key").alias(ORDER),
        (F.col("op") == "delete").alias(DELETED),
        F.col("gtid").alias(GTID),
        F.col("commit_ts").alias(COMMIT_TS),
    ]
    if keyless:
        out.append(F.col("op").alias(OP))
    return df.select(*out)


def _column_values(
    columns: Sequence[dict[str, Any]], sources: dict[str, list[tuple[str | None, str]]], keyless: bool
) -> list[Any]:
    """The typed value of each of ``columns`` in a change-log row (Spark columns; see ``typed_rows``)."""
    from pyspark.sql import functions as F

    deleted = F.col("op") == "delete"
    image = F.when(deleted, F.col("before")).otherwise(F.col("after")) if keyless else F.col("after")
    out = []
    for c in columns:
        t = arrow_type(c)
        src = F.col("pk") if (c.get("pk") and not keyless) else image
        names = sources.get(c["name"], [])
        if not names:
            value = F.lit(None).cast(spark_type(t))
        elif len({n for _, n in names}) == 1:
            value = field(src, names[0][1], t)
        else:
            (renamed, n), *rest = names
            value = F.when(_layout_is(renamed), field(src, n, t))
            for renamed, n in rest:
                value = value.when(_layout_is(renamed), field(src, n, t))
        if not keyless and not c.get("pk"):
            value = F.when(~deleted, value)
        out.append(value.alias(c["name"]))
    return out


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
            return pa.RecordBatchReader.from_batches(schema, _sliced(df, schema, -(-n // slice_rows)))
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
