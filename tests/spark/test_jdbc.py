"""The PostgreSQL sink over JDBC against the generator's truth: equal tables, replays harmless, a
failure inside the apply transaction rolls back whole and the rerun completes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from binlake.generate import generate
from binlake.spark.typed import arrow_type, convert

pytestmark = pytest.mark.slow


def _plain(v: Any) -> Any:
    """PostgreSQL TIMESTAMP has no zone: compare instants as naive UTC."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


def expected_tables(spark: Any, workload: Any) -> dict[str, list[dict]]:
    layouts = {}
    for r in (
        spark.read.format("binlog")
        .load(str(workload.files[0].parent))
        .select("db", "table", "columns", "order_key")
        .collect()
    ):
        name = f"{r['db']}.{r['table']}"
        if name not in layouts or r["order_key"] > layouts[name][0]:
            layouts[name] = (r["order_key"], [c.asDict(recursive=True) for c in r["columns"]])
    out = {}
    for name, (_, cols) in layouts.items():
        rows = [json.loads(line) for line in (workload.truth_dir / f"{name}.jsonl").read_text().splitlines()]
        out[name] = sorted(
            ({c["name"]: _plain(convert(r.get(c["name"]), c, arrow_type(c))) for c in cols} for r in rows),
            key=lambda r: str(r[cols[0]["name"]]),
        )
    return out


def pg_tables(spark: Any, url: str, names: list[str]) -> dict[str, list[dict]]:
    return jdbc_tables(spark, url, names, "org.postgresql.Driver", '"')


def jdbc_tables(spark: Any, url: str, names: list[str], driver: str, quote: str) -> dict[str, list[dict]]:
    from binlake.spark.sinks.jdbc_dialects import dialect_for

    d = dialect_for(url)
    out = {}
    for name in names:
        schema, table = d.target(*name.split("."))
        df = spark.read.jdbc(url, f"{d.q(schema)}.{d.q(table)}", properties={"driver": driver})
        df = df.select(
            *["`" + c.replace("`", "``") + "`" for c in df.columns if not c.startswith("_binlake_")]
        )
        rows = [{k: _plain(v) for k, v in r.asDict().items()} for r in df.collect()]
        first = df.columns[0]
        out[name] = sorted(rows, key=lambda r: str(r[first]))
    return out


def test_sync_to_postgres_equals_the_truth(spark: Any, postgres: Any, tmp_path: Path) -> None:
    from binlake.spark.apply import sync

    workload = generate(tmp_path / "bin", seed=21, target_bytes=300_000, max_file_size=120_000, ddl_every=0)
    report = sync(spark, str(tmp_path / "bin"), postgres.url)
    assert report.tables and not report.skipped
    expected = expected_tables(spark, workload)
    assert pg_tables(spark, postgres.url, sorted(expected)) == expected
    again = sync(spark, str(tmp_path / "bin"), postgres.url)
    assert again.skipped and not again.tables
    assert pg_tables(spark, postgres.url, sorted(expected)) == expected
    assert (
        postgres.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE '_binlake_stage%'").strip() == "0"
    )


