"""The batch ``binlog`` source: big files split at transaction boundaries read the same change log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.generate import generate

pytestmark = pytest.mark.slow


def test_split_files_give_the_same_change_log(spark: Any, tmp_path: Path) -> None:
    generate(tmp_path / "bin", seed=5, target_bytes=400_000, max_file_size=250_000, ddl_every=0)
    whole = spark.read.format("binlog").option("splitSize", "0").load(str(tmp_path / "bin"))
    split = spark.read.format("binlog").option("splitSize", "40KB").load(str(tmp_path / "bin"))
    assert whole.rdd.getNumPartitions() == 2
    assert split.rdd.getNumPartitions() >= 8
    rows = sorted(tuple(r) for r in whole.collect())
    assert len(rows) > 1000
    assert sorted(tuple(r) for r in split.collect()) == rows
    keys = [r["order_key"] for r in split.select("order_key").collect()]
    assert len(keys) == len(set(keys)) == len(rows)  # order keys are unique per row: nothing doubled


def test_selection_options_match_filtering_the_whole_change_log(spark: Any, tmp_path: Path) -> None:
    """databases/tables/operations/startDatetime read the same rows as filtering everything by hand."""
    import datetime as dt

    generate(tmp_path / "bin", seed=8, target_bytes=200_000, max_file_size=100_000, ddl_every=0)
    whole = spark.read.format("binlog").load(str(tmp_path / "bin")).collect()
    times = sorted({r["commit_ts"] for r in whole})
    cut = times[len(times) // 2]
    expected = sorted(
        tuple(r)
        for r in whole
        if r["table"] == "orders" and r["op"] in ("update", "delete") and r["commit_ts"] >= cut
    )
    got = (
        spark.read.format("binlog")
        .option("tables", "shop.ord*")
        .option("operations", "update,delete")
        .option("startDatetime", cut.astimezone(dt.timezone.utc).isoformat())
        .load(str(tmp_path / "bin"))
        .collect()
    )
    assert len(expected) > 20
    assert sorted(tuple(r) for r in got) == expected
    only_db = spark.read.format("binlog").option("databases", "nosuchdb").load(str(tmp_path / "bin"))
    assert only_db.count() == 0


def test_streaming_ranges_split_like_batch_ones(tmp_path: Path) -> None:
    """The stream reader cuts a big micro-batch range at transaction boundaries too; the ranges'
    change log is the unsplit one, row for row."""
    from binlake.spark.stream import BinlogStreamReader

    generate(tmp_path / "bin", seed=6, target_bytes=300_000, max_file_size=200_000, ddl_every=0)

    def rows(split: str) -> tuple[int, list[dict]]:
        reader = BinlogStreamReader({"path": str(tmp_path / "bin"), "splitsize": split})
        parts = reader.partitions(reader.initialOffset(), reader.latestOffset())
        out = [r for p in parts for batch in reader.read(p) for r in batch.to_pylist()]
        return len(parts), out

    n_whole, whole = rows("0")
    n_split, split = rows("30KB")
    assert n_whole == 2 and n_split >= 8
    assert len(whole) > 500 and split == whole


def test_pushed_filters_prune_at_the_source_and_read_the_same(spark: Any, tmp_path: Path) -> None:
    """Spark filters on db/table/op/commit_ts reach the reader (only matching rows are built there)
    and the query reads exactly what filtering the whole change log gives."""
    import datetime as dt

    from pyspark.sql import functions as F
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In

    from binlake.spark.source import BinlogReaderSpark

    generate(tmp_path / "bin", seed=9, target_bytes=200_000, max_file_size=100_000, ddl_every=0)
    path = str(tmp_path / "bin")
    df = spark.read.format("binlog").load(path)
    whole = df.collect()
    tables = sorted({r["table"] for r in whole})
    assert len(tables) >= 3
    times = sorted({r["commit_ts"] for r in whole})
    cut = times[len(times) // 3]
    queries = [
        (F.col("table") == tables[0], lambda r: r["table"] == tables[0]),
        (F.col("op").isin("update", "delete"), lambda r: r["op"] in ("update", "delete")),
        (
            (F.col("table").isin(tables[0], tables[1]))
            & (F.col("commit_ts") >= cut)
            & (F.col("op") != "insert"),
            lambda r: r["table"] in tables[:2] and r["commit_ts"] >= cut and r["op"] != "insert",
        ),
        (
            (F.col("commit_ts") <= cut) & (F.col("commit_ts") > times[2]),
            lambda r: times[2] < r["commit_ts"] <= cut,
        ),
        ((F.col("table") == tables[0]) & (F.col("table") == tables[1]), lambda r: False),
        (F.col("db") == "nowhere", lambda r: False),
    ]
    for condition, keep in queries:
        got = sorted(tuple(r) for r in df.where(condition).collect())
        assert got == sorted(tuple(r) for r in whole if keep(r)), condition

    # the reader itself, given the pushed filters, builds only the selected rows
    reader = BinlogReaderSpark({"path": path})
    pushed = [
        EqualTo(("table",), tables[0]),
        In(("op",), ("update",)),
        GreaterThanOrEqual(("commit_ts",), cut),
    ]
    assert list(reader.pushFilters(pushed)) == pushed  # every filter is still evaluated by Spark too
    built = [row for part in reader.partitions() for batch in reader.read(part) for row in batch.to_pylist()]
    want = [r for r in whole if r["table"] == tables[0] and r["op"] == "update" and r["commit_ts"] >= cut]
    assert built and len(built) == len(want)
    assert {(r["table"], r["op"]) for r in built} == {(tables[0], "update")}
    cut_utc = cut if cut.tzinfo else cut.astimezone(dt.timezone.utc)  # Spark gives local naive times
    assert min(r["commit_ts"] for r in built) >= cut_utc
