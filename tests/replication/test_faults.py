"""Faults: the replication connection is killed and the server restarted, again and again, while a
workload writes; the client's transactions and the mirror have no gap and no duplicate."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.reader import BinlogReader
from binlake.replication.client import Reconnected, ReplicaClient, ServerAddress
from binlake.replication.mirror import Mirror
from binlake.replication.stream import StreamEvent
from binlake.txn import UNFINISHED, iter_transactions

pytestmark = pytest.mark.slow


def workload(db: Any, stop: threading.Event, errors: list[str]) -> None:
    """Three-row transactions and a rotation now and then, reconnecting through restarts."""
    conn, i = None, 0
    while not stop.is_set():
        try:
            if conn is None:
                conn = db.connect()
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                for _ in range(3):
                    cur.execute("INSERT INTO f.t (w, v) VALUES (%s, REPEAT('x', 50))", (i,))
                cur.execute("UPDATE f.t SET v = 'updated' WHERE w = %s LIMIT 1", (i // 2,))
                cur.execute("COMMIT")
                i += 1
                if i % 200 == 0:
                    cur.execute("FLUSH BINARY LOGS")
        except Exception as e:  # the server is restarting: try again
            errors.append(type(e).__name__)
            conn = None
            time.sleep(0.1)


def kill_dump_threads(db: Any) -> int:
    """Kill the replica's connection once it is back (it may still be reconnecting)."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                ids = [r[0] for r in cur.fetchall()]
                if ids:
                    for i in ids:
                        cur.execute(f"KILL {i}")
                    return len(ids)
                time.sleep(0.05)
        return 0
    finally:
        conn.close()


def server_position(db: Any) -> tuple[str, int]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            return str(row[0]), int(row[1])
    finally:
        conn.close()


def test_kills_and_restarts_lose_and_repeat_nothing(source_db: Any, tmp_path: Path) -> None:
    db = source_db
    db.execute(
        "CREATE DATABASE f", "CREATE TABLE f.t (id INT PRIMARY KEY AUTO_INCREMENT, w INT, v VARCHAR(100))"
    )
    client = ReplicaClient(ServerAddress(unix_socket=db.socket), "oldest", heartbeat=0.5)
    mirror = Mirror(tmp_path / "mirror")
    gtids: list[str | None] = []
    reconnects: list[Reconnected] = []
    target: list[tuple[str, int]] = []
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            for item in client.events():
                if isinstance(item, Reconnected):
                    reconnects.append(item)
                    continue
                assert isinstance(item, StreamEvent) and client.stream is not None
                mirror.write(item)
                gtids.extend(t.gtid for t in client.stream.take_transactions())
                if target and (client.stream.file, client.stream.position) >= target[0]:
                    break
        except BaseException as e:  # surfaced by the main thread
            failure.append(e)
        finally:
            client.close()
            mirror.close()

    stop, errors = threading.Event(), []
    writer = threading.Thread(target=workload, args=(db, stop, errors))
    reader = threading.Thread(target=consume)
    writer.start()
    reader.start()
    rng = random.Random(7)
    kills = restarts = 0
    for round_ in range(8):
        time.sleep(rng.uniform(0.3, 1.2))
        if round_ in (3, 6):
            db.stop()
            db.start()
            restarts += 1
        else:
            kills += kill_dump_threads(db)
    time.sleep(1.0)
    stop.set()
    writer.join(60)
    target.append(server_position(db))
    reader.join(120)
    assert not reader.is_alive(), "the client did not catch up with the server"
    assert not failure, failure
    assert kills >= 4 and restarts == 2, ("\n".join(r.reason for r in reconnects), failure)
    assert len(reconnects) >= kills + restarts

    files = db.binlog_files()
    expected = [
        t.gtid
        for t in iter_transactions((i, e) for i, f in enumerate(files) for e in BinlogReader(f))
        if t.kind != UNFINISHED
    ]
    assert len(expected) > 100
    assert len(gtids) == len(set(gtids))  # nothing twice
    assert gtids == expected  # nothing lost, in the server's order
    for f in files:
        assert (tmp_path / "mirror" / f.name).read_bytes() == f.read_bytes(), f.name
