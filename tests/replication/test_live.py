"""The replica client against a private MariaDB: byte-exact mirror, same decoding as the server's
files, events over 16 MiB, GTID starts, TLS, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql
import pytest

from binlake.errors import ReplicationError
from binlake.reader import BinlogReader
from binlake.replication.client import (
    FilePosition,
    GtidStart,
    ReplicaClient,
    ServerAddress,
    current_position,
)
from binlake.replication.mirror import Mirror
from binlake.replication.packets import MAX_PACKET
from binlake.replication.stream import StreamEvent
from binlake.txn import UNFINISHED, iter_transactions
from tests.support.alltypes import run_workload

pytestmark = pytest.mark.slow


def address(db: Any, **kw: Any) -> ServerAddress:
    return ServerAddress(unix_socket=db.socket, **kw)


@pytest.fixture(scope="module")
def workload(source_db: Any) -> Any:
    """All column types, a 20 MiB row (one event over the packet limit), compressed events, DDL and
    two rotations; returns the server."""
    db = source_db
    run_workload(db, "rpl_types")
    db.execute("FLUSH BINARY LOGS")
    db.execute(
        "CREATE DATABASE rpl",
        "CREATE TABLE rpl.big (id INT PRIMARY KEY, b LONGBLOB)",
        "INSERT INTO rpl.big VALUES (1, REPEAT('abcdefghij', 2097152))",  # 20 MiB
        "SET GLOBAL log_bin_compress = ON",
        "SET GLOBAL log_bin_compress_min_len = 10",
        "CREATE TABLE rpl.c (id INT PRIMARY KEY, v VARCHAR(200))",
    )
    for i in range(20):
        db.execute(f"INSERT INTO rpl.c VALUES ({i}, REPEAT('compressible ', 10))")
    db.execute("UPDATE rpl.c SET v = 'changed' WHERE id < 5", "SET GLOBAL log_bin_compress = OFF")
    db.execute("FLUSH BINARY LOGS", "ALTER TABLE rpl.c ADD COLUMN n INT", "DELETE FROM rpl.c WHERE id > 15")
    return db


def file_events(db: Any) -> list[tuple[Any, ...]]:
    return [
        (f.name, ev.offset, ev.inner_index, ev.type_code, ev.body)
        for f in db.binlog_files()
        for ev in BinlogReader(f)
    ]


def test_mirror_equals_the_servers_files_and_decodes_the_same(workload: Any, tmp_path: Path) -> None:
    db = workload
    mirror = Mirror(tmp_path / "mirror")
    items = []
    for item in ReplicaClient(address(db), "oldest", blocking=False).events():
        assert isinstance(item, StreamEvent)
        mirror.write(item)
        items.append(item)
    mirror.close()
    files = db.binlog_files()
    assert len(files) >= 3
    for f in files:  # byte for byte, the active file (in-use flag set) included
        assert (tmp_path / "mirror" / f.name).read_bytes() == f.read_bytes(), f.name
    assert mirror.files() == [f.name for f in files]
    # the stream decodes to exactly what the server's files decode to
    streamed = [
        (it.file, ev.offset, ev.inner_index, ev.type_code, ev.body)
        for it in items
        if it.in_file
        for ev in it.events
    ]
    assert streamed == file_events(db)
    assert max(len(it.raw) for it in items) > MAX_PACKET  # the 20 MiB row came in several packets
    kinds = {ev.type_name for it in items for ev in it.events}
    assert {"MARIA_WRITE_ROWS_COMPRESSED_V1", "MARIA_QUERY_COMPRESSED"} & kinds, kinds


def test_mirror_continues_where_it_stopped(workload: Any, tmp_path: Path) -> None:
    """A mirror cut inside a transaction (as a killed `binlake mirror` leaves it) is cut back to its
    last complete transaction and continued: the result is the server's files again."""
    db = workload
    target = tmp_path / "mirror"
    mirror = Mirror(target)
    for item in ReplicaClient(address(db), "oldest", blocking=False).events():
        assert isinstance(item, StreamEvent)
        mirror.write(item)
    mirror.close()
    last = db.binlog_files()[-1]
    txns = [t for t in iter_transactions((0, e) for e in BinlogReader(last)) if t.kind != UNFINISHED]
    cut = txns[-2].start + 30  # inside the second-to-last transaction
    with (target / last.name).open("r+b") as f:
        f.truncate(cut)
    again = Mirror(target)
    resume = again.resume_point()
    assert resume == FilePosition(last.name, max((t.end for t in txns if t.end <= cut), default=4))
    for item in ReplicaClient(address(db), resume, blocking=False).events():
        assert isinstance(item, StreamEvent)
        again.write(item)
    again.close()
    for f in db.binlog_files():
        assert (target / f.name).read_bytes() == f.read_bytes(), f.name