def test_failure_inside_the_apply_transaction_rolls_back_whole(
    spark: Any, postgres: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from binlake.spark.apply import sync
    from binlake.spark.sinks import jdbc

    workload = generate(tmp_path / "bin", seed=4, target_bytes=200_000, max_file_size=100_000, ddl_every=0)
    source = str(tmp_path / "bin")
    postgres.psql("DROP SCHEMA IF EXISTS shop CASCADE")
    real, calls = jdbc._apply_stage, []

    def failing(db: Any, *args: Any) -> None:
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("killed between two tables")
        real(db, *args)

    monkeypatch.setattr(jdbc, "_apply_stage", failing)
    with pytest.raises(RuntimeError, match="killed"):
        sync(spark, source, postgres.url)
    # the first table's apply (its CREATE TABLE included) was rolled back with the rest: no position
    assert postgres.psql(f"SELECT count(*) FROM _binlake_positions WHERE source = '{source}'").strip() == "0"
    schema, table = calls[0][0][1:3]  # (stage, types): the stage names its target
    assert postgres.psql(f'SELECT to_regclass(\'"{schema}"."{table}"\') IS NULL').strip() == "t"
    # and no staging table outlives the failed batch
    assert (
        postgres.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_binlake\\_stage%'").strip()
        == "0"
    )
    monkeypatch.setattr(jdbc, "_apply_stage", real)
    sync(spark, source, postgres.url)
    expected = expected_tables(spark, workload)
    assert pg_tables(spark, postgres.url, sorted(expected)) == expected


def test_cli_streams_into_postgres(spark: Any, postgres: Any, tmp_path: Path, capsys: Any) -> None:
    """`binlake sync --stream --available-now --to jdbc:...`: each file arriving is applied; the
    tables end equal to the truth, and the summary says what happened."""
    import shutil

    from binlake.cli import main

    workload = generate(tmp_path / "bin", seed=9, target_bytes=200_000, max_file_size=70_000, ddl_every=0)
    postgres.psql("DROP SCHEMA IF EXISTS shop CASCADE")
    live = tmp_path / "live"
    live.mkdir()
    args = ["sync", str(live), "--to", postgres.url, "--stream", "--available-now"]
    args += ["--checkpoint", str(tmp_path / "ckpt"), "--master", "local[2]"]
    for f in workload.files:
        shutil.copy(f, live / f.name)
        assert main(args) == 0
    assert "micro-batches" in capsys.readouterr().out
    expected = expected_tables(spark, workload)
    assert pg_tables(spark, postgres.url, sorted(expected)) == expected


def test_sync_to_postgres_killed_again_and_again_then_finished(
    spark: Any, postgres: Any, tmp_path: Path
) -> None:
    """SIGKILL at random moments (start-up, staging, inside the apply transaction), then a full run:
    PostgreSQL equals the truth — a killed connection's transaction is rolled back whole."""
    import sys

    from tests.support.killloop import kill_then_finish

    workload = generate(tmp_path / "bin", seed=33, target_bytes=300_000, max_file_size=120_000, ddl_every=0)
    postgres.psql("DROP SCHEMA IF EXISTS shop CASCADE")
    code = (
        "from binlake.spark.session import spark_session; from binlake.spark.apply import sync; "
        f"sync(spark_session('local[1]'), {str(tmp_path / 'bin')!r}, {postgres.url!r})"
    )
    kills = kill_then_finish(
        [sys.executable, "-c", code], seed=11, runs=3, window=(4, 12)
    )  # a run takes ~13 s
    assert kills >= 1
    expected = expected_tables(spark, workload)
    assert pg_tables(spark, postgres.url, sorted(expected)) == expected


def test_sync_to_mariadb_equals_the_truth(spark: Any, sink_mariadb: Any, tmp_path: Path) -> None:
    from binlake.spark.apply import sync

    workload = generate(tmp_path / "bin", seed=21, target_bytes=300_000, max_file_size=120_000, ddl_every=0)
    report = sync(spark, str(tmp_path / "bin"), sink_mariadb.url)
    assert report.tables and not report.skipped
    expected = expected_tables(spark, workload)
    mysql_url = sink_mariadb.url.replace("jdbc:mariadb:", "jdbc:mysql:")  # Spark's MySQL dialect
    got = jdbc_tables(spark, mysql_url, sorted(expected), "org.mariadb.jdbc.Driver", "`")
    diffs = [
        (name, col, g[col], w[col])
        for name in expected
        for g, w in zip(got[name], expected[name], strict=True)
        for col in w
        if g.get(col) != w[col]
    ]
    assert not diffs, diffs[:10]
    assert got == expected
    assert sync(spark, str(tmp_path / "bin"), sink_mariadb.url).skipped


DDL_WORKLOAD = [
    "CREATE DATABASE ddlpol",
    "CREATE TABLE ddlpol.t (id INT PRIMARY KEY, a INT, b VARCHAR(10), c INT)",
    "INSERT INTO ddlpol.t VALUES (1, 10, 'one', 100), (2, 20, 'two', 200), (3, 30, 'three', 300)",
    "ALTER TABLE ddlpol.t MODIFY a BIGINT",  # type change: older rows in the batch go into BIGINT too
    "UPDATE ddlpol.t SET a = 5000000000 WHERE id = 1",
    "INSERT INTO ddlpol.t VALUES (4, 6000000000, 'four', 400)",
    "ALTER TABLE ddlpol.t DROP COLUMN c",  # the target keeps c; rows written after read NULL there
    "INSERT INTO ddlpol.t VALUES (5, 50, 'five')",
    "UPDATE ddlpol.t SET b = 'TWO' WHERE id = 2",
    "ALTER TABLE ddlpol.t RENAME COLUMN b TO bb",  # the target's b becomes bb, values kept
    # the rows the table holds get the defaults (no row event says so), in the table's final name
    "ALTER TABLE ddlpol.t ADD COLUMN `d d` VARCHAR(5) NOT NULL DEFAULT 'it''s', ADD COLUMN e DECIMAL(5,1) DEFAULT 2.5",
    "INSERT INTO ddlpol.t (id, a, bb) VALUES (6, 60, 'six')",
    "RENAME TABLE ddlpol.t TO ddlpol.t2",  # the target table follows, rows kept
    "INSERT INTO ddlpol.t2 (id, a, bb, e) VALUES (7, 70, 'seven', NULL)",
    "DELETE FROM ddlpol.t2 WHERE id = 3",
    "CREATE TABLE ddlpol.t (id INT PRIMARY KEY, z INT)",  # a new table of the old name
    "INSERT INTO ddlpol.t VALUES (1, -1)",
]

# what the documented policy gives (README, "DDL"): t2 = SELECT * FROM t2 plus the dropped column c
DDL_EXPECTED_T2 = {
    1: (5000000000, "one", 100),
    2: (20, "TWO", None),  # its last change came after the DROP: c is NULL, in any batching
    4: (6000000000, "four", 400),
    5: (50, "five", None),
    6: (60, "six", None),
    7: (70, "seven", None),
}


def assert_same_as_source(mariadb: Any, db: str, got: dict[str, list[dict]]) -> None:
    """Every synced table equals SELECT * of the source table on the source's columns."""
    import pymysql.cursors

    conn = mariadb.connect(db, cursorclass=pymysql.cursors.DictCursor)
    for table, rows in got.items():
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}` ORDER BY 1")
            want = list(cur.fetchall())
        assert len(rows) == len(want)
        assert [
            {k: r[k] for k in w} for r, w in zip(sorted(rows, key=lambda r: r["id"]), want, strict=True)
        ] == want
    conn.close()


def ddl_binlogs(
    mariadb: Any, db: str, tmp_path: Path, workload: list[str] = DDL_WORKLOAD, cut: int = 6
) -> list[Path]:
    """A workload (``ddlpol`` -> ``db``) in two binlog files, cut after statement ``cut`` (for
    DDL_WORKLOAD: after the type change)."""
    statements = [s.replace("ddlpol", db) for s in workload]
    mariadb.execute(*statements[:cut])
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(*statements[cut:])
    files = mariadb.flush_binlogs()[-3:-1]
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    for f in files:
        (binlogs / f.name).write_bytes(f.read_bytes())
    return sorted(binlogs.iterdir())


def sink_tables(spark: Any, request: Any, sink: str, db: str, tables: list[str]) -> tuple[Any, Any]:
    """(sync into ``sink``, read its tables back): Delta, PostgreSQL or MariaDB."""
    from binlake.spark.apply import sync
    from binlake.spark.sinks.delta import read_delta

    if sink == "delta":
        target = request.getfixturevalue("tmp_path") / "delta"
        return (
            lambda source: sync(spark, source, target, options={"databases": db}),
            lambda: {t: read_delta(target, f"{db}.{t}").to_pylist() for t in tables},
        )
    if sink == "postgres":
        url, read_url, driver, q = request.getfixturevalue("postgres").url, None, "org.postgresql.Driver", '"'
    else:
        url = request.getfixturevalue("sink_mariadb").url
        read_url, driver, q = url.replace("jdbc:mariadb:", "jdbc:mysql:"), "org.mariadb.jdbc.Driver", "`"

    def read() -> dict[str, list[dict]]:
        got = jdbc_tables(spark, read_url or url, [f"{db}.{t}" for t in tables], driver, q)
        return {t: got[f"{db}.{t}"] for t in tables}

    return lambda source: sync(spark, source, url, options={"databases": db}), read


