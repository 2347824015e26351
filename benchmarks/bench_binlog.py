"""A large, mixed-type binlog written by a private MariaDB, cached under out/bench (shared by the
benchmarks)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from binlake.sandbox import PrivateMariaDB

SCHEMA = [
    """CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT, amount DECIMAL(12,2),
       status ENUM('new','paid','shipped'), created DATETIME(6), note VARCHAR(100), flags TINYINT UNSIGNED)""",
    """CREATE TABLE events (id BIGINT PRIMARY KEY, ts TIMESTAMP(3) NULL, kind SMALLINT, payload VARCHAR(255),
       score DOUBLE, active BIT(1), d DATE)""",
    """CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(64), email VARCHAR(128), birthday DATE,
       balance DECIMAL(18,4), tags SET('a','b','c'), updated TIMESTAMP NULL, bio TEXT)""",
]


def _batch(offset: int, n: int) -> list[str]:
    lo, hi = offset + 1, offset + n
    seq = f"seq_{lo}_to_{hi}"
    return [
        f"""INSERT INTO orders SELECT seq, seq % 5000, seq * 1.25, ELT(1 + seq % 3, 'new', 'paid', 'shipped'),
            '2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL seq % 1000000 MICROSECOND,
            CONCAT('order note ', seq), seq % 256 FROM {seq}""",
        f"""INSERT INTO events SELECT seq, '2024-01-01' + INTERVAL seq SECOND, seq % 300,
            REPEAT(CHAR(65 + seq % 26), 20 + seq % 80), seq / 7.0, seq % 2, '2020-01-01' + INTERVAL seq % 1000 DAY FROM {seq}""",
        f"""INSERT INTO customers SELECT seq, CONCAT('name-', seq), CONCAT('user', seq, '@example.com'),
            '1950-01-01' + INTERVAL seq % 20000 DAY, seq * 3.1415, seq % 8, '2023-06-01' + INTERVAL seq MINUTE,
            IF(seq % 10 = 0, REPEAT('bio ', 50), NULL) FROM {seq}""",
        f"UPDATE orders SET status = 'paid', amount = amount + 1, note = CONCAT(note, '!') WHERE id BETWEEN {lo} AND {hi} AND id % 2 = 0",
        f"UPDATE customers SET balance = balance - 10, updated = updated + INTERVAL 1 DAY WHERE id BETWEEN {lo} AND {hi} AND id % 3 = 0",
        f"DELETE FROM events WHERE id BETWEEN {lo} AND {hi} AND id % 5 = 0",
    ]


def ensure_binlog(target_mb: int = 100, root: Path = Path("out/bench")) -> list[Path]:
    """Binlog files of at least ``target_mb`` MB (generated once, then reused)."""
    marker = root / f"binlog-{target_mb}mb.json"
    if marker.exists():
        files = [Path(p) for p in json.loads(marker.read_text())["files"]]
        if all(f.exists() for f in files):
            return files
    db = PrivateMariaDB(root / f"server-{target_mb}", max_binlog_size="268435456")
    db.start()
    try:
        conn = db.connect()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS bench")
            cur.execute("USE bench")
            for ddl in SCHEMA:
                cur.execute(ddl)
            offset, started = 0, time.time()
            while sum(f.stat().st_size for f in db.binlog_files()) < target_mb * 1_000_000:
                for sql in _batch(offset, 20000):
                    cur.execute(sql)
                offset += 20000
            print(f"generated {offset} rows per table in {time.time() - started:.1f}s")
        conn.close()
        files = db.flush_binlogs()[:-1]
    finally:
        db.stop()
    marker.write_text(json.dumps({"files": [str(f.resolve()) for f in files]}))
    return files
