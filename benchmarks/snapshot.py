"""Snapshot speed: binlake's chunked consistent snapshot vs ``mariadb-dump --single-transaction``
of the same tables of a private MariaDB, in the same run.

    python benchmarks/snapshot.py [--rows 200000] [--chunk 50000] [--spark]

Both read every row of every table. ``mariadb-dump`` writes SQL text to /dev/null (its output
is not parsed); binlake reads each chunk in its own consistent snapshot with its binlog position
and turns every value into the decoder's exact Python value (``binlake.snapshot``), one process;
with ``--spark`` also as Spark tasks into change-log rows (local[2], counted). Prints rows/s and
MB/s (of the tables' data length as the server reports it) and the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from pathlib import Path

from binlake.replication.client import ServerAddress
from binlake.sandbox import PrivateMariaDB
from binlake.snapshot.chunks import chunk_changes, raw_conversions, read_chunk
from binlake.spark.snapshot import plan

ROOT = Path("out/bench/snapshot")
TABLES = {
    "orders": "id INT PRIMARY KEY, customer BIGINT UNSIGNED, amount DECIMAL(12,2), note VARCHAR(64), "
    "created DATETIME(6), status ENUM('new','paid','sent')",
    "events": "id BIGINT PRIMARY KEY, payload JSON, at TIMESTAMP(3) NULL, score DOUBLE, flag BIT(1)",
    "people": "email VARCHAR(80) PRIMARY KEY, name VARCHAR(60), born DATE, note TEXT",
    "items": "sku CHAR(12), shop INT, price FLOAT, stock SMALLINT, PRIMARY KEY (sku, shop)",
}
FILL = {
    "orders": "SELECT seq, seq * 7919, seq / 100, CONCAT('note ', seq), NOW(6), 1 + seq % 3 FROM seq_1_to_{n}",
    "events": "SELECT seq, CONCAT('{{\"k\": ', seq, ', \"tag\": \"t', seq % 13, '\"}}'), NOW(3), seq / 3, seq % 2 "
    "FROM seq_1_to_{n}",
    "people": "SELECT CONCAT('p', seq, '@example.org'), CONCAT('Name ', seq), '1990-01-01' + INTERVAL seq % 9000 DAY, "
    "REPEAT('x', seq % 200) FROM seq_1_to_{n}",
    "items": "SELECT LPAD(seq, 12, '0'), seq % 5, seq / 9, seq % 1000 FROM seq_1_to_{n}",
}


def load(db: PrivateMariaDB, rows: int) -> None:
    db.execute("CREATE DATABASE IF NOT EXISTS snap")
    per = rows // len(TABLES)
    for name, cols in TABLES.items():
        db.execute(
            f"CREATE OR REPLACE TABLE {name} ({cols})",
            FILL[name].format(n=per).join([f"INSERT INTO {name} ", ""]),
            database="snap",
        )


def data_bytes(db: PrivateMariaDB) -> int:
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute("ANALYZE TABLE snap.orders, snap.events, snap.people, snap.items")
        cur.fetchall()
        cur.execute("SELECT SUM(DATA_LENGTH) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'snap'")
        n = int(cur.fetchone()[0])
    conn.close()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(ROOT, ignore_errors=True)
    with PrivateMariaDB(ROOT / "server") as db:
        load(db, args.rows)
        size = data_bytes(db)
        t0 = time.perf_counter()
        subprocess.run(
            ["mariadb-dump", f"--socket={db.socket}", "-uroot", "--single-transaction", "snap"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        dump_s = time.perf_counter() - t0
        server = ServerAddress(unix_socket=db.socket, user="root", ssl_disabled=True)
        t0 = time.perf_counter()
        tasks = plan(server, lambda d, t: d == "snap", args.chunk)
        plan_s = time.perf_counter() - t0
        conn = server.connect(conv=raw_conversions(), use_unicode=False)
        n = 0
        for task in tasks:
            n += sum(1 for _ in chunk_changes(read_chunk(conn, task.table, task.range)))
        conn.close()
        ours_s = time.perf_counter() - t0
        mb = size / 1e6
        print(
            f"tables: {len(TABLES)}, rows: {n:,}, data {mb:.1f} MB, chunks: {len(tasks)} (planning {plan_s:.2f} s)"
        )
        print(f"{'reader':<44} {'s':>7} {'rows/s':>10} {'MB/s':>7}")
        print(
            f"{'mariadb-dump --single-transaction (C)':<44} {dump_s:7.2f} {n / dump_s:10,.0f} {mb / dump_s:7.1f}"
        )
        print(f"{'binlake snapshot, one process':<44} {ours_s:7.2f} {n / ours_s:10,.0f} {mb / ours_s:7.1f}")
        if args.spark:
            from binlake.spark.session import spark_session
            from binlake.spark.snapshot import snapshot_changelog

            spark = spark_session("local[2]")
            t0 = time.perf_counter()
            count = snapshot_changelog(
                spark, server, plan(server, lambda d, t: d == "snap", args.chunk)
            ).count()
            spark_s = time.perf_counter() - t0
            assert count == n, (count, n)
            print(
                f"{'binlake snapshot, Spark local[2] change log':<44} {spark_s:7.2f} {n / spark_s:10,.0f} {mb / spark_s:7.1f}"
            )
            spark.stop()
        print(f"binlake one process / mariadb-dump: {dump_s / ours_s:.2f}x the speed")


if __name__ == "__main__":
    main()