SWAP_WORKLOAD = [
    "CREATE DATABASE ddlpol",
    "CREATE TABLE ddlpol.a (id INT PRIMARY KEY, x INT, y VARCHAR(10))",
    "CREATE TABLE ddlpol.b (id INT PRIMARY KEY, x INT, y VARCHAR(10))",
    "CREATE TABLE ddlpol.d (id INT PRIMARY KEY, v VARCHAR(10))",
    "INSERT INTO ddlpol.a VALUES (1, 1, 'a1'), (2, 2, 'a2')",
    "INSERT INTO ddlpol.b VALUES (1, 100, 'b1')",
    "INSERT INTO ddlpol.d VALUES (1, 'old'), (2, 'old')",
    # batch 2: the tables swap names, then a's columns swap names too
    "RENAME TABLE ddlpol.a TO ddlpol.tmp, ddlpol.b TO ddlpol.a, ddlpol.tmp TO ddlpol.b",
    "UPDATE ddlpol.b SET y = 'a2!' WHERE id = 2",
    "ALTER TABLE ddlpol.a RENAME COLUMN x TO t",
    "ALTER TABLE ddlpol.a RENAME COLUMN y TO x",
    "ALTER TABLE ddlpol.a RENAME COLUMN t TO y",
    "INSERT INTO ddlpol.a VALUES (2, 200, 'b2')",  # columns now (id, y INT, x VARCHAR)
    "ALTER TABLE ddlpol.b CHANGE y yy VARCHAR(10), RENAME TO ddlpol.c",
    "INSERT INTO ddlpol.c VALUES (3, 3, 'c3')",
    # a manual swap: the old d is dropped (kept aside in the target), d_new takes its name
    "UPDATE ddlpol.d SET v = 'old2' WHERE id = 1",
    "CREATE TABLE ddlpol.d_new (id INT PRIMARY KEY, v VARCHAR(10))",
    "INSERT INTO ddlpol.d_new VALUES (1, 'new')",
    "DROP TABLE ddlpol.d",
    "RENAME TABLE ddlpol.d_new TO ddlpol.d",
    "UPDATE ddlpol.d SET v = 'new2' WHERE id = 1",
]


