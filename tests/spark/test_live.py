"""A live server into Delta: snapshot (in waves, resumed after a failure) while a workload runs,
then the binlog from before the snapshot; binlogs purged before the run do not matter."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from binlake.replication.client import ServerAddress
from tests.conftest import select_all


class Killed(Exception):
    pass


def test_snapshot_then_binlog_equals_the_tables(spark: Any, own_mariadb: Any, tmp_path: Path) -> None:
    server = own_mariadb
    from binlake.spark.apply import apply_changes, change_log, read_table
    from binlake.spark.live import LiveSync

    server.execute(
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(30))",
        "CREATE TABLE shop.`we ird` (k VARCHAR(10), n INT, v INT, PRIMARY KEY (n, k))",
    )
    server.execute(
        "INSERT INTO orders SELECT seq, seq / 4, CONCAT('o', seq) FROM seq_1_to_3000",
        "INSERT INTO `we ird` SELECT CHAR(97 + seq % 20), seq, seq * 2 FROM seq_1_to_1000",
        database="shop",
    )
    conn = server.connect()
    with conn.cursor() as cur:  # the binlogs that wrote the rows are gone: only the snapshot has them
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        cur.execute(f"PURGE BINARY LOGS TO '{cur.fetchone()[0]}'")
    conn.close()

    stop = threading.Event()

    def workload() -> None:
        rnd, c = random.Random(3), server.connect("shop")
        with c.cursor() as cur:
            n = 0
            while not stop.is_set():
                n += 1
                k = rnd.randint(1, 3200)
                cur.execute(
                    rnd.choice(
                        [
                            f"UPDATE orders SET note = 'u{n}' WHERE id = {k}",
                            f"DELETE FROM orders WHERE id = {k}",
                            f"INSERT IGNORE INTO orders VALUES ({k}, 1.5, 'i{n}')",
                            f"UPDATE IGNORE orders SET id = id + 5000 WHERE id = {k}",
                            f"UPDATE `we ird` SET v = v + 1 WHERE n = {k % 1000}",
                        ]
                    )
                )
        c.close()

    address = ServerAddress(unix_socket=server.socket, user="root", ssl_disabled=True)
    state, lake = tmp_path / "state", tmp_path / "lake"
    live = LiveSync(address, state, keep=lambda db, t: db == "shop", rows_per_chunk=500, chunks_per_wave=3)
    assert len(live.journal.chunks) == 7 + 3  # 3000 rows: 6 full ranges and an empty rest; 1000: 2 and a rest
    waves = 0

    def apply_until_killed(df: Any, source: str) -> Any:
        nonlocal waves
        waves += 1
        if waves == 3:
            raise Killed  # the third wave dies before its commit: the journal keeps the first two
        return apply_changes(df, lake, source=source, positioned=False)

    writer = threading.Thread(target=workload)
    writer.start()
    try:
        with pytest.raises(Killed):
            live.snapshot(spark, apply_until_killed)
        assert len(live.journal.done) == 6
        resumed = LiveSync(address, state, keep=lambda db, t: db == "shop")
        assert resumed.journal.done == live.journal.done and len(resumed.journal.remaining) == 4
        resumed.snapshot(spark, lambda df, s: apply_changes(df, lake, source=s, positioned=False))
        assert resumed.journal.complete
    finally:
        stop.set()
        writer.join()
    assert resumed.mirror(blocking=False) > 0
    report = apply_changes(change_log(spark, str(resumed.mirror_dir)), lake, source=str(resumed.mirror_dir))
    assert report.changes > 50  # the workload ran during the snapshot
    for name in ("orders", "we ird"):
        got = read_table(lake, "shop", name)  # tombstones left out
        rows = sorted(
            tuple(r[c] for c in got.column_names if not c.startswith("_binlake")) for r in got.to_pylist()
        )
        assert rows == select_all(server, "shop", name), name
