"""A live server's tables read by Spark chunk by chunk (one task per chunk), applied into Delta:
the tables equal SELECT *, and each chunk's rows carry the binlog position of its snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from binlake.replication.client import ServerAddress
from binlake.snapshot.chunks import SnapshotPoint


def test_snapshot_by_spark_into_delta_equals_the_tables(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    from binlake.spark.apply import apply_changes
    from binlake.spark.sinks.delta import read_table
    from binlake.spark.snapshot import plan, snapshot_changelog

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snapspark",
        "CREATE OR REPLACE TABLE snapspark.a (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), t DATETIME(3))",
        "CREATE OR REPLACE TABLE snapspark.`b c` (k VARCHAR(8), n BIGINT UNSIGNED, PRIMARY KEY (k, n))",
    )
    mariadb.execute(
        "INSERT INTO a SELECT seq, CONCAT('v', seq), seq / 7, '2024-01-02 03:04:05.678' FROM seq_1_to_1000",
        "INSERT INTO `b c` SELECT CHAR(65 + seq % 26), seq * 1000000000000 FROM seq_1_to_300",
        database="snapspark",
    )
    server = ServerAddress(unix_socket=mariadb.socket, user="root", ssl_disabled=True)
    tasks = plan(server, lambda db, t: db == "snapspark", rows_per_chunk=400)
    assert len(tasks) == 3 + 1  # 1000 rows: 2 full chunks and a rest; 300: one
    df = snapshot_changelog(spark, server, tasks)
    assert df.rdd.getNumPartitions() == len(tasks)
    rows = df.select("db", "table", "op", "file", "position").collect()
    assert len(rows) == 1300 and {r["op"] for r in rows} == {"insert"}
    points = {(r["file"], r["position"]) for r in rows}
    status = mariadb.connect()
    try:
        with status.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        status.close()
    assert points == {(file, pos)}  # nothing was written meanwhile: one snapshot point, the binlog's end
    assert SnapshotPoint(file, pos, 1).order_key().major == int(file.rsplit(".", 1)[1])

    report = apply_changes(df, tmp_path / "delta", source="snapshot")
    assert report.tables == {"snapspark.a": 1000, "snapspark.b c": 300}
    conn = mariadb.connect("snapspark")
    try:
        with conn.cursor() as cur:
            for name in ("a", "b c"):
                cur.execute(f"SELECT * FROM `{name}`")
                want = sorted(cur.fetchall())
                got = read_table(tmp_path / "delta", "snapspark", name).drop_columns(
                    [
                        c
                        for c in read_table(tmp_path / "delta", "snapspark", name).column_names
                        if c.startswith("_binlake")
                    ]
                )
                assert sorted(tuple(r.values()) for r in got.to_pylist()) == want, name
    finally:
        conn.close()
