"""Syncs of sources logging MINIMAL or NOBLOB row images (an update's after image holds only the
columns it changed, or no BLOB/TEXT it did not change): every target keeps what an image leaves
out, against ``SELECT *`` of the real server that wrote the binlogs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import UnappliableChangeError
from binlake.spark.apply import sync
from binlake.spark.sinks.delta import read_table
from tests.conftest import select_all
from tests.spark.test_jdbc import jdbc_tables
from tests.support.written import written

PLAIN = {"columns": "every", "before": "every", "changes": "every"}
_names = itertools.count()


def unique(base: str) -> str:
    """A database name no other test on a shared server uses."""
    return f"{base}{next(_names)}_{__import__('os').getpid()}"


def in_steps(db: Any, tmp_path: Path, steps: list[tuple[list[str], list[str]]]) -> Iterator[Path]:
    """Run each step's (setup, statements) on ``db`` and yield the binlog files it wrote (a
    directory per step: a later sync reads the new changes alone, as a stream's next batch does,
    so what an image leaves out is in the target only)."""
    for i, (setup, statements) in enumerate(steps):
        yield written(db, setup, statements, tmp_path / f"step{i}")


def synced(
    spark: Any, db: Any, tmp_path: Path, steps: list[tuple[list[str], list[str]]], target: Any, **kw: Any
) -> Any:
    """Each step run on ``db`` and synced into ``target`` in turn; the last sync's report."""
    report = None
    for source in in_steps(db, tmp_path, steps):
        report = sync(spark, str(source), target, **kw)
    return report


