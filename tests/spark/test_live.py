"""End to end against a real MariaDB: every column type, DDL between DMLs; `binlake sync` of its
binlogs gives Delta tables equal to SELECT * of the source tables."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from binlake.spark.apply import delta_tables, read_delta, sync_to_delta
from binlake.values.temporal import format_time
from tests.support.alltypes import run_workload, select_rows

pytestmark = pytest.mark.slow


def same(delta_value: Any, selected: Any, column: str) -> bool:
    if delta_value is None or selected is None:
        if (
            isinstance(selected, str)
            and selected.startswith("0000")
            or (isinstance(selected, str) and "-00" in selected)
        ):
            return delta_value is None  # zero dates are NULL in typed tables (exact in the change log)
        return delta_value is None and selected is None
    if isinstance(selected, float) and isinstance(delta_value, float) and column == "f":
        return struct.pack("<f", selected) == struct.pack("<f", delta_value)
    if isinstance(selected, dt.timedelta):
        return delta_value == format_time(selected, 6)[: len(delta_value)] or delta_value.rstrip("0").rstrip(
            "."
        ) == format_time(selected, 6).rstrip("0").rstrip(".")
    if isinstance(selected, dt.datetime) and isinstance(delta_value, dt.datetime):
        return delta_value.replace(tzinfo=None) == selected
    if column.startswith("b") and column[1:].isdigit():
        return int(delta_value) == int.from_bytes(selected, "big")
    if column == "s":
        return set(filter(None, delta_value.split(","))) == (
            selected if isinstance(selected, set) else set(filter(None, selected.split(",")))
        )
    if isinstance(selected, Decimal):
        return Decimal(delta_value) == selected
    if isinstance(selected, str) and column in ("dte", "dtt", "dtt2", "dtt6", "ts", "ts4"):
        return delta_value is None  # zero / partial date
    return delta_value == selected


def test_mariadb_to_delta_equals_select(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    run_workload(mariadb, database="lake")
    mariadb.execute(
        "ALTER TABLE lake.alltypes ADD COLUMN added INT DEFAULT 5",
        "UPDATE lake.alltypes SET added = id WHERE id > 2",
    )
    files = mariadb.flush_binlogs()[:-1]
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    for f in files:
        (binlogs / f.name).write_bytes(f.read_bytes())
    sync_to_delta(spark, str(binlogs), tmp_path / "delta")
    got = {r["id"]: r for r in read_delta(tmp_path / "delta", "lake.alltypes").to_pylist()}
    want = select_rows(mariadb, "lake")
    assert sorted(got) == sorted(want)
    # documented limit: ADD COLUMN … DEFAULT fills existing rows without row events, so rows untouched
    # since the ALTER (ids 1 and 2 here) read NULL in that column
    assert [got[pk]["added"] for pk in (1, 2)] == [None, None]
    bad = [
        (pk, col, got[pk].get(col), v)
        for pk, row in want.items()
        for col, v in row.items()
        if not (col == "added" and pk in (1, 2)) and not same(got[pk].get(col), v, col)
    ]
    assert not bad, bad[:8]


def test_mariadb_to_postgres_equals_select(spark: Any, mariadb: Any, postgres: Any, tmp_path: Path) -> None:
    """The same workload through the JDBC sink: PostgreSQL tables equal SELECT * of MariaDB."""
    from binlake.spark.jdbc import sync_to_jdbc

    run_workload(mariadb, database="lakepg")
    files = mariadb.flush_binlogs()[:-1]
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    for f in files:
        (binlogs / f.name).write_bytes(f.read_bytes())
    # one sync job per target table: the server's other databases went to this PostgreSQL from other
    # sources (tests), whose renames this source's journal does not know
    sync_to_jdbc(spark, str(binlogs), postgres.url, options={"databases": "lakepg"})
    df = spark.read.jdbc(postgres.url, '"lakepg"."alltypes"', properties={"driver": "org.postgresql.Driver"})
    got = {r["id"]: r.asDict() for r in df.collect()}
    want = select_rows(mariadb, "lakepg")
    assert sorted(got) == sorted(want) and len(want) > 3
    bad = [
        (pk, col, got[pk].get(col), v)
        for pk, row in want.items()
        for col, v in row.items()
        if not same(got[pk].get(col), v, col)
    ]
    assert not bad, bad[:8]


@pytest.mark.parametrize("batches", [1, 2])
def test_ddl_policy_in_delta(spark: Any, mariadb: Any, tmp_path: Path, batches: int) -> None:
    """The JDBC sinks' DDL workload (type change, DROP/RENAME COLUMN, RENAME TABLE) into Delta: the
    same policy and the same rows, in one batch or two."""
    from tests.spark.test_jdbc import DDL_EXPECTED_T2, assert_same_as_source, ddl_binlogs

    db = f"ddlpol_delta_{batches}"
    files = ddl_binlogs(mariadb, db, tmp_path)
    target = tmp_path / "delta"
    if batches == 2:
        sync_to_delta(spark, str(files[0]), target, options={"databases": db})
    sync_to_delta(spark, str(files[0].parent), target, options={"databases": db})
    t2 = read_delta(target, f"{db}.t2")
    assert {r["id"]: (r["a"], r["bb"], r["c"]) for r in t2.to_pylist()} == DDL_EXPECTED_T2
    assert "b" not in t2.column_names and str(t2.schema.field("a").type) == "int64"
    t = read_delta(target, f"{db}.t").to_pylist()
    assert t == [{"id": 1, "z": -1}]
    assert_same_as_source(mariadb, db, {"t": t, "t2": t2.to_pylist()})
    assert sorted(delta_tables(target)) == [f"{db}.t", f"{db}.t2"]
