"""The replica client against a private MySQL 9 server: a byte-exact mirror of its binlogs (a row over
the 16 MiB packet limit, compressed transactions, DDL, rotations), the stream decoded as its files
are, and a mirror cut inside a transaction continued to the same bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.reader import BinlogReader
from binlake.replication.client import ReplicaClient, ServerAddress
from binlake.replication.mirror import Mirror
from binlake.replication.packets import MAX_PACKET
from binlake.replication.stream import StreamEvent
from binlake.txn import UNFINISHED, iter_transactions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from binlake.sandbox import PrivateMySQL, mysql_available, mysql_home

    if not mysql_available():
        pytest.skip(f"MySQL is not at {mysql_home()} (scripts/fetch-mysql; ./dev setup runs it)")
    with PrivateMySQL(tmp_path_factory.mktemp("mysql-rpl"), max_allowed_packet="64M") as db:
        db.execute(
            "CREATE DATABASE rpl",
            "CREATE TABLE rpl.big (id INT PRIMARY KEY, b LONGBLOB)",
            "INSERT INTO rpl.big VALUES (1, REPEAT('abcdefghij', 2097152))",  # 20 MiB: several packets
            "CREATE TABLE rpl.c (id INT PRIMARY KEY, v VARCHAR(200), j JSON, d DATETIME(6), u BIGINT UNSIGNED)",
        )
        db.execute("FLUSH BINARY LOGS")
        conn = db.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_transaction_compression = ON")  # TRANSACTION_PAYLOAD events
            for i in range(20):
                cur.execute(
                    "INSERT INTO rpl.c VALUES (%s, REPEAT('compressible ', 10), %s, NOW(6), %s)",
                    (i, f'{{"i": {i}, "a": [1, 2, {{"b": null}}]}}', 2**64 - 1 - i),
                )
            cur.execute("UPDATE rpl.c SET v = 'changed', j = JSON_SET(j, '$.i', 'x') WHERE id < 5")
        conn.close()
        db.execute(
            "FLUSH BINARY LOGS",
            "ALTER TABLE rpl.c ADD COLUMN n INT",
            "DELETE FROM rpl.c WHERE id > 15",
            "INSERT INTO rpl.c (id, n) VALUES (100, 1)",
        )
        yield db


def address(db: Any) -> ServerAddress:
    return ServerAddress(unix_socket=db.socket)


def mirrored(db: Any, target: Path, start: Any = "oldest") -> list[StreamEvent]:
    mirror = Mirror(target)
    items = []
    for item in ReplicaClient(address(db), start, blocking=False).events():
        assert isinstance(item, StreamEvent)
        mirror.write(item)
        items.append(item)
    mirror.close()
    return items


def test_mirror_equals_the_servers_files_and_decodes_the_same(server: Any, tmp_path: Path) -> None:
    items = mirrored(server, tmp_path / "m")
    files = server.binlog_files()
    assert len(files) >= 3
    for f in files:
        assert (tmp_path / "m" / f.name).read_bytes() == f.read_bytes(), f.name
    streamed = [
        (it.file, ev.offset, ev.inner_index, ev.type_code, ev.body)
        for it in items
        if it.in_file
        for ev in it.events
    ]
    in_files = [
        (f.name, ev.offset, ev.inner_index, ev.type_code, ev.body) for f in files for ev in BinlogReader(f)
    ]
    assert streamed == in_files
    assert max(len(it.raw) for it in items) > MAX_PACKET  # the 20 MiB row came in several packets
    kinds = {ev.type_name for it in items for ev in it.events}
    assert "TRANSACTION_PAYLOAD" in kinds and "GTID" in kinds, kinds


def test_a_mirror_cut_inside_a_transaction_continues_to_the_same_bytes(server: Any, tmp_path: Path) -> None:
    target = tmp_path / "m"
    mirrored(server, target)
    last = server.binlog_files()[-1]
    txns = [t for t in iter_transactions((0, e) for e in BinlogReader(last)) if t.kind != UNFINISHED]
    cut = txns[-2].start + 30
    with (target / last.name).open("r+b") as f:
        f.truncate(cut)
    resume = Mirror(target).resume_point()
    assert resume is not None and resume.position == max(t.end for t in txns if t.end <= cut)
    mirrored(server, target, resume)
    for f in server.binlog_files():
        assert (target / f.name).read_bytes() == f.read_bytes(), f.name