@pytest.mark.parametrize("sink", ["delta", "postgres", "mariadb"])
def test_swapped_tables_and_columns_follow(
    spark: Any, mariadb: Any, request: Any, tmp_path: Path, sink: str
) -> None:
    """Tables synced in one batch swap names (through a third name) and so do two columns of
    different types; another column and table are renamed in one ALTER; in the next batch every
    sink's tables equal SELECT * of the source under the new names."""
    from binlake.spark.sinks import delta_renames
    from binlake.spark.sinks.jdbc_connection import Jdbc

    db = f"swap_{sink}"
    files = ddl_binlogs(mariadb, db, tmp_path, SWAP_WORKLOAD, cut=7)
    sync, read = sink_tables(spark, request, sink, db, ["a", "c", "d"])
    sync(str(files[0]))
    # renaming is killed at every other step, before or after it: each rerun goes on from the journal
    monkeypatch = request.getfixturevalue("monkeypatch")
    calls: list[Any] = []

    def killing(real: Any, renames: Any = lambda *a: True) -> Any:
        def run(*args: Any) -> Any:
            if not renames(*args):
                return real(*args)
            calls.append(args)
            if len(calls) % 4 == 1:
                raise KeyboardInterrupt("killed before a rename step")
            out = real(*args)
            if len(calls) % 4 == 2:
                raise KeyboardInterrupt("killed after a rename step")
            return out

        return run

    if sink == "delta":
        monkeypatch.setattr(delta_renames, "_move_table", killing(delta_renames._move_table))
        monkeypatch.setattr(delta_renames, "_rename_columns", killing(delta_renames._rename_columns))
    else:
        is_rename = lambda _db, sql, *_: " RENAME " in sql and not sql.startswith("CREATE")  # noqa: E731
        monkeypatch.setattr(Jdbc, "execute", killing(Jdbc.execute, is_rename))
    kills = 0
    while True:
        try:
            report = sync(str(files[0].parent))
            break
        except KeyboardInterrupt:
            kills += 1
    assert kills >= 3
    aside = next(r.split(" ")[2].split(".")[-1] for r in report.renamed if r.startswith(f"{db}.d -> "))
    assert aside.startswith("_binlake_dropped_") and aside.endswith("_d")
    assert sorted(report.renamed) == [
        f"{db}.a -> {db}.c",
        f"{db}.a: column x -> y",
        f"{db}.a: column y -> x",
        f"{db}.b -> {db}.a",
        f"{db}.c: column y -> yy",
        f"{db}.d -> {db}.{aside} (dropped upstream, kept aside)",
        f"{db}.d_new -> {db}.d",
    ]
    got = read()
    assert got["d"] == [{"id": 1, "v": "new2"}]
    kept = sink_tables(spark, request, sink, db, [aside])[1]()[aside]
    assert sorted((r["id"], r["v"]) for r in kept) == [(1, "old2"), (2, "old")]  # dropped: kept aside
    assert {r["id"]: (r["x"], r["y"]) for r in got["a"]} == {1: ("b1", 100), 2: ("b2", 200)}
    assert {r["id"]: (r["x"], r["yy"]) for r in got["c"]} == {1: (1, "a1"), 2: (2, "a2!"), 3: (3, "c3")}
    assert_same_as_source(mariadb, db, got)
    sync(str(files[0].parent))  # a rerun renames nothing again
    assert read() == got
    # a batch of nothing but a rename is followed too
    monkeypatch.undo()
    mariadb.execute(f"RENAME TABLE {db}.c TO {db}.c2")
    last = mariadb.flush_binlogs()[-2]
    (files[0].parent / last.name).write_bytes(last.read_bytes())
    report = sync(str(files[0].parent / last.name))  # the new file alone: a batch without row changes
    assert report.changes == 0 and report.renamed == [f"{db}.c -> {db}.c2"]
    assert sink_tables(spark, request, sink, db, ["c2"])[1]()["c2"] == got["c"]


