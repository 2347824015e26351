"""Replication client speed: binlake vs python-mysql-replication against the same private MariaDB,
in the same run, both reading the whole binlog as replicas (over the Unix socket) and decoding
every row.

    python benchmarks/replication.py [--rows 300000]

Prints events/s and rows/s of each client and the ratio. Both verify nothing they need not: binlake
checks CRC32 (its default), python-mysql-replication does not (its default); both decode all values.

Over TCP on this machine python-mysql-replication's dump connection to MariaDB 10.11 is reset after
a few seconds, and with ``resume_stream`` it starts again from its first position (every event seen
again), so both clients use the Unix socket here: the same transport for both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from binlake.events.rows import Rows
from binlake.replication.client import FilePosition, ReplicaClient, ServerAddress
from binlake.replication.stream import StreamEvent
from binlake.sandbox import PrivateMariaDB

ROOT = Path("out/bench/replication")


def load(db: PrivateMariaDB, rows: int) -> None:
    """Half the rows one per transaction (OLTP-like), half in 500-row statements, then a bulk
    UPDATE and DELETE (long transactions of many rows events)."""
    db.execute(
        "CREATE DATABASE IF NOT EXISTS b",
        "CREATE TABLE b.t (id INT PRIMARY KEY, n BIGINT, s VARCHAR(64), d DECIMAL(12,2), "
        "ts DATETIME(6), j JSON, f DOUBLE)",
    )
    now = dt.datetime(2026, 11, 22, 12, 0, 0, 123456)

    def row(i: int) -> tuple[Any, ...]:
        return (i, i * 7919, f"name-{i}", Decimal(i) / 100, now, f'{{"k": {i}, "tag": "t{i % 13}"}}', i / 3)

    sql = "INSERT INTO b.t VALUES (%s, %s, %s, %s, %s, %s, %s)"
    conn = db.connect()
    with conn.cursor() as cur:
        half = rows // 2
        for i in range(half):
            cur.execute(sql, row(i))
        for start in range(half, rows, 500):
            cur.executemany(sql, [row(i) for i in range(start, min(rows, start + 500))])
        cur.execute("UPDATE b.t SET n = n + 1, s = CONCAT(s, '+') WHERE id % 4 = 0")
        cur.execute("DELETE FROM b.t WHERE id % 10 = 0")
    conn.close()


def bench_binlake(addr: ServerAddress, first: str) -> tuple[float, int, int]:
    events = rows = 0
    t0 = time.perf_counter()
    for item in ReplicaClient(addr, FilePosition(first), blocking=False).events():
        assert isinstance(item, StreamEvent)
        if item.in_file:
            events += 1
            body = item.event.body
            if isinstance(body, Rows):
                rows += len(body.rows)
    return time.perf_counter() - t0, events, rows


def bench_pmr(addr: ServerAddress, first: str) -> tuple[float, int, int]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import RowsEvent

    events = rows = 0
    t0 = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"unix_socket": addr.unix_socket, "user": addr.user, "passwd": addr.password},
        server_id=2_000_000_001,
        blocking=False,
        resume_stream=True,
        log_file=first,
        log_pos=4,
        is_mariadb=True,
        annotate_rows_event=True,
        enable_logging=False,
    )
    for ev in stream:
        events += 1
        if isinstance(ev, RowsEvent):
            rows += len(ev.rows)
    stream.close()
    return time.perf_counter() - t0, events, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    shutil.rmtree(ROOT, ignore_errors=True)
    with PrivateMariaDB(ROOT) as db:
        load(db, args.rows)
        files = db.flush_binlogs()
        size = sum(f.stat().st_size for f in files)
        addr = ServerAddress(unix_socket=db.socket, ssl_disabled=True)
        first = files[0].name
        ours = min((bench_binlake(addr, first) for _ in range(2)), key=lambda r: r[0])
        theirs = min((bench_pmr(addr, first) for _ in range(2)), key=lambda r: r[0])
    print(f"binlog: {size / 1e6:.1f} MB in {len(files)} files, MariaDB, Unix socket, best of 2 runs each")
    for name, (sec, events, rows) in (("binlake", ours), ("python-mysql-replication", theirs)):
        print(
            f"{name:26s} {sec:7.2f} s  {events / sec:9.0f} events/s  {rows / sec:9.0f} rows/s  "
            f"({events} events, {rows} rows)"
        )
    print(
        f"binlake / python-mysql-replication: {theirs[0] / ours[0]:.1f}x "
        f"(rows/s {ours[2] / ours[0] / (theirs[2] / theirs[0]):.1f}x)"
    )


if __name__ == "__main__":
    main()
