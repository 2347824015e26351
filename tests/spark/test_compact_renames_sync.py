"""Review of compaction by table identity (e961d29): a sync reading the last change per key
(``changes=last``, the default) gives the same target tables as one reading every change, over a
series of renames, swaps, drops, truncates, key moves, column renames and MINIMAL images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.spark.apply import sync
from binlake.spark.sinks.delta import delta_tables
from tests.support.written import written

pytestmark = pytest.mark.slow
EVERY = {"changes": "every"}


def both_synced(spark: Any, source: Path, tmp_path: Path, **extra: str) -> None:
    """Sync ``source`` twice (last changes, every change) and compare whole target tables."""
    from deltalake import DeltaTable

    for name, options in (("every", {**EVERY, **extra}), ("last", dict(extra))):
        sync(spark, str(source), tmp_path / name, options=options)
    assert delta_tables(tmp_path / "last") == delta_tables(tmp_path / "every")
    for table in delta_tables(tmp_path / "every"):
        got, want = (
            DeltaTable(str(tmp_path / side / table)).to_pyarrow_table().sort_by("_binlake_order_key")
            for side in ("last", "every")
        )
        assert got.to_pylist() == want.to_pylist(), table


SETUP = [
    "CREATE DATABASE s",
    "CREATE DATABASE t",
    *(f"CREATE TABLE s.{n} (id INT PRIMARY KEY, v INT)" for n in "abcdefghjmpu"),
]
SERIES = [
    # a swap, same keys on both sides
    "INSERT INTO s.a VALUES (1, 1), (2, 2)",
    "INSERT INTO s.b VALUES (1, 10), (2, 20)",
    "RENAME TABLE s.a TO s.tmp, s.b TO s.a, s.tmp TO s.b",
    "UPDATE s.a SET v = 11 WHERE id = 1",
    "UPDATE s.b SET v = 3 WHERE id = 2",
    # across databases, then back
    "INSERT INTO s.c VALUES (1, 1)",
    "RENAME TABLE s.c TO t.c",
    "UPDATE t.c SET v = 2 WHERE id = 1",
    "RENAME TABLE t.c TO s.c",
    "UPDATE s.c SET v = 3 WHERE id = 1",
    # a rename back to the old name, a new table of the name meanwhile
    "INSERT INTO s.d VALUES (1, 1)",
    "RENAME TABLE s.d TO s.d2",
    "CREATE TABLE s.d (id INT PRIMARY KEY, v INT)",
    "INSERT INTO s.d VALUES (1, 100)",
    "DROP TABLE s.d",
    "RENAME TABLE s.d2 TO s.d",
    "UPDATE s.d SET v = 2 WHERE id = 1",
    # drop then create the same name
    "INSERT INTO s.e VALUES (1, 1)",
    "DROP TABLE s.e",
    "CREATE TABLE s.e (id INT PRIMARY KEY, v INT)",
    "INSERT INTO s.e VALUES (1, 5)",
    # truncate
    "INSERT INTO s.f VALUES (1, 1), (2, 2)",
    "TRUNCATE TABLE s.f",
    "INSERT INTO s.f VALUES (1, 7)",
    # renamed, then the new name dropped, the old name made again
    "INSERT INTO s.g VALUES (1, 1)",
    "RENAME TABLE s.g TO s.g2",
    "UPDATE s.g2 SET v = 2 WHERE id = 1",
    "DROP TABLE s.g2",
    "CREATE TABLE s.g (id INT PRIMARY KEY, v INT)",
    "INSERT INTO s.g VALUES (1, 9)",
    "CREATE TABLE s.g2 (id INT PRIMARY KEY, v INT)",
    "INSERT INTO s.g2 VALUES (1, 8)",
    # a key moved, renamed, the old key written again
    "INSERT INTO s.h VALUES (1, 1)",
    "UPDATE s.h SET id = 2 WHERE id = 1",
    "RENAME TABLE s.h TO s.h2",
    "INSERT INTO s.h2 VALUES (1, 4)",
    "UPDATE s.h2 SET id = 3 WHERE id = 2",
    # a column renamed and the table renamed in one ALTER
    "INSERT INTO s.j VALUES (1, 1)",
    "ALTER TABLE s.j RENAME COLUMN v TO w, RENAME TO s.j2",
    "UPDATE s.j2 SET w = 2 WHERE id = 1",
    "ALTER TABLE s.j2 ADD COLUMN z INT DEFAULT 7",
    "RENAME TABLE s.j2 TO s.j3",
    "INSERT INTO s.j3 (id, w) VALUES (2, 2)",
    # a name dropped, another renamed into it
    "INSERT INTO s.m VALUES (1, 1)",
    "INSERT INTO s.p VALUES (1, 50)",
    "DROP TABLE s.m",
    "RENAME TABLE s.p TO s.m",
    "UPDATE s.m SET v = 51 WHERE id = 1",
    # MINIMAL images on a renamed table
    "INSERT INTO s.u VALUES (1, 1), (2, 2)",
    "SET SESSION binlog_row_image = 'MINIMAL'",
    "UPDATE s.u SET v = 3 WHERE id = 1",
    "RENAME TABLE s.u TO s.u2",
    "UPDATE s.u2 SET v = 4 WHERE id = 2",
    "SET SESSION binlog_row_image = 'FULL'",
    "UPDATE s.u2 SET v = 5 WHERE id = 1",
]


def test_renames_swaps_and_drops_sync_alike(spark: Any, own_mariadb: Any, tmp_path: Path) -> None:
    source = written(own_mariadb, SETUP, SERIES, tmp_path / "bin")
    both_synced(spark, source, tmp_path)


def test_the_series_read_in_many_ranges_syncs_alike(spark: Any, own_mariadb: Any, tmp_path: Path) -> None:
    source = written(own_mariadb, SETUP, SERIES, tmp_path / "bin")
    both_synced(spark, source, tmp_path, splitSize="1KB")


def test_a_column_dropped_across_a_rename_then_minimal_images(
    spark: Any, own_mariadb: Any, tmp_path: Path
) -> None:
    """A whole row of ``a`` (with ``c``), ``a`` renamed to ``b`` dropping ``c``, a whole update of
    ``b`` (window 1: replaces the insert), then MINIMAL updates in another file (window 2): the plan
    folds ``b``'s changes, and the insert was the only one with ``c``."""
    own_mariadb.execute("CREATE DATABASE s", "CREATE TABLE s.a (id INT PRIMARY KEY, c INT, v INT)")
    start = len(own_mariadb.flush_binlogs())
    own_mariadb.execute(
        "INSERT INTO s.a VALUES (9, 9, 9)",  # the first of its layout: kept, it carries the columns
        "INSERT INTO s.a VALUES (1, 5, 1)",
        "ALTER TABLE s.a DROP COLUMN c, RENAME TO s.b",
        "UPDATE s.b SET v = 2 WHERE id = 1",
        "FLUSH BINARY LOGS",
        "SET SESSION binlog_row_image = 'MINIMAL'",
        "INSERT INTO s.b VALUES (2, 2)",
        "UPDATE s.b SET v = 3 WHERE id = 2",
    )
    from tests.support.written import closed_since

    source = closed_since(own_mariadb, start, tmp_path / "bin")
    both_synced(spark, source, tmp_path, splitSize="1KB")