@pytest.mark.parametrize("sink, batches", [("postgres", 1), ("postgres", 2), ("mariadb", 1), ("mariadb", 2)])
def test_ddl_policy_drop_rename_and_type_change(
    spark: Any, mariadb: Any, request: Any, tmp_path: Path, sink: str, batches: int
) -> None:
    """A live MariaDB's MODIFY (INT -> BIGINT), DROP COLUMN, RENAME COLUMN and RENAME TABLE over
    JDBC follow the documented policy on both sinks, whether applied in one batch or two."""
    from binlake.spark.apply import sync
    from binlake.spark.sinks.jdbc_dialects import dialect_for

    db = f"ddlpol_{sink}_{batches}"
    files = ddl_binlogs(mariadb, db, tmp_path)
    if sink == "postgres":
        url, read_url, driver, q = request.getfixturevalue("postgres").url, None, "org.postgresql.Driver", '"'
    else:
        url = request.getfixturevalue("sink_mariadb").url
        read_url, driver, q = url.replace("jdbc:mariadb:", "jdbc:mysql:"), "org.mariadb.jdbc.Driver", "`"
    if batches == 2:
        sync(spark, str(files[0]), url, options={"databases": db})
    sync(spark, str(files[0].parent), url, options={"databases": db})
    got = jdbc_tables(spark, read_url or url, [f"{db}.t", f"{db}.t2"], driver, q)
    assert {r["id"]: (r["a"], r["bb"], r["c"]) for r in got[f"{db}.t2"]} == DDL_EXPECTED_T2
    assert "b" not in got[f"{db}.t2"][0]
    assert got[f"{db}.t"] == [{"id": 1, "z": -1}]
    assert_same_as_source(mariadb, db, {"t": got[f"{db}.t"], "t2": got[f"{db}.t2"]})
    d = dialect_for(url)
    schema, table = d.target(db, "t2")
    types = {
        f.name: f.dataType.simpleString()
        for f in spark.read.jdbc(
            read_url or url, f"{d.q(schema)}.{d.q(table)}", properties={"driver": driver}
        ).schema
    }
    assert types["a"] == "bigint"


