"""The embedded default run: a private MariaDB writes a sample binlog, binlake decodes it.

Until the Spark pipeline lands this is the README's main-job command; it grows with the product.
"""

from __future__ import annotations

import collections
import json
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from binlake.events.rows import Rows
from binlake.reader import BinlogReader
from binlake.render.jsonl import render_jsonl
from binlake.render.text import render_text
from binlake.sandbox import PrivateMariaDB, mariadb_available

WORKLOAD = [
    "CREATE DATABASE shop",
    """CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(64), email VARCHAR(128),
       balance DECIMAL(12,2), joined DATE, tier ENUM('basic','gold','platinum'))""",
    """CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT, total DECIMAL(12,2),
       placed_at DATETIME(6), status VARCHAR(16), note TEXT, meta JSON)""",
    """INSERT INTO shop.customers VALUES (1, 'Ada Lovelace', 'ada@example.com', 120.50, '2021-03-01', 'gold'),
       (2, 'Grace Hopper', 'grace@example.com', 0.00, '2022-07-15', 'basic'),
       (3, 'Zoë Ünicode', 'zoe@example.com', -15.25, '0000-00-00', 'platinum')""",
    """INSERT INTO shop.orders VALUES (10, 1, 99.95, '2024-05-01 10:00:00.123456', 'new', NULL, '{"items": 3}'),
       (11, 2, 12.00, '2024-05-01 10:05:00', 'new', 'gift wrap 🎁', '{"items": 1, "gift": true}')""",
    "UPDATE shop.orders SET status = 'paid' WHERE id = 10",
    "UPDATE shop.customers SET balance = balance - 99.95 WHERE id = 1",
    "DELETE FROM shop.orders WHERE id = 11",
    "ALTER TABLE shop.customers ADD COLUMN phone VARCHAR(20)",
    "INSERT INTO shop.customers (id, name, phone) VALUES (4, 'Linus', '+358 123')",
]


def run_demo(workdir: str | Path, console: Console | None = None) -> int:
    console = console or Console()
    root = Path(workdir).resolve()
    if not mariadb_available():
        console.print("[red]mariadbd is not installed: run ./dev setup (installs mariadb-server)[/red]")
        return 1
    started = time.time()
    shutil.rmtree(root / "server", ignore_errors=True)  # every run starts from an empty server
    db = PrivateMariaDB(root / "server")
    db.start()
    try:
        conn = db.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            for sql in WORKLOAD:
                cur.execute(sql)
        conn.close()
        files = db.flush_binlogs()[:-1]
    finally:
        db.stop()
    text_out, json_out = root / "dump.txt", root / "dump.jsonl"
    text_out.write_text(
        "\n".join(line for f in files for line in render_text(BinlogReader(f))) + "\n",
        errors="surrogateescape",
    )
    json_out.write_text("\n".join(line for f in files for line in render_jsonl(BinlogReader(f))) + "\n")

    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    events = 0
    for f in files:
        for ev in BinlogReader(f):
            events += 1
            if isinstance(ev.body, Rows) and ev.body.table is not None:
                counts[(ev.body.table.database, ev.body.table.table, ev.body.operation)] += len(ev.body.rows)
    table = Table(title=f"binlake demo: {events} events in {len(files)} binlog file(s)")
    for col in ("database", "table", "operation", "rows"):
        table.add_column(col, justify="right" if col == "rows" else "left")
    for (db_name, tbl, op), n in sorted(counts.items()):
        table.add_row(db_name, tbl, op, str(n))
    console.print(table)
    sample = [json.loads(line) for line in json_out.read_text().splitlines()]
    update = next(o for o in sample if o["type"] == "UPDATE_ROWS_V1" or o["type"].startswith("UPDATE_ROWS"))
    console.print("one decoded UPDATE, as JSON:", update["body"]["rows"][0])
    console.print(
        f"mysqlbinlog-style text: {text_out}\nJSON lines: {json_out}\n(done in {time.time() - started:.1f}s)"
    )
    return 0