def live_rows(target: Path, db: str, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows a Delta target holds (tombstones left out), as tuples of ``columns`` (all it has but
    binlake's own: no staged flag became a column), sorted."""
    rows = read_table(target, db, table)
    assert rows.column_names == columns
    return sorted(tuple(r.values()) for r in rows.to_pylist())


UPDATES = [
    "SET SESSION binlog_row_image = 'MINIMAL'",
    "UPDATE {t} SET v = 11 WHERE id = 1",
    "UPDATE {t} SET note = NULL WHERE id = 1",  # a NULL an update sets: written, not kept
    "UPDATE {t} SET name = 'bb' WHERE id = 2",
    "UPDATE {t} SET v = 21 WHERE id = 2",
    "DELETE FROM {t} WHERE id = 3",
    "INSERT INTO {t} VALUES (3, 'c2', 31, 'w')",
    "UPDATE {t} SET v = 32 WHERE id = 3",
    "INSERT INTO {t} VALUES (5, 'e', 50, 'r')",
    "UPDATE {t} SET note = 'rr' WHERE id = 5",
    "UPDATE {t} SET v = 41 WHERE id = 4",
    "UPDATE {t} SET v = 42 WHERE id = 4",
]


def scenario(name: str) -> list[tuple[list[str], list[str]]]:
    """Rows written whole, then (a second sync) MINIMAL updates of one column at a time, a NULL
    set, a delete and insert again, a row inserted and updated within the batch."""
    db, t = name.split(".")
    return [
        (
            [f"CREATE DATABASE {db}"],
            [
                f"CREATE TABLE {t_(name)} (id INT PRIMARY KEY, name VARCHAR(10), v INT, note VARCHAR(10))",
                f"INSERT INTO {t_(name)} VALUES (1, 'a', 10, 'x'), (2, 'b', 20, 'y'), (3, 'c', 30, 'z'), (4, 'd', 40, 'q')",
            ],
        ),
        ([], [s.format(t=t_(name)) for s in UPDATES]),
    ]


def t_(name: str) -> str:
    return ".".join(f"`{n}`" for n in name.split("."))


@pytest.mark.parametrize(("server", "read"), [("mariadb", "sync"), ("mariadb", "plain"), ("mysql", "sync")])
def test_delta_keeps_the_columns_minimal_updates_leave_out(
    spark: Any, request: Any, tmp_path: Path, server: str, read: str
) -> None:
    """The target row of a key whose last changes left columns out keeps them from the key's
    earlier changes of the batch, or from the target (a sync before); a column an update sets to
    NULL is NULL. Whatever the read (a sync's keeps only the last change per key elsewhere)."""
    db = request.getfixturevalue(server)
    name = f"{unique('mi')}.t"
    options = PLAIN if read == "plain" else None
    report = synced(spark, db, tmp_path, scenario(name), tmp_path / "lake", options=options)
    assert not report.warnings  # every insert names every column
    schema, table = name.split(".")
    got = live_rows(tmp_path / "lake", schema, table, ["id", "name", "v", "note"])
    assert got == select_all(db, schema, table)
    assert got == [
        (1, "a", 11, None),
        (2, "bb", 21, "y"),
        (3, "c2", 32, "w"),
        (4, "d", 42, "q"),
        (5, "e", 50, "rr"),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("sink", ["postgres", "sink_mariadb"])
def test_jdbc_keeps_the_columns_minimal_updates_leave_out(
    spark: Any, mariadb: Any, request: Any, tmp_path: Path, sink: str
) -> None:
    """The same over JDBC: a row the target holds is updated in the columns the batch set alone
    (``Dialect.update_present``), and the staged flags never become target columns."""
    target = request.getfixturevalue(sink)
    name = f"{unique('mj')}.t"
    synced(spark, mariadb, tmp_path, scenario(name), target.url)
    driver = "org.postgresql.Driver" if sink == "postgres" else "org.mariadb.jdbc.Driver"
    url = target.url if sink == "postgres" else target.url.replace("jdbc:mariadb:", "jdbc:mysql:")
    (got,) = jdbc_tables(spark, url, [name], driver, '"').values()
    schema, table = name.split(".")
    assert [tuple(r.values()) for r in got] == select_all(mariadb, schema, table)
    assert all(set(r) == {"id", "name", "v", "note"} for r in got)


def test_a_column_renamed_between_minimal_updates(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """A key updated, its column renamed, the key updated in another column: the target's column
    under its new name holds the first update's value (the fold reads every layout of the batch)."""
    db = unique("r")
    synced(
        spark,
        mariadb,
        tmp_path,
        [
            (
                [f"CREATE DATABASE {db}"],
                [
                    f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT, w INT)",
                    f"INSERT INTO {db}.t VALUES (1, 1, 1), (2, 2, 2)",
                ],
            ),
            (
                [],
                [
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    f"UPDATE {db}.t SET v = 10 WHERE id = 1",
                    f"ALTER TABLE {db}.t RENAME COLUMN v TO v2",
                    f"UPDATE {db}.t SET w = 30 WHERE id = 1",
                    f"UPDATE {db}.t SET w = 20 WHERE id = 2",
                ],
            ),
        ],
        tmp_path / "lake",
    )
    got = live_rows(tmp_path / "lake", db, "t", ["id", "v2", "w"])
    assert got == select_all(mariadb, db, "t") == [(1, 10, 30), (2, 2, 20)]


def test_noblob_updates_keep_the_text_they_leave_out(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """``binlog_row_image=NOBLOB``: an update that does not change a TEXT column leaves it out of
    its after image; the target keeps it."""
    db = unique("nb")
    synced(
        spark,
        mariadb,
        tmp_path,
        [
            (
                [f"CREATE DATABASE {db}"],
                [
                    f"CREATE TABLE {db}.t (id INT PRIMARY KEY, body TEXT, v INT)",
                    f"INSERT INTO {db}.t VALUES (1, 'long text', 1)",
                ],
            ),
            ([], ["SET SESSION binlog_row_image = 'NOBLOB'", f"UPDATE {db}.t SET v = 2 WHERE id = 1"]),
        ],
        tmp_path / "lake",
    )
    assert live_rows(tmp_path / "lake", db, "t", ["id", "body", "v"]) == [(1, "long text", 2)]


def test_a_minimal_primary_key_update_is_refused(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """A MINIMAL update of the primary key logs the new key alone: the row's other values are in
    the old key's row, which the binlog does not hold. Refused before anything is written."""
    db = unique("pk")
    steps = in_steps(
        mariadb,
        tmp_path,
        [
            (
                [f"CREATE DATABASE {db}"],
                [f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES (1, 10)"],
            ),
            (
                [],
                [
                    "SET SESSION binlog_row_image = 'MINIMAL'",
                    f"UPDATE {db}.t SET v = 11 WHERE id = 1",
                    f"UPDATE {db}.t SET id = 9 WHERE id = 1",
                ],
            ),
        ],
    )
    sync(spark, str(next(steps)), tmp_path / "lake")
    with pytest.raises(UnappliableChangeError, match="primary-key update") as refused:
        sync(spark, str(next(steps)), tmp_path / "lake")
    assert refused.value.table == f"{db}.t" and refused.value.offset > 0
    assert live_rows(tmp_path / "lake", db, "t", ["id", "v"]) == [(1, 10)]  # nothing of the batch


def test_minimal_inserts_name_the_defaults_they_lack(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """A MINIMAL insert logs the columns the statement named: the others got their DEFAULT on the
    server, which the binlog does not carry. The report says so for the table; NULL is written."""
    db = unique("df")
    report = synced(
        spark,
        mariadb,
        tmp_path,
        [
            (
                [
                    f"CREATE DATABASE {db}",
                    f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT DEFAULT 7, w INT)",
                ],
                ["SET SESSION binlog_row_image = 'MINIMAL'", f"INSERT INTO {db}.t (id, w) VALUES (1, 5)"],
            )
        ],
        tmp_path / "lake",
    )
    assert [w for w in report.warnings if "DEFAULT" in w and w.startswith(f"{db}.t:")]
    assert live_rows(tmp_path / "lake", db, "t", ["id", "v", "w"]) == [(1, None, 5)]


def test_a_keyless_minimal_update_keeps_what_its_before_image_holds(
    spark: Any, mysql: Any, tmp_path: Path
) -> None:
    """MySQL logs a MINIMAL update of a table without a key with its whole before image and the
    changed columns after: the change table's row holds the unchanged columns from the before."""
    db = unique("kl")
    synced(
        spark,
        mysql,
        tmp_path,
        [
            (
                [
                    f"CREATE DATABASE {db}",
                    f"CREATE TABLE {db}.k (a INT, b INT, c INT)",
                    f"INSERT INTO {db}.k VALUES (1, 2, 3)",
                ],
                ["SET SESSION binlog_row_image = 'MINIMAL'", f"UPDATE {db}.k SET b = 5 WHERE a = 1"],
            )
        ],
        tmp_path / "lake",
    )
    rows = read_table(tmp_path / "lake", db, "k").to_pylist()
    assert [(r["_binlake_op"], r["a"], r["b"], r["c"]) for r in rows] == [("update", 1, 5, 3)]


def add_column_steps(db: str) -> list[tuple[list[str], list[str]]]:
    """A row synced before; then (MINIMAL) a row inserted, a column added with a DEFAULT (the
    server gives every row it), and both rows updated in another column: neither update's image
    holds the new column."""
    return [
        (
            [f"CREATE DATABASE {db}"],
            [f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES (1, 10)"],
        ),
        (
            [],
            [
                "SET SESSION binlog_row_image = 'MINIMAL'",
                f"INSERT INTO {db}.t VALUES (2, 20)",
                f"ALTER TABLE {db}.t ADD COLUMN w INT NOT NULL DEFAULT 7",
                f"UPDATE {db}.t SET v = 11 WHERE id = 1",
                f"UPDATE {db}.t SET v = 21 WHERE id = 2",
            ],
        ),
    ]


def test_delta_a_column_added_between_minimal_changes(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """A key inserted before an ADD COLUMN and updated (MINIMAL) after it holds the added column's
    DEFAULT, as a key the target held before the batch does."""
    db = unique("ac")
    synced(spark, mariadb, tmp_path, add_column_steps(db), tmp_path / "lake")
    got = live_rows(tmp_path / "lake", db, "t", ["id", "v", "w"])
    assert got == select_all(mariadb, db, "t") == [(1, 11, 7), (2, 21, 7)]


@pytest.mark.slow
def test_jdbc_a_column_added_between_minimal_changes(
    spark: Any, mariadb: Any, postgres: Any, tmp_path: Path
) -> None:
    """The same over JDBC, where the fill of rows the target held runs as its own UPDATE."""
    db = unique("acj")
    synced(spark, mariadb, tmp_path, add_column_steps(db), postgres.url)
    (got,) = jdbc_tables(spark, postgres.url, [f"{db}.t"], "org.postgresql.Driver", '"').values()
    assert [tuple(r.values()) for r in got] == select_all(mariadb, db, "t") == [(1, 11, 7), (2, 21, 7)]


@pytest.mark.slow
def test_jdbc_a_wide_table_with_minimal_updates(
    spark: Any, mariadb: Any, sink_mariadb: Any, tmp_path: Path
) -> None:
    """A table of 520 columns (InnoDB takes 1017) updated MINIMAL into a MariaDB target: the
    staging table must fit too, whatever says which columns a row sets (one ``MASK`` column, not a
    flag per column: 520 + 519 would pass InnoDB's 1017)."""
    db = unique("wide")
    cols = ", ".join(f"c{i} INT" for i in range(520))
    synced(
        spark,
        mariadb,
        tmp_path,
        [
            (
                [f"CREATE DATABASE {db}"],
                [
                    f"CREATE TABLE {db}.t (id INT PRIMARY KEY, {cols})",
                    f"INSERT INTO {db}.t (id, c0, c519) VALUES (1, 1, 2)",
                ],
            ),
            ([], ["SET SESSION binlog_row_image = 'MINIMAL'", f"UPDATE {db}.t SET c1 = 5 WHERE id = 1"]),
        ],
        sink_mariadb.url,
    )
    url = sink_mariadb.url.replace("jdbc:mariadb:", "jdbc:mysql:")
    (got,) = jdbc_tables(spark, url, [f"{db}.t"], "org.mariadb.jdbc.Driver", '"').values()
    assert [tuple(r.values()) for r in got] == select_all(mariadb, db, "t")


HOSTILE = ["a.b", "it's", "back`tick", 'd"q', "$[0]", "x" * 64, "x" * 63 + "y"]


def hostile_steps(db: str) -> list[tuple[list[str], list[str]]]:
    """Columns named with dots, quotes, backticks, a JSON path, and two 64-character names that a
    63-byte target (PostgreSQL) shortens; MINIMAL updates of one column each."""
    q = [f"`{c.replace('`', '``')}`" for c in HOSTILE]
    cols = ", ".join(f"{c} INT" for c in q)
    values = ", ".join(str(i) for i in range(len(q)))
    return [
        (
            [f"CREATE DATABASE {db}"],
            [f"CREATE TABLE {db}.t (id INT PRIMARY KEY, {cols})", f"INSERT INTO {db}.t VALUES (1, {values})"],
        ),
        (
            [],
            ["SET SESSION binlog_row_image = 'MINIMAL'"]
            + [f"UPDATE {db}.t SET {c} = {100 + i} WHERE id = 1" for i, c in enumerate(q) if i % 2 == 0],
        ),
    ]


@pytest.mark.parametrize("sink", ["delta", "postgres"])
def test_hostile_column_names_with_minimal_updates(
    spark: Any, mariadb: Any, request: Any, tmp_path: Path, sink: str
) -> None:
    """Whatever a column's name, the columns MINIMAL updates leave out keep their values."""
    db = unique("hn")
    target = tmp_path / "lake" if sink == "delta" else request.getfixturevalue(sink).url
    synced(spark, mariadb, tmp_path, hostile_steps(db), target)
    want = select_all(mariadb, db, "t")
    assert want == [(1, 100, 1, 102, 3, 104, 5, 106)]
    if sink == "delta":
        rows = read_table(target, db, "t").to_pylist()
        got = [tuple(r.values()) for r in rows]
    else:
        (got_rows,) = jdbc_tables(spark, target, [f"{db}.t"], "org.postgresql.Driver", '"').values()
        got = [tuple(r.values()) for r in got_rows]
    assert got == want


def test_a_minimal_insert_that_leaves_a_key_column_out(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """A MINIMAL insert that does not name a key column with a DEFAULT logs the key without it
    (``changes._key``: pk NULL): its key is not in the binlog. Taken for a keyless change it was
    lost (the review found it: the target gained ``_binlake_op`` and held one row of two); now the
    batch is refused before anything is written."""
    db = unique("kk")
    with pytest.raises(UnappliableChangeError, match="lacks a primary-key column") as refused:
        synced(
            spark,
            mariadb,
            tmp_path,
            [
                (
                    [
                        f"CREATE DATABASE {db}",
                        f"CREATE TABLE {db}.t (id INT, k INT NOT NULL DEFAULT 0, PRIMARY KEY (id, k))",
                    ],
                    [
                        "SET SESSION binlog_row_image = 'MINIMAL'",
                        f"INSERT INTO {db}.t (id) VALUES (1)",
                        f"INSERT INTO {db}.t (id, k) VALUES (2, 5)",
                    ],
                )
            ],
            tmp_path / "lake",
        )
    assert refused.value.table == f"{db}.t" and refused.value.offset > 0
    assert select_all(mariadb, db, "t") == [(1, 0), (2, 5)]
    assert not (tmp_path / "lake").exists() or not list((tmp_path / "lake").iterdir())
