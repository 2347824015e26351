"""A batch's head also tells its table plans when the batch has no DDL and one layout per table
(``plan.simple_tables``, a micro-batch's Spark job saved): they must be what ``table_plans`` finds
over the last change per key — same tables, layouts and kinds, a row count never below it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.generate import generate
from tests.support.written import closed_since

pytestmark = pytest.mark.slow


def both_ways(spark: Any, source: Path, options: dict[str, str] | None = None) -> tuple[Any, list[Any], Any]:
    """The head's table plans (None: not told), ``table_plans``' own, and the head's report, of a
    read with ``options``."""
    from pyspark.sql import functions as F

    from binlake.spark.apply import change_log
    from binlake.spark.plan import planned, table_plans

    with planned(change_log(spark, str(source), options), str(source)) as plan:
        keyless = plan.changes.where(F.col("pk").isNull())
        layouts = plan.contents.layouts
        slow = table_plans(plan.latest, False, layouts) + table_plans(keyless, True, layouts)
        return plan.contents.tables, slow, plan.report


def assert_same(fast: Any, slow: list[Any]) -> None:
    assert [(t.db, t.table, t.layouts, t.keyless) for t in fast] == [
        (t.db, t.table, t.layouts, t.keyless) for t in slow
    ]
    assert all(f.rows >= s.rows for f, s in zip(fast, slow, strict=True))


def test_generated_batch_without_ddl(spark: Any, tmp_path: Path) -> None:
    generate(tmp_path / "bin", seed=11, target_bytes=150_000, max_file_size=100_000, ddl_every=0)
    fast, slow, report = both_ways(spark, tmp_path / "bin")
    assert fast is not None and len(slow) >= 2
    assert_same(fast, slow)
    assert report.changes >= sum(t.rows for t in slow) and report.position


def test_generated_batch_with_ddl_is_planned_by_table_plans(spark: Any, tmp_path: Path) -> None:
    generate(tmp_path / "bin", seed=12, target_bytes=150_000, max_file_size=100_000, ddl_every=60)
    fast, slow, _ = both_ways(spark, tmp_path / "bin")
    assert fast is None  # renames or added columns: the head does not tell
    assert slow


@pytest.mark.parametrize("read", ["plain", "sync"])
def test_key_moves_keyless_tables_and_two_layouts(
    spark: Any, own_mariadb: Any, tmp_path: Path, read: str
) -> None:
    """The same plans from a plain read and from a sync's (the last change per key found in the
    read: the moved key's tombstone made there)."""
    from binlake.spark.apply import SYNC_READ

    options = SYNC_READ if read == "sync" else None
    db = own_mariadb
    db.execute(
        "CREATE DATABASE h",
        "CREATE TABLE h.k (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE h.`_binlake_x` (id INT PRIMARY KEY)",  # a name in binlake's prefix: escaped
        "CREATE TABLE h.nk (a INT, b VARCHAR(10))",
    )
    start = len(db.flush_binlogs())
    db.execute(
        "INSERT INTO h.k VALUES (1, 'a'), (2, 'b')",
        "UPDATE h.k SET id = 10 WHERE id = 1",  # a moved key: a tombstone for 1
        "DELETE FROM h.k WHERE id = 2",
        "INSERT INTO h.`_binlake_x` VALUES (1)",
        "INSERT INTO h.nk VALUES (1, 'x'), (1, 'x')",
        "DELETE FROM h.nk LIMIT 1",
    )
    fast, slow, report = both_ways(spark, closed_since(db, start, tmp_path / "one"), options)
    assert fast is not None
    assert_same(fast, slow)
    rows = {(t.table, t.keyless): t.rows for t in fast}
    assert rows == {("k", False): 4 + 1, ("_binlake__binlake_x", False): 1, ("nk", True): 3}
    assert {(t.table, t.keyless): t.rows for t in slow}[("k", False)] == 3  # 10, 1 (tombstone), 2
    assert report.changes == 8

    db.execute(
        "INSERT INTO h.k VALUES (3, 'c')",
        "ALTER TABLE h.k MODIFY v VARCHAR(20)",  # a second layout of k within the batch
        "INSERT INTO h.k VALUES (4, 'd')",
    )
    fast, slow, _ = both_ways(spark, closed_since(db, start, tmp_path / "two"), options)
    assert fast is None and len(next(t for t in slow if t.table == "k").layouts) == 2


