"""Hostile names from a real MariaDB: nothing escapes the target, nothing is injected, distinct
tables stay distinct, binlake's own columns never collide, and every table equals ``SELECT *`` —
on Delta, Parquet, PostgreSQL and MariaDB, in one batch, in several, and after SIGKILL and rerun."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.targetnames import escape_reserved, path_name
from tests.support.killloop import kill_then_finish


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


INJECT = "k` = s.`k` OR TRUE --"  # a key column that once rewrote every row of a Delta table
ODD = ["a\\b", "b`c", "q'\"", "中文", "sp ace", "c" * 64, "x'); DROP TABLE canary; --"]
FILL = "f` = s.`f` OR TRUE --'\""  # an added column whose default the rows held get
LONG = "t" * 63  # two tables that only differ in their 64th character (PostgreSQL keeps 63 bytes)

# (db, table, columns DDL, key columns, statements of batch 1, statements of batch 2)
TABLES: list[tuple[str, str, str, str]] = [
    ("../../hy", "/../../../../outside/x", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),
    ("hx.b", "c", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),
    ("hx", "b.c", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),
    ("hx", "b@002ec", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),  # looks like an encoded name
    ("hx", "inj", f"{q(INJECT)} INT PRIMARY KEY, v VARCHAR(20)", INJECT),
    (
        "hx",
        "sys",
        "`_binlake_order_key` INT PRIMARY KEY, `_binlake_deleted` VARCHAR(9), `_binlake_gtid` INT, "
        "`_binlake_commit_ts` VARCHAR(9)",
        "_binlake_order_key",
    ),
    (
        "hx",
        "odd\\'\"`",
        ", ".join([f"{q(ODD[0])} INT PRIMARY KEY"] + [f"{q(c)} VARCHAR(40)" for c in ODD[1:]]),
        ODD[0],
    ),
    ("hx", LONG + "1", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),
    ("hx", LONG + "2", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),
    ("hx", "log\\", "`n\\` INT, `_binlake_op` VARCHAR(9)", ""),  # keyless: an append-only change table
    ("d\\`'\"中文 .", "t", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),  # every odd character in a database
    ("e" * 64, "f" * 64, "id INT PRIMARY KEY, v VARCHAR(20)", "id"),  # the longest names there are
    ("pg_catalog", "t", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),  # PostgreSQL's own schema name
    ("public", "_binlake_positions", "id INT PRIMARY KEY, v VARCHAR(20)", "id"),  # binlake's own table
]


def workload() -> tuple[list[str], list[str]]:
    """Statements of the two binlog files: creates and inserts, then updates and deletes."""
    first = [f"CREATE DATABASE IF NOT EXISTS {q(db)}" for db in sorted({t[0] for t in TABLES})]
    second: list[str] = []
    for db, table, cols, key in TABLES:
        name = f"{q(db)}.{q(table)}"
        first.append(f"CREATE TABLE {name} ({cols})")
        if table == "sys":
            first.append(f"INSERT INTO {name} VALUES (1, 'no', 7, 'x')")
            second += [
                f"UPDATE {name} SET `_binlake_deleted` = 'yes'",
                f"UPDATE {name} SET `_binlake_gtid` = 8",
            ]
        elif table.startswith("odd"):
            values = ", ".join(["'\\\\back\\\\slash'", "'`tick`'", "'q''\"uote'", "'中文'", "'a b'", "'x'"])
            first.append(f"INSERT INTO {name} VALUES (1, {values}), (2, {values}), (3, {values})")
            second += [
                f"UPDATE {name} SET {q(ODD[1])} = 'changed\\\\' WHERE {q(ODD[0])} = 2",
                f"DELETE FROM {name} WHERE {q(ODD[0])} = 3",
                # the rows held get the default: a hostile name and value in a MERGE / UPDATE
                f"ALTER TABLE {name} ADD COLUMN {q(FILL)} VARCHAR(20) NOT NULL DEFAULT 'it''s `x`\\\\'",
            ]
        elif table.startswith("log"):
            first.append(f"INSERT INTO {name} VALUES (1, 'i'), (2, 'i')")
            second.append(f"INSERT INTO {name} VALUES (3, 'j')")
        else:
            k = q(key)
            first.append(f"INSERT INTO {name} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
            second += [
                f"UPDATE {name} SET v = 'TWO' WHERE {k} = 2",
                f"DELETE FROM {name} WHERE {k} = 3",
                f"INSERT INTO {name} VALUES (4, 'four\\\\ ''x')",  # a backslash and a quote
            ]
    return first, second


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A MariaDB of its own: the session server's binlogs are compared with mariadb-binlog by other
    tests, and mariadb-binlog prints a name with a backquote unescaped."""
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available():
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    with PrivateMariaDB(tmp_path_factory.mktemp("hostile-source"), server_id="3") as db:
        yield db


