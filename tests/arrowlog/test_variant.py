"""VARIANT row images: every decoded value of real binlogs and generated series maps to the documented
variant value (``binlake.arrowlog.images``), and Spark reads the same values back (``variant_get`` /
PySpark's own variant decoder) as binlake's decoder gave."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.arrowlog import variant as v
from binlake.changes import Column, RowChange
from binlake.events.rows import ABSENT, PartialJson
from binlake.generate import generate
from binlake.spark.changelog import file_changes, rows_of, to_batches
from binlake.values.json_binary import Json, to_mysql_text
from binlake.values.temporal import MysqlDate, MysqlDateTime, format_date, format_datetime, format_time
from binlake.values.types import ColumnType
from tests.conftest import corpus_index


def expected(value: Any, c: Column) -> Any:
    """The value a change-log image holds for a decoded ``value`` (README "The change log")."""
    t = c.type
    if value is None:
        return None
    if isinstance(value, (MysqlDate, MysqlDateTime)):
        fsp = c.meta if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2) else 0
        return format_date(value) if isinstance(value, MysqlDate) else format_datetime(value, fsp)
    if isinstance(value, dt.timedelta):
        return format_time(value, c.meta if t == ColumnType.TIME2 else 0)
    if isinstance(value, Json):
        return to_mysql_text(value.value)
    if isinstance(value, PartialJson):
        return {"json_diff": [
            {"op": d.operation, "path": d.path} | ({} if d.operation == "REMOVE" else {"value": to_mysql_text(d.value)})
            for d in value.diffs
        ]}  # fmt: skip
    if t == ColumnType.SET and isinstance(value, tuple):
        return ",".join(value)
    if t == ColumnType.NEWDECIMAL and (c.meta >> 8) > 38:
        return format(value, "f")
    if t == ColumnType.FLOAT:
        return pytest.approx(value, rel=0, abs=0) if value == value else value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def images_of(changes: list[RowChange]) -> list[tuple[RowChange, dict[str, Any] | None, dict[str, Any]]]:
    rows = [r for b in to_batches(iter(changes)) for r in rows_of(b)]
    return [
        (c, r["after"] if c.after is not None else r["before"], r) for c, r in zip(changes, rows, strict=True)
    ]


def check(changes: list[RowChange]) -> set[int]:
    """Every image value equals its expected one; returns the column types met."""
    met = set()
    for c, image, row in images_of(changes):
        if c.layout is None:
            continue
        values = c.after if c.after is not None else c.before
        assert image is not None and values is not None
        for col, value in zip(c.layout, values, strict=True):
            if value is ABSENT:
                assert col.name not in image
                continue
            got = image[col.name]
            want = expected(value, col)
            assert got == want, (col, value, got)
            if isinstance(got, (dt.datetime, dt.date)) and isinstance(value, dt.datetime):
                assert (got.tzinfo is None) == (value.tzinfo is None), col
            met.add(col.type)
        key = row["pk"]
        if c.key is not None:
            pk = [col for col in c.layout if col.pk]
            assert key == {col.name: expected(x, col) for col, x in zip(pk, c.key, strict=True)}
    return met


def test_every_corpus_image_maps_to_its_variant(corpus: Path) -> None:
    met: set[int] = set()
    files = 0
    for rec in corpus_index()["records"]:
        if rec.get("problems") or "path" not in rec:
            continue
        try:
            changes = list(file_changes(corpus / rec["path"]))
        except Exception:  # damaged or unsupported upstream files: the decoder's own tests cover them
            continue
        met |= check(changes)
        files += 1
    assert files > 50
    assert {ColumnType.LONG, ColumnType.NEWDECIMAL, ColumnType.DATETIME2, ColumnType.JSON} <= met


def test_every_generated_column_type_maps_to_its_variant(tmp_path: Path) -> None:
    result = generate(tmp_path / "bin", seed=11, target_bytes=150_000, ddl_every=0)
    met: set[int] = set()
    for f in result.files:
        met |= check(list(file_changes(f)))
    assert len(met) >= 15, sorted(met)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.text()
        | st.binary()
        | st.floats(allow_nan=False)
        | st.decimals(allow_nan=False, allow_infinity=False, places=4)
        | st.dates()
        | st.datetimes(),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
        max_leaves=12,
    )
)
def test_documents_round_trip(doc: Any) -> None:
    value, metadata = v.encode_document(doc)
    got = v.decode(value, metadata)
    assert got == _normal(doc)


def _normal(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_normal(y) for y in x]
    if isinstance(x, list):
        return [_normal(y) for y in x]
    if isinstance(x, dict):
        return {k: _normal(y) for k, y in x.items()}
    if isinstance(x, int) and not isinstance(x, bool) and not -(2**63) <= x < 2**63:
        return Decimal(x) if abs(x) < 10**38 else x
    if isinstance(x, Decimal):
        return x if x.as_tuple().exponent >= -38 and len(x.as_tuple().digits) <= 38 else format(x, "f")
    return x


@pytest.mark.slow
def test_spark_reads_what_binlake_decoded(spark: Any, tmp_path: Path) -> None:
    """PySpark's own variant decoder and ``variant_get`` see the values binlake's decoder gave,
    for every column type of a generated series."""
    from pyspark.sql import functions as F

    from binlake.spark.typedrows import path

    result = generate(tmp_path / "bin", seed=12, target_bytes=80_000, ddl_every=0)
    changes = {c.order_key.encode(): c for f in result.files for c in file_changes(f)}
    df = spark.read.format("binlog").load(str(tmp_path / "bin")).where(F.col("after").isNotNull())
    rows = df.select("order_key", "after", F.to_json("after").alias("json")).collect()
    met = set()
    for r in rows:
        c = changes[bytes(r["order_key"])]
        assert c.layout is not None and c.after is not None
        image = r["after"].toPython()
        for col, value in zip(c.layout, c.after, strict=True):
            if value is ABSENT:
                continue
            got, want = image[col.name], expected(value, col)
            if isinstance(got, dt.datetime) and isinstance(want, dt.datetime):
                got, want = (
                    got.replace(tzinfo=None),
                    want.astimezone(dt.UTC).replace(tzinfo=None) if want.tzinfo else want,
                )
            assert got == want, (col, value, got)
            met.add(col.type)
    assert len(met) >= 15
    # variant_get with the quoted path reads each column of one row the same
    sample = rows[-1]
    c = changes[bytes(sample["order_key"])]
    assert c.layout is not None and c.after is not None
    ints = [
        col
        for col, x in zip(c.layout, c.after, strict=True)
        if isinstance(x, int) and col.type != ColumnType.BIT
    ]
    got = (
        df.where(F.col("order_key") == F.lit(bytes(sample["order_key"])))
        .select(
            *[
                F.variant_get("after", path(col.name) or "", "decimal(38,0)").alias(f"c{i}")
                for i, col in enumerate(ints)
            ]
        )
        .collect()[0]
    )
    assert [int(x) for x in got] == [c.after[c.layout.index(col)] for col in ints]