def test_the_head_writes_the_kept_batch_in_its_own_job(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first action over the kept batch (the head) and over the last change per key (the table
    plans of a batch with DDL) write their caches in their own tasks: with adaptive execution on,
    Spark built each cache in a job of its own and read it back from disk in the next (the head:
    three jobs, not one). The session's adaptive setting is back afterwards, and the rows synced."""
    import json

    from binlake.spark import trace
    from binlake.spark.apply import sync
    from binlake.spark.plan import ADAPTIVE

    generate(tmp_path / "bin", seed=13, target_bytes=120_000, max_file_size=100_000, ddl_every=40)
    monkeypatch.setenv(trace.TRACE_ENV, str(tmp_path / "trace.jsonl"))
    assert spark.conf.get(ADAPTIVE) == "true"
    with trace.batch(spark, 0):
        report = sync(spark, str(tmp_path / "bin"), f"delta:{tmp_path / 'lake'}")
    assert spark.conf.get(ADAPTIVE) == "true"
    assert report.changes > 0 and report.tables
    (record,) = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    jobs = [j[0] for j in record["jobs"]]
    assert jobs.count("batch_head") == 1, jobs
    assert "table_plans" in jobs and "renames" in jobs, jobs  # the batch had DDL: the full plan ran


def test_adaptive_off_is_undone_when_an_action_fails(spark: Any) -> None:
    from binlake.spark.plan import ADAPTIVE, adaptive_off

    with pytest.raises(ZeroDivisionError), adaptive_off(spark):
        assert spark.conf.get(ADAPTIVE) == "false"
        _ = 1 / 0
    assert spark.conf.get(ADAPTIVE) == "true"


def test_a_sliced_tables_first_rows_run_without_adaptive_execution(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyed table of more rows than ``chunk_rows`` (its rows collected in slices) of a batch
    without DDL: its first slice is the first action over the last change per key, and runs in
    ``rows`` without adaptive execution, not later when the sink reads the stream (outside
    ``adaptive_off``: Spark built the kept frame in a job of its own and read it back)."""
    from pyspark.sql import functions as F

    from binlake.spark.apply import change_log, sync_options
    from binlake.spark.plan import ADAPTIVE, planned

    generate(tmp_path / "bin", seed=11, target_bytes=150_000, max_file_size=100_000, ddl_every=0)
    frame = type(spark.range(1))
    to_arrow = frame.toArrow
    seen: list[str] = []

    def spied(self: Any) -> Any:
        seen.append(spark.conf.get(ADAPTIVE))
        return to_arrow(self)

    monkeypatch.setattr(frame, "toArrow", spied)
    with planned(change_log(spark, str(tmp_path / "bin"), sync_options(None)), "s") as plan:
        assert plan.contents.tables is not None  # no DDL: the first action over ``latest`` is a table's rows
        t = next(t for t in plan.tables if not (t.keyless or t.partial) and t.rows > 30)
        _, counted = plan.rows(t, chunk_rows=30)
        assert seen == ["false"]  # the first slice, read in ``rows``
        got = counted.stream.read_all()
        assert len(seen) > 1 and set(seen[1:]) == {"true"}  # the rest when read: the session's setting
        expected = plan.latest.where((F.col("db") == t.db) & (F.col("table") == t.table)).count()
    assert got.num_rows == counted.n == expected > 30
    assert spark.conf.get(ADAPTIVE) == "true"
