"""`binlake mirror` feeding a streaming sync: while a workload writes to a live MariaDB, the mirror
copies its binlogs and the `binlog` stream (processing-time trigger) applies them to Delta; each time
the workload pauses and the stream catches up, the Delta table equals SELECT * of the source."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from binlake.sandbox import PrivateMariaDB, mariadb_available
from binlake.spark.apply import stream_to
from binlake.spark.sinks.delta import delta_tables, read_delta

pytestmark = pytest.mark.slow


def source_rows(db: Any) -> dict[int, tuple[Any, ...]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, n, s, amount FROM shop.orders")
            return {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    finally:
        conn.close()


def delta_rows(target: Path) -> dict[int, tuple[Any, ...]]:
    if "shop.orders" not in delta_tables(target):
        return {}
    try:
        rows = read_delta(target, "shop.orders").to_pylist()
    except Exception:  # a commit in progress: read again later
        return {}
    return {
        r["id"]: (r["n"], r["s"], Decimal(str(r["amount"])) if r["amount"] is not None else None)
        for r in rows
    }


def phase(db: Any, k: int) -> None:
    conn = db.connect()
    with conn.cursor() as cur:
        for i in range(60):
            cur.execute("BEGIN")
            cur.execute(
                "INSERT INTO shop.orders (n, s, amount) VALUES (%s, %s, %s)",
                (k * 1000 + i, f"p{k}-{i}", Decimal("1.25") * i),
            )
            if i % 3 == 0:
                cur.execute(
                    "UPDATE shop.orders SET s = CONCAT(s, '!'), amount = amount + 1 WHERE id %% 7 = %s",
                    (i % 7,),
                )
            if i % 10 == 9:
                cur.execute("DELETE FROM shop.orders WHERE id %% 11 = %s LIMIT 2", (i % 11,))
            cur.execute("COMMIT")
            if i == 30 and k == 1:
                cur.execute("FLUSH BINARY LOGS")
    conn.close()


def wait_equal(db: Any, target: Path, timeout: float = 180) -> None:
    want = source_rows(db)
    deadline = time.monotonic() + timeout
    got: dict[int, tuple[Any, ...]] = {}
    while time.monotonic() < deadline:
        got = delta_rows(target)
        if got == want:
            return
        time.sleep(1)
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    diff = [k for k in want if k in got and got[k] != want[k]][:5]
    raise AssertionError(f"Delta never equalled the source: missing {missing}, extra {extra}, differ {diff}")


def test_mirror_feeds_a_streaming_sync(spark: Any, tmp_path: Path) -> None:
    if not mariadb_available():
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    db = PrivateMariaDB(tmp_path / "server").start()
    mirror_dir, target, ckpt = tmp_path / "mirror", tmp_path / "delta", tmp_path / "ckpt"
    mirror = None
    query = None
    try:
        db.execute(
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id INT PRIMARY KEY AUTO_INCREMENT, n INT, s VARCHAR(60), amount DECIMAL(10,2))",
            "INSERT INTO shop.orders (n, s, amount) VALUES (0, 'first', 9.99)",
        )
        mirror = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "binlake.cli",
                "mirror",
                "--socket",
                db.socket,
                "--to",
                str(mirror_dir),
                "--heartbeat",
                "1",
            ],
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not list(mirror_dir.glob("*.index")) and time.monotonic() < deadline:
            time.sleep(0.2)
        query = stream_to(
            spark, str(mirror_dir), target, ckpt, available_now=False, interval="1 second"
        )
        for k in (1, 2):
            phase(db, k)
            wait_equal(db, target)
        assert len(list(mirror_dir.glob("mariadb-bin.0*"))) >= 2  # the mirror followed a rotation
        assert query.isActive and query.exception() is None
    finally:
        if query is not None:
            query.stop()
        if mirror is not None:
            os.killpg(mirror.pid, signal.SIGTERM)
            mirror.wait(30)
        db.stop()
