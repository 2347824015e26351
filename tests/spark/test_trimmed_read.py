"""The ``binlog`` source read as a sync reads it (options ``columns=first``, ``before=keyless``,
``changes=last``: ``arrowlog.changelog.Trim``) and a plan over it: the same tables as a sync of the
plain read, every change counted, layouts found by number, and a batch that lost the rows carrying
a layout's columns refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.demo import compare_to_truth
from binlake.errors import BinlogError, UnappliableChangeError
from binlake.generate import generate
from binlake.spark.apply import SYNC_READ, apply_changes, change_log, sync
from binlake.spark.plan import batch_layouts
from binlake.spark.sinks.delta import delta_tables
from tests.support.written import written

pytestmark = pytest.mark.slow
PLAIN = {"columns": "every", "before": "every", "changes": "every"}


def test_trimmed_read_columns_once_and_no_keyed_before(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    generate(tmp_path / "bin", seed=3, target_bytes=120_000, max_file_size=60_000, ddl_every=15)
    plain = change_log(spark, str(tmp_path / "bin"), PLAIN)
    trimmed = change_log(spark, str(tmp_path / "bin"), {**SYNC_READ, "changes": "every", "splitSize": "20KB"})
    assert trimmed.columns == [*plain.columns, "layout"]
    assert trimmed.count() == plain.count()
    rows = trimmed.where(F.col("op").isin("insert", "update", "delete"))
    carried = rows.where(F.col("columns").isNotNull()).count()
    ranges = trimmed.rdd.getNumPartitions()
    layouts = rows.select("layout").distinct().count()
    # each range carries each of its layouts once: at least one per layout, at most one per range
    assert layouts <= carried <= layouts * ranges < rows.count()
    assert (
        rows.where(F.col("layout").isNull() | (F.col("pk").isNotNull() & F.col("before").isNotNull())).count()
        == 0
    )
    assert plain.where(F.col("pk").isNotNull() & F.col("before").isNotNull()).count() > 0
    with pytest.raises(Exception, match="option columns: every or first"):
        change_log(spark, str(tmp_path / "bin"), {"columns": "some"}).count()


def test_a_read_of_the_last_changes_counts_every_change(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    generate(
        tmp_path / "bin", seed=6, target_bytes=150_000, max_file_size=None, ddl_every=60, keys_per_table=40
    )
    plain = change_log(spark, str(tmp_path / "bin"), PLAIN)
    last = change_log(spark, str(tmp_path / "bin"), {**SYNC_READ, "splitSize": "0"})  # one range
    assert last.columns == [*plain.columns, "layout", "changes", "partial", "json_edits"]
    row_ops = F.col("op").isin("insert", "update", "delete")
    changes = plain.where(row_ops).count()
    kept = last.where(row_ops).count()
    assert kept < changes / 2  # 40 keys a table: most changes are replaced within a range
    assert last.where(row_ops).agg(F.sum("changes")).first()[0] == changes
    assert last.where(~row_ops).count() == plain.where(~row_ops).count()  # DDL changes, every one


def test_sync_of_the_trimmed_read_equals_the_plain_one(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    result = generate(tmp_path / "bin", seed=8, target_bytes=150_000, max_file_size=50_000, ddl_every=12)
    for name, options in (("plain", PLAIN), ("trimmed", {"splitSize": "16KB"})):
        report = sync(spark, str(tmp_path / "bin"), tmp_path / name, options=options)
        assert report.changes > 500
    assert delta_tables(tmp_path / "plain") == delta_tables(tmp_path / "trimmed")
    for table in delta_tables(tmp_path / "plain"):  # whole tables: tombstones and order keys too
        got, want = (
            DeltaTable(str(tmp_path / side / table)).to_pyarrow_table().sort_by("_binlake_order_key")
            for side in ("trimmed", "plain")
        )
        assert got.equals(want), table
    assert all(got == want for got, want in compare_to_truth(result.truth_dir, tmp_path / "trimmed").values())


def test_a_batch_without_a_layouts_columns_is_refused(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    generate(tmp_path / "bin", seed=4, target_bytes=40_000, max_file_size=None, ddl_every=0)
    df = change_log(spark, str(tmp_path / "bin"), SYNC_READ)
    without_firsts = df.where(F.col("columns").isNull())  # every row that named a layout's columns
    with pytest.raises(BinlogError, match="columns of layout .* are in none of the batch's rows"):
        apply_changes(without_firsts, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not delta_tables(tmp_path / "out")


def test_two_column_lists_under_one_number_are_refused() -> None:
    a, b = ["a"], ["b"]
    group = {"layout": 7, "columns": a, "columns_max": a}
    assert batch_layouts([group]) == {7: a}
    with pytest.raises(BinlogError, match="hash collision"):
        batch_layouts([group, {"layout": 7, "columns": b, "columns_max": b}])
    with pytest.raises(BinlogError, match="hash collision"):
        batch_layouts([{"layout": 7, "columns": a, "columns_max": b}])
    assert batch_layouts([group, {"layout": 7, "columns": None, "columns_max": None}]) == {7: a}


@pytest.mark.parametrize("read", ["plain", "sync"])
def test_minimal_images_keep_the_columns_an_update_leaves_out(
    spark: Any, own_mariadb: Any, tmp_path: Path, read: str
) -> None:
    """``binlog_row_image=MINIMAL``: an update's after image holds only the columns it changed. The
    plan applies a key's last change alone, so a column its last update left out must keep the value
    an earlier change (in this batch or held by the target) gave it — whatever the read (the plain
    one, or a sync's that keeps only the last change per key)."""
    from deltalake import DeltaTable

    source = written(
        own_mariadb,
        ["CREATE DATABASE m", "CREATE TABLE m.t (id INT PRIMARY KEY, name VARCHAR(10), v INT)"],
        [
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "INSERT INTO m.t VALUES (1, 'a', 10), (2, 'b', 20)",
            "UPDATE m.t SET v = 11 WHERE id = 1",
            "UPDATE m.t SET name = 'c' WHERE id = 1",
        ],
        tmp_path / "bin",
    )
    sync(spark, str(source), tmp_path / "lake", options=PLAIN if read == "plain" else None)
    (table,) = delta_tables(tmp_path / "lake")
    got = DeltaTable(str(tmp_path / "lake" / table)).to_pyarrow_table(columns=["id", "name", "v"])
    assert sorted(tuple(r.values()) for r in got.to_pylist()) == [(1, "c", 11), (2, "b", 20)]


@pytest.mark.parametrize("read", ["plain", "sync"])
def test_a_partial_json_update_replaced_by_a_minimal_one_is_refused(
    spark: Any, mysql: Any, tmp_path: Path, read: str
) -> None:
    """A partial JSON update (``PARTIAL_JSON``, MINIMAL images) followed by an update of another
    column of the row: the later change's after image does not carry the document, so the partial
    update's edit is in no change a sink could apply — the batch is refused, whatever the read
    (keeping only the last change per key must not turn a refusal into a document lost)."""
    source = written(
        mysql,
        [
            "CREATE DATABASE IF NOT EXISTS pj",
            f"CREATE TABLE pj.t_{read} (id INT PRIMARY KEY, doc JSON, v INT)",
        ],
        [
            "SET SESSION binlog_row_image = 'MINIMAL'",
            "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
            f'INSERT INTO pj.t_{read} VALUES (1, \'{{"a": 1, "b": "{"x" * 200}"}}\', 0)',
            f"UPDATE pj.t_{read} SET doc = JSON_SET(doc, '$.a', 2) WHERE id = 1",
            f"UPDATE pj.t_{read} SET v = 5 WHERE id = 1",
        ],
        tmp_path / "bin",
    )
    with pytest.raises(UnappliableChangeError):
        sync(spark, str(source), tmp_path / "lake", options=PLAIN if read == "plain" else None)


def test_a_sync_cuts_its_read_into_a_few_ranges_per_core(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync reads in about ``RANGES_PER_CORE`` ranges per core (each range keeps about one
    change per key, and each kept row costs the JVM), never in ranges smaller than the source's
    default or bigger than ``MAX_SYNC_SPLIT``; a ``splitSize`` the user gives, and a merged read of
    nodes, are left alone."""
    from binlake.sizes import parse_size
    from binlake.spark import apply, source
    from binlake.spark.apply import RANGES_PER_CORE, sync_options

    generate(tmp_path / "bin", seed=4, target_bytes=400_000, max_file_size=None)
    (path,) = sorted((tmp_path / "bin").glob("binlog.0*"))
    cores = spark.sparkContext.defaultParallelism
    src = str(tmp_path / "bin")
    # the default floor: a small series is read in ranges of the default size, as before
    assert sync_options(None, spark, src)["splitSize"] == str(parse_size(source.DEFAULT_SPLIT))
    monkeypatch.setattr(source, "DEFAULT_SPLIT", "8KB")  # a floor this series is far above
    options = sync_options(None, spark, src)
    split = int(options["splitSize"])
    assert split == -(-path.stat().st_size // (RANGES_PER_CORE * cores)) > parse_size("8KB")
    ranges = change_log(spark, src, options).rdd.getNumPartitions()
    assert cores <= ranges <= RANGES_PER_CORE * cores
    # against the floor's ranges: many more
    assert change_log(spark, src, {**SYNC_READ, "splitSize": "8KB"}).rdd.getNumPartitions() > 2 * ranges
    # and never bigger than MAX_SYNC_SPLIT (a session that counts few cores yet)
    monkeypatch.setattr(apply, "MAX_SYNC_SPLIT", split // 2)
    assert sync_options(None, spark, src)["splitSize"] == str(split // 2)
    assert sync_options({"splitSize": "16KB"}, spark, src)["splitSize"] == "16KB"
    assert "splitSize" not in sync_options({"nodes": "true"}, spark, src)
    assert "splitSize" not in sync_options(None, spark, str(tmp_path / "missing"))