@pytest.fixture(scope="module")
def hostile(hostile_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workload's two binlog files (copied), and SELECT * of every table as strings."""
    mariadb = hostile_server
    mariadb.flush_binlogs()
    first, second = workload()
    mariadb.execute(*first)
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(*second)
    files = mariadb.flush_binlogs()[-3:-1]
    out = tmp_path_factory.mktemp("hostile")
    for f in files:
        (out / "bin").mkdir(exist_ok=True)
        (out / "bin" / f.name).write_bytes(f.read_bytes())
    truth = {}
    conn = mariadb.connect()
    with conn.cursor() as cur:
        for db, table, *_ in TABLES:
            cur.execute(f"SELECT * FROM {q(db)}.{q(table)}")
            names = [d[0] for d in cur.description]
            truth[(db, table)] = sorted(
                [
                    {n: None if v is None else str(v) for n, v in zip(names, row, strict=True)}
                    for row in cur.fetchall()
                ],
                key=repr,
            )
    conn.close()
    return {"files": sorted((out / "bin").iterdir()), "truth": truth}


def expected(truth: dict[Any, Any], column: Any) -> dict[Any, list[dict[str, Any]]]:
    """The truth with each column under its target name, keyless tables as change rows."""
    out = {}
    for (db, table), rows in truth.items():
        out[(db, table)] = sorted([{column(c): v for c, v in r.items()} for r in rows], key=repr)
    return out


def plain(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    return sorted([{c: None if r[c] is None else str(r[c]) for c in columns} for r in rows], key=repr)


def check(got: Any, truth: dict[Any, Any], column: Any) -> None:
    """Every table equals SELECT * (keyless: the rows inserted, each once)."""
    want = expected(truth, column)
    for (db, table), rows in want.items():
        columns = list(rows[0]) if rows else []
        have = got(db, table)
        if table.startswith("log"):  # change table: every insert once, in order
            have = [r for r in have if r["_binlake_op"] == "insert"]
        assert plain(have, columns) == rows, (db, table)


def delta_reader(target: Path) -> Any:
    from binlake.spark.sinks.delta import read_table

    def got(db: str, table: str) -> list[dict[str, Any]]:
        return read_table(target, db, table).to_pylist()

    return got


def jdbc_reader(spark: Any, url: str) -> Any:
    """Rows of a JDBC target read through a plain JDBC connection (Spark's JDBC reader does not
    escape quotes inside column names)."""
    from binlake.spark.sinks.jdbc_connection import Jdbc

    def got(db: str, table: str) -> list[dict[str, Any]]:
        conn = Jdbc(spark, url)
        d = conn.dialect
        schema, name = d.target(db, escape_reserved(table))
        st = conn.conn.createStatement()
        try:
            rs = st.executeQuery(f"SELECT * FROM {d.q(schema)}.{d.q(name)}")
            meta = rs.getMetaData()
            names = [meta.getColumnLabel(i + 1) for i in range(meta.getColumnCount())]
            rows = []
            while rs.next():
                rows.append({n: rs.getString(i + 1) for i, n in enumerate(names)})
            return rows
        finally:
            st.close()
            conn.close()

    return got


def new_jdbc_database(request: Any, sink: str, name: str) -> str:
    """A new, empty database ``name`` on the PostgreSQL or MariaDB sink server; its JDBC URL."""
    if sink == "postgres":
        server = request.getfixturevalue("postgres")
        server.psql(f"CREATE DATABASE {name}")
        return str(server.url.replace("/postgres?", f"/{name}?"))
    server = request.getfixturevalue("sink_mariadb")
    server.execute(f"CREATE DATABASE {name}", f"GRANT ALL ON {name}.* TO 'binlake'@'127.0.0.1'")
    return str(server.url.replace("/lake?", f"/{name}?"))


def files_outside(root: Path, target: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if target not in p.parents and p != target)


def test_hostile_names_delta_and_parquet(spark: Any, hostile: dict[str, Any], tmp_path: Path) -> None:
    """Delta fed file by file (each run re-reads the grown directory; one batch: the kill test's
    last run), then Parquet snapshots beside a file binlake did not write: no file outside the
    targets, the foreign file kept, every table equal to the source."""
    import pyarrow.parquet as pq

    from binlake.spark.apply import apply_changes, change_log
    from binlake.spark.sinks.parquet import export_parquet

    deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    delta, snaps = deep / "delta", deep / "pq"
    snaps.mkdir(parents=True)
    (snaps / "quarterly.report.parquet").write_bytes(b"not ours")
    grown = tmp_path / "grown"
    grown.mkdir()
    reports = []
    for f in hostile["files"]:  # the directory grows by a file; each run re-reads it all
        shutil.copy(f, grown / f.name)
        reports.append(apply_changes(change_log(spark, str(grown)), delta, source=str(grown)))
    # a report names each table once: `hx.b`.`c` and `hx`.`b.c` are two, the odd table's fill is there
    assert {"`hx.b`.`c`", "`hx`.`b.c`", "hx.b@002ec"} <= set(reports[0].tables)
    assert reports[0].tables["`hx.b`.`c`"] == reports[0].tables["`hx`.`b.c`"] == 3
    assert [f.split(":")[0] for f in reports[-1].filled] == ["`hx`.`odd\\'\"```"]
    export_parquet(delta, snaps)
    outside = [p for p in files_outside(tmp_path, deep) if not p.startswith(str(grown))]
    assert outside == [str(tmp_path / n) for n in ("a", "a/b", "a/b/c", "a/b/c/d")]  # only the way there
    check(delta_reader(delta), hostile["truth"], escape_reserved)
    assert (snaps / "quarterly.report.parquet").read_bytes() == b"not ours"  # not binlake's: kept

    def parquet(db: str, table: str) -> list[dict[str, Any]]:
        return pq.read_table(snaps / f"{path_name(db, escape_reserved(table))}.parquet").to_pylist()

    check(parquet, hostile["truth"], escape_reserved)


@pytest.mark.parametrize("sink", ["delta", "parquet", "postgres", "mariadb"])
def test_hostile_names_killed_and_rerun(
    spark: Any, hostile: dict[str, Any], sink: str, request: Any, tmp_path: Path
) -> None:
    """``binlake sync`` SIGKILLed at random moments, then run to the end: every sink equals the
    source."""
    import pyarrow.parquet as pq

    column: Any = escape_reserved
    target = tmp_path / "a" / "b" / "c" / "d" / sink
    if sink in ("delta", "parquet"):
        to = f"{sink}:{target}"
    else:
        to = new_jdbc_database(request, sink, "killed")
    cmd = [sys.executable, "-m", "binlake.cli", "sync", str(hostile["files"][0].parent), "--to", to]
    assert kill_then_finish(cmd, seed=5, runs=1, window=(3, 7)) == 1  # Spark alone starts in more
    if sink in ("delta", "parquet"):  # deep enough that a ../../.. escape would still land in tmp_path
        assert files_outside(tmp_path, target) == [
            str(tmp_path / n) for n in ("a", "a/b", "a/b/c", "a/b/c/d")
        ]
    if sink == "delta":
        got = delta_reader(target)
    elif sink == "parquet":

        def got(db: str, table: str) -> list[dict[str, Any]]:
            name = f"{path_name(db, escape_reserved(table))}.parquet"
            return pq.read_table(target / name).to_pylist()

    else:
        from binlake.spark.sinks.jdbc_dialects import dialect_for

        d = dialect_for(to)
        column = lambda c: d.column(escape_reserved(c))  # noqa: E731
        got = jdbc_reader(spark, to)
    check(got, hostile["truth"], column)


@pytest.mark.parametrize("sink", ["postgres", "mariadb"])
def test_hostile_names_jdbc_file_by_file(
    spark: Any, hostile: dict[str, Any], sink: str, request: Any, tmp_path: Path
) -> None:
    """PostgreSQL and MariaDB fed file by file, each run re-reading the grown directory (one batch:
    the kill test's last run); a canary table beside the targets is untouched (no statement but
    binlake's own ran)."""
    from binlake.spark.apply import apply_changes, change_log
    from binlake.spark.sinks.jdbc_connection import Jdbc
    from binlake.spark.sinks.jdbc_dialects import dialect_for

    url = new_jdbc_database(request, sink, "several")
    d = dialect_for(url)
    canary = d.q("canary")
    db = Jdbc(spark, url)
    db.execute(f"CREATE TABLE {canary} (id INT PRIMARY KEY)")
    db.execute(f"INSERT INTO {canary} VALUES (1)")
    db.close()
    grown = tmp_path / "grown"
    grown.mkdir()
    for f in hostile["files"]:  # the directory grows by a file; each run re-reads it all
        shutil.copy(f, grown / f.name)
        apply_changes(change_log(spark, str(grown)), url, source=str(grown))
    check(jdbc_reader(spark, url), hostile["truth"], lambda c: d.column(escape_reserved(c)))
    db = Jdbc(spark, url)
    assert db.rows(f"SELECT id FROM {canary}") == [["1"]]
    db.close()