def test_gtid_start_gets_exactly_the_transactions_after_it(workload: Any) -> None:
    db = workload
    txns = [
        t
        for t in iter_transactions((i, e) for i, f in enumerate(db.binlog_files()) for e in BinlogReader(f))
        if t.kind != UNFINISHED
    ]
    middle = txns[len(txns) // 2].gtid
    assert middle is not None
    client = ReplicaClient(address(db), GtidStart(middle), blocking=False, keep_events=True)
    got = list(client.transactions())
    assert [t.gtid for t in got] == [t.gtid for t in txns[len(txns) // 2 + 1 :]]
    assert all(t.events for t in got)


def test_position_start_and_binlog_status_fallback(workload: Any) -> None:
    db = workload
    conn = db.connect()
    try:
        with pytest.raises(pymysql.err.ProgrammingError), conn.cursor() as cur:  # not in MariaDB 10.11
            cur.execute("SHOW BINARY LOG STATUS")
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        assert current_position(conn) == FilePosition(file, int(pos))
    finally:
        conn.close()
    # from the current end, a non-blocking dump has nothing of the file to send
    items = list(ReplicaClient(address(db), "current", blocking=False).events())
    assert not [it for it in items if isinstance(it, StreamEvent) and it.in_file]


def test_tls_connection(workload: Any) -> None:
    db = workload
    if db.pki is None:
        pytest.skip("openssl is not installed: no certificate for the TLS test")
    db.execute(
        "CREATE USER IF NOT EXISTS 'tlsrepl'@'127.0.0.1' IDENTIFIED BY 'pw' REQUIRE SSL",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'tlsrepl'@'127.0.0.1'",
    )
    plain = ServerAddress("127.0.0.1", db.port, "tlsrepl", "pw", ssl_disabled=True)
    with pytest.raises(ReplicationError) as e:
        list(ReplicaClient(plain, "oldest", blocking=False).events())
    assert e.value.code == 1045  # refused without TLS, and not retried
    ciphers: list[str] = []

    def record(conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            ciphers.append(cur.fetchone()[1])

    secure = ServerAddress("127.0.0.1", db.port, "tlsrepl", "pw", ssl_ca=str(db.pki.ca))
    client = ReplicaClient(secure, "oldest", blocking=False, on_connect=record)
    got = [t.gtid for t in client.transactions()]
    assert ciphers and ciphers[0]
    expected = [
        t.gtid
        for t in iter_transactions((i, e) for i, f in enumerate(db.binlog_files()) for e in BinlogReader(f))
        if t.kind != UNFINISHED
    ]
    assert got == expected


def test_server_errors_are_clear_and_not_retried(workload: Any) -> None:
    db = workload
    with pytest.raises(ReplicationError) as e:
        list(ReplicaClient(address(db), FilePosition("mariadb-bin.999999"), blocking=False).events())
    assert e.value.code == 1236 and "mariadb-bin.999999:4" in str(e.value)
    first = db.binlog_files()[0].name
    with pytest.raises(ReplicationError) as e:
        list(ReplicaClient(address(db), FilePosition(first, 7), blocking=False).events())
    assert f"{first}:7 was expected" in str(e.value) and "event boundary" in str(e.value)
    db.execute("CREATE USER IF NOT EXISTS 'nopriv'@'localhost' IDENTIFIED BY 'pw'")
    with pytest.raises(ReplicationError) as e:
        list(
            ReplicaClient(
                address(db, user="nopriv", password="pw"), FilePosition(first), blocking=False
            ).events()
        )
    assert e.value.code in (1045, 1227) and "needs the REPLICATION SLAVE privilege" in str(e.value)
    with pytest.raises(ReplicationError) as e:
        list(ReplicaClient(address(db, user="root", password="wrong"), "oldest", blocking=False).events())
    assert e.value.code == 1045


def test_a_server_never_reached_fails_at_once(tmp_path: Path) -> None:
    """Reconnecting is for a stream that was running; a wrong address is reported straight away."""
    import time

    t0 = time.monotonic()
    with pytest.raises(ReplicationError, match="cannot connect"):
        list(ReplicaClient(ServerAddress(unix_socket=str(tmp_path / "none.sock")), "oldest").events())
    assert time.monotonic() - t0 < 30
