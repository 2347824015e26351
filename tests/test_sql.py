"""Redo SQL replayed into an empty server reproduces the source tables; flashback SQL undoes a range
exactly. Real private MariaDB servers, SELECT as the truth."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from binlake.filters import Selection
from binlake.render.sql import literal, quote_str, render_sql
from binlake.sandbox import PrivateMariaDB
from binlake.series import BinlogSeries
from binlake.txn import iter_transactions
from binlake.values import ColumnDef, Json, MysqlDate, MysqlDateTime
from binlake.values.types import ColumnType
from tests.support.alltypes import run_workload

pytestmark = pytest.mark.slow


def dump_table(db: PrivateMariaDB, database: str, table: str) -> list[tuple]:
    conn = db.connect(database)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT * FROM `{table}` ORDER BY 1")
        rows = list(cur.fetchall())
    conn.close()
    return rows


def sql_for(files: list[Path], flashback: bool = False, **selection: Any) -> list[str]:
    sel = Selection(**selection)
    txns = []
    for t in iter_transactions(BinlogSeries.open(*files).events()):
        if sel.keeps(t):
            t.events = [e for e in t.events if sel.keeps_event(t, e)]
            txns.append(t)
    return list(render_sql(txns, flashback=flashback))


def run_sql(db: PrivateMariaDB, lines: list[str]) -> None:
    conn = db.connect()
    with conn.cursor() as cur:
        for line in lines:
            if line and not line.startswith("--"):
                cur.execute(line)
    conn.close()


def test_redo_sql_reproduces_the_source(mariadb: Any, tmp_path: Path) -> None:
    run_workload(mariadb, database="redo_src")
    mariadb.execute(
        "ALTER TABLE redo_src.alltypes ADD COLUMN extra INT DEFAULT 7",
        "UPDATE redo_src.alltypes SET extra = id * 2",
    )
    files = mariadb.flush_binlogs()[:-1]
    lines = sql_for(files, databases=["redo_src"])
    assert any(line.startswith("UPDATE") for line in lines) and any(
        line.startswith("DELETE") for line in lines
    )
    with PrivateMariaDB(tmp_path / "replica") as replica:
        run_sql(replica, lines)
        assert dump_table(replica, "redo_src", "alltypes") == dump_table(mariadb, "redo_src", "alltypes")


def test_flashback_undoes_a_range(mariadb: Any) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS fb",
        "CREATE TABLE fb.acct (id INT PRIMARY KEY, owner VARCHAR(40), balance DECIMAL(12,2), t DATETIME(6), note TEXT, flag BIT(3))",
        "CREATE TABLE fb.nokey (a INT, b VARCHAR(10), f FLOAT)",
        "INSERT INTO fb.acct VALUES (1, 'ann', 100.00, '2024-01-01 00:00:00.5', NULL, b'101'), (2, 'bob', 50.25, NULL, 'x', b'0')",
        "INSERT INTO fb.nokey VALUES (1, 'a', 0.1), (1, 'a', 0.1), (2, NULL, NULL)",
    )
    before = (dump_table(mariadb, "fb", "acct"), dump_table(mariadb, "fb", "nokey"))
    first = len(mariadb.flush_binlogs()) - 1
    mariadb.execute(
        "UPDATE fb.acct SET balance = balance - 30, note = 'it''s \\\\ moved' WHERE id = 1",
        "INSERT INTO fb.acct VALUES (3, 'cy', 0.00, '2025-05-05 05:05:05', 'new', b'111')",
        "DELETE FROM fb.acct WHERE id = 2",
        "UPDATE fb.acct SET id = 20 WHERE id = 3",
        "UPDATE fb.nokey SET b = 'z' WHERE a = 1 LIMIT 1",
        "DELETE FROM fb.nokey WHERE a = 2",
        "INSERT INTO fb.nokey VALUES (9, 'nine', 9.5)",
    )
    files = mariadb.flush_binlogs()[first:-1]
    assert dump_table(mariadb, "fb", "acct") != before[0]
    run_sql(mariadb, sql_for(files, flashback=True, databases=["fb"]))
    assert (dump_table(mariadb, "fb", "acct"), dump_table(mariadb, "fb", "nokey")) == before


def test_literals_are_exact() -> None:
    def lit(v: Any, t: int, meta: int = 0) -> str:
        return literal(v, ColumnDef(0, t, meta, True, name="c"))

    assert quote_str("a'b\\c\0\n") == "'a\\'b\\\\c\\0\\n'"
    assert lit(Decimal("-0.000000001"), ColumnType.NEWDECIMAL, (10 << 8) | 9) == "-0.000000001"
    assert lit(b"\x00\xff", ColumnType.BLOB, 2) == "X'00ff'"
    assert lit(MysqlDate(0, 0, 0), ColumnType.DATE) == "'0000-00-00'"
    assert (
        lit(MysqlDateTime(2013, 0, 0, 0, 0, 0, 500000), ColumnType.DATETIME2, 2) == "'2013-00-00 00:00:00.50'"
    )
    assert (
        lit(-dt.timedelta(hours=16, minutes=8, seconds=4, milliseconds=250), ColumnType.TIME2, 3)
        == "'-16:08:04.250'"
    )
    assert (
        lit(dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=dt.UTC), ColumnType.TIMESTAMP2, 0)
        == "'2038-01-19 03:14:07'"
    )
    assert lit(5, ColumnType.BIT, (1 << 8) | 5) == "b'0000000000101'"
    assert lit(Json({"a": [1, None]}), ColumnType.JSON, 4) == """'{"a": [1, null]}'"""
    assert lit(0.1, ColumnType.DOUBLE, 8) == "0.1"