def test_target_password_from_outside_the_url(spark: Any, sink_mariadb: Any, tmp_path: Path) -> None:
    """The JDBC sinks take the target's password apart from the URL; a wrong one fails without
    showing it."""
    from binlake.spark.apply import sync

    sink_mariadb.execute(
        "CREATE DATABASE pwlake",
        "CREATE USER 'pw'@'127.0.0.1' IDENTIFIED BY 'S3cret;pw'",
        "GRANT ALL ON pwlake.* TO 'pw'@'127.0.0.1'",
    )
    generate(tmp_path / "bin", seed=3, target_bytes=40_000, max_file_size=40_000, ddl_every=0)
    url = f"jdbc:mariadb://127.0.0.1:{sink_mariadb.port}/pwlake?user=pw"
    with pytest.raises(Exception) as refused:
        sync(spark, str(tmp_path / "bin"), url, password="wrong-Secret")
    assert "wrong-Secret" not in str(refused.value)
    report = sync(spark, str(tmp_path / "bin"), url, password="S3cret;pw")
    assert report.tables and not report.skipped


def test_refuses_to_write_into_the_server_it_reads(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """Pointed at the server whose binlogs it reads, the MariaDB sink refuses before writing a thing
    (it once ALTERed a source table and left staging tables behind)."""
    from binlake.spark.apply import sync

    files = ddl_binlogs(mariadb, "selfsync", tmp_path, DDL_WORKLOAD[:3], cut=2)
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS selflake",
        "CREATE USER IF NOT EXISTS 'self'@'127.0.0.1'",
        "GRANT ALL ON selflake.* TO 'self'@'127.0.0.1'",
        "GRANT BINLOG MONITOR ON *.* TO 'self'@'127.0.0.1'",
    )
    url = f"jdbc:mariadb://127.0.0.1:{mariadb.port}/selflake?user=self"
    with pytest.raises(ValueError, match="does not write into the server it reads from"):
        sync(spark, str(files[0].parent), url)
    conn = mariadb.connect("selflake")
    with conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert cur.fetchall() == ()  # nothing written, not even binlake's own tables
    conn.close()


def test_a_source_longer_than_the_position_key_applies_once(
    spark: Any, mariadb: Any, postgres: Any, tmp_path: Path
) -> None:
    """A source name longer than ``_binlake_positions.source`` (a merged read names every node's
    directory) is kept as its start and a hash: applied once, a rerun skipped, offsets reset by it."""
    from binlake.spark.apply import sync
    from binlake.spark.offsets import jdbc_offsets, reset_jdbc
    from binlake.spark.sinks.jdbc_connection import SOURCE_WIDTH, Jdbc, source_key

    files = ddl_binlogs(mariadb, "longsrc", tmp_path, DDL_WORKLOAD[:3], cut=2)
    deep = tmp_path.joinpath(*["d" * 200] * 4)
    deep.mkdir(parents=True)
    for f in files:
        (deep / f.name).write_bytes(f.read_bytes())
    source = str(deep)
    assert len(source) > SOURCE_WIDTH
    postgres.psql("CREATE DATABASE longsrc")  # its own: other tests' change tables would refuse the reset
    url = postgres.url.replace("/postgres?", "/longsrc?")
    assert sync(spark, source, url, options={"databases": "longsrc"}).tables == {"longsrc.t": 3}
    assert sync(spark, source, url, options={"databases": "longsrc"}).skipped
    key = source_key(source)
    assert len(key) == SOURCE_WIDTH and key != source_key(source + "x")
    db = Jdbc(spark, url, None)
    try:
        assert key in [o.source for o in jdbc_offsets(db)]
        assert [o.source for o in reset_jdbc(db, source)] == [key]
    finally:
        db.close()
