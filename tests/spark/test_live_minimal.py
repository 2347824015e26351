"""A live server with ``binlog_row_metadata=MINIMAL`` (no column names, signedness or keys in its
table maps) synced into Delta: the schema history is seeded from the server's catalog at the plan's
position and kept in step by the binlog's DDL, so the rows are named and keyed right — including an
ALTER made after the snapshot, and an ALTER made before the seed's position that the binlog copy
also holds (applied once, not twice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.replication.client import ServerAddress


@pytest.fixture
def minimal_mariadb(tmp_path: Path) -> Any:
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available():
        pytest.skip("mariadbd is not installed (./dev setup installs it)")
    with PrivateMariaDB(tmp_path / "minimal", binlog_row_metadata="MINIMAL") as db:
        yield db


def _rows(lake: Path, table: str, names: list[str]) -> list[tuple[Any, ...]]:
    from binlake.spark.sinks.delta import read_table

    return sorted(tuple(r[c] for c in names) for r in read_table(lake, "m", table).to_pylist())


def _truth(server: Any, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = server.connect("m")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            return [d[0] for d in cur.description], sorted(cur.fetchall())
    finally:
        conn.close()


def test_minimal_metadata_is_named_by_the_server_catalog(
    spark: Any, minimal_mariadb: Any, tmp_path: Path
) -> None:
    from binlake.spark.apply import apply_changes, change_log
    from binlake.spark.live import LiveSync

    server = minimal_mariadb
    server.execute("CREATE DATABASE m")
    server.execute(
        "CREATE TABLE t (id INT UNSIGNED PRIMARY KEY, v VARCHAR(10), n TINYINT UNSIGNED)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq % 250 FROM seq_1_to_300",
        database="m",
    )
    server.execute("FLUSH BINARY LOGS")
    # in the file the binlog copy starts from, before the plan: the seed has it, the copy too
    server.execute(
        "ALTER TABLE t ADD COLUMN early INT", "UPDATE t SET early = id WHERE id <= 5", database="m"
    )
    address = ServerAddress(unix_socket=server.socket, user="root", ssl_disabled=True)
    live = LiveSync(address, tmp_path / "state", keep=lambda db, t: db == "m", rows_per_chunk=100)
    assert live.schema_path is not None
    lake = tmp_path / "lake"
    live.snapshot(spark, lambda df: apply_changes(df, lake, source="snapshot", positioned=False))
    server.execute(
        "UPDATE t SET v = 'changed', n = 250 WHERE id <= 10",
        "DELETE FROM t WHERE id > 290",
        "ALTER TABLE t ADD COLUMN late VARCHAR(5) AFTER id",
        "INSERT INTO t (id, late, v, n) VALUES (1000, 'x', 'new', 200)",
        "UPDATE t SET late = 'y', id = id + 2000 WHERE id = 20",
        database="m",
    )
    live.mirror(blocking=False)
    options = {"schema": str(live.schema_path)}
    apply_changes(change_log(spark, str(live.mirror_dir), options), lake, source=str(live.mirror_dir))
    names, want = _truth(server, "t")
    assert names == ["id", "late", "v", "n", "early"]
    assert _rows(lake, "t", names) == want
