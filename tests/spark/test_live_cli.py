"""``binlake sync mysql://…`` end to end: a server whose old binlogs are purged, synced with
--available-now into Delta (snapshot, then binlog), then changed and synced again (the journal says
the snapshot is done: only the binlog is read)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import select_all


def _synced(lake: Path, table: str) -> list[tuple[Any, ...]]:
    from binlake.spark.sinks.delta import read_table

    t = read_table(lake, "shop", table)
    return sorted(tuple(r[c] for c in t.column_names if not c.startswith("_binlake")) for r in t.to_pylist())


def _sync(server: Any, lake: Path) -> subprocess.CompletedProcess[str]:
    url = f"mysql://root@localhost/shop?socket={server.socket}&chunk-rows=150"
    env = {**os.environ, "MYSQL_PWD": ""}
    return subprocess.run(
        [sys.executable, "-m", "binlake", "sync", url, "--to", f"delta:{lake}", "--available-now", "--master", "local[2]"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip


def test_sync_from_a_server_then_again(own_mariadb: Any, tmp_path: Path) -> None:
    server = own_mariadb
    server.execute(
        "CREATE DATABASE shop",
        "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2))",
        "CREATE TABLE shop.other (a INT, b INT, PRIMARY KEY (b, a))",
    )
    server.execute(
        "INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 3 FROM seq_1_to_500",
        "INSERT INTO other SELECT seq, seq % 7 FROM seq_1_to_100",
        database="shop",
    )
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
    conn.close()
    lake = tmp_path / "lake"
    first = _sync(server, lake)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "snapshot of 2 tables in 5 chunks (0 applied before)" in first.stdout
    for table in ("items", "other"):
        assert _synced(lake, table) == select_all(server, "shop", table), table

    server.execute(
        "UPDATE items SET price = price + 1 WHERE id <= 200",
        "DELETE FROM items WHERE id > 450",
        "UPDATE other SET b = b + 100 WHERE a = 3",
        database="shop",
    )
    again = _sync(server, lake)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(5 applied before)" in again.stdout
    for table in ("items", "other"):
        assert _synced(lake, table) == select_all(server, "shop", table), table


def test_a_password_in_the_url_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "binlake", "sync", "mysql://root:secret@db1/shop", "--to", f"delta:{tmp_path}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "holds a password" in out.stderr and "secret" not in out.stderr
