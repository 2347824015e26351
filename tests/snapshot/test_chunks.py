"""Snapshot chunks against a private MariaDB: the catalog's layout and the text protocol's values
equal what the binlog decoder gives for the same rows, chunks cover a table exactly once, and a
chunk's order key sits between the binlog changes before and after its snapshot."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from binlake.changes import RowChange
from binlake.snapshot.catalog import CatalogColumn, UnsupportedColumn, column_of, server_tables, table_layout
from binlake.snapshot.chunks import (
    KeyRange,
    SnapshotError,
    chunk_changes,
    plan_chunks,
    raw_conversions,
    read_chunk,
)
from tests.support.serverchanges import server_changes

HOSTILE_DB = "snap`; DROP DATABASE x; --"
TYPES_DDL = """CREATE TABLE {t} (
 id INT UNSIGNED PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT UNSIGNED,
 bi BIGINT UNSIGNED, sb BIGINT, de DECIMAL(12,3), de2 DECIMAL(40,10), f FLOAT, d DOUBLE, b1 BIT(1),
 b13 BIT(13), y YEAR, da DATE, dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(2),
 c CHAR(5), cl CHAR(5) CHARACTER SET latin1, vc VARCHAR(300), vb VARBINARY(20), bn BINARY(4),
 tx TEXT, mt MEDIUMTEXT CHARACTER SET latin1, bl BLOB, lb LONGBLOB, e ENUM('a','b''q','c'),
 s SET('x','y','z'), j JSON, g GEOMETRY, i6 INET6, `we``ird "col"` VARCHAR(10), ch CHAR(255)
)"""
ROWS = [
    "(1, -5, 250, -300, 16000000, 18446744073709551615, -9223372036854775808, -123456789.123, "
    "123456789012345678901234567890.0123456789, 0.1, 2.25, b'1', b'1010101010101', 2024, '2024-02-29', "
    "'2024-01-02 03:04:05', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123', '-838:59:59.99', "
    "'ab', 'é', 'xyz', x'00ff', x'0102', 'text', 'ü', x'deadbeef', x'00', 'b''q', 'x,z', "
    "'{\"a\": [1, 2.5, \"s\"]}', ST_GeomFromText('POINT(1 2)'), '::ffff:1.2.3.4', 'w`e', REPEAT('é', 200))",
    "(2, NULL, NULL, NULL, NULL, 0, NULL, 0.000, NULL, -3.4e38, 1e308, b'0', NULL, 0, '0000-00-00', "
    "'2024-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00.01', '', NULL, '', "
    "'', x'', NULL, NULL, NULL, NULL, '', '', NULL, NULL, NULL, NULL, NULL)",
    "(3, 127, 0, 32767, 0, 1, 9223372036854775807, 999999999.999, -1, 1.17549435e-38, -0.0, NULL, b'1111111111111', "
    "1901, '9999-12-31', '9999-12-31 23:59:59', '1000-01-01 00:00:00.000001', '2038-01-19 03:14:07.999', "
    "'838:59:59', 'a  ', 'ÿ', 'ünï', NULL, x'ffffffff', '', '', x'', x'', 'c', 'x,y,z', 'null', NULL, '::1', '', 'z')",
]


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A private server for this module: its hostile names must not reach the binlog other tests
    compare with mariadb-binlog (which prints a backquote in a name unescaped)."""
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available():
        pytest.skip("mariadbd is not installed (./dev setup installs it)")
    with PrivateMariaDB(tmp_path_factory.mktemp("snapshot-server")) as db:
        yield db


def _raw(mariadb: Any) -> Any:
    return mariadb.connect(conv=raw_conversions(), use_unicode=False)


@pytest.fixture(scope="module")
def types_table(mariadb: Any) -> tuple[str, str]:
    db, t = HOSTILE_DB, "all types"
    q = f"`{db.replace('`', '``')}`.`{t}`"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS `{db.replace('`', '``')}`", f"CREATE DATABASE `{db.replace('`', '``')}`"
    )
    mariadb.execute(TYPES_DDL.format(t=q))
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            for r in ROWS:
                cur.execute(f"INSERT INTO {q} VALUES {r}")
    finally:
        conn.close()
    return db, t


def test_layout_and_values_equal_the_binlogs(mariadb: Any, types_table: tuple[str, str]) -> None:
    db, t = types_table
    decoded = {c.key: c for c in server_changes(mariadb, db) if c.table == t}
    assert len(decoded) == len(ROWS)
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, db, t)
        chunk = read_chunk(conn, table, KeyRange(None, None))
    finally:
        conn.close()
    binlog_layout = next(iter(decoded.values())).layout
    assert table.layout == binlog_layout
    snap = list(chunk_changes(chunk))
    assert len(snap) == len(ROWS)
    for c in snap:
        want = decoded[c.key]
        for col, got, exp in zip(table.layout, c.after, want.after, strict=True):
            assert (type(got), got) == (type(exp), exp), col.name


def test_chunks_cover_each_row_once(mariadb: Any) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snapchunks",
        "CREATE OR REPLACE TABLE snapchunks.k (a VARCHAR(10) COLLATE utf8mb4_general_ci, b INT, v INT, PRIMARY KEY (a, b))",
    )
    names = ["Ä", "B", "b1", "ö", "Z", "z1", "é", "_", "a a", "ß"]  # distinct under the collation
    values = ", ".join(f"('{n}', {i}, {i * 10})" for n in names for i in range(3))
    mariadb.execute(f"INSERT INTO snapchunks.k VALUES {values}")
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, "snapchunks", "k")
        ranges = plan_chunks(conn, table, 4)
        chunks = [read_chunk(conn, table, r) for r in ranges]
    finally:
        conn.close()
    assert len(ranges) == 8  # 30 rows, a bound after every 4th
    keys = [c.key for ch in chunks for c in chunk_changes(ch)]
    assert len(keys) == 30 and len(set(keys)) == 30
    assert {k for k in keys} == {(n, i) for n in names for i in range(3)}


def test_a_key_declared_out_of_column_order_equals_the_binlogs(mariadb: Any) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snapkeyorder",
        "CREATE OR REPLACE TABLE snapkeyorder.t (a DATE, b VARCHAR(5), v INT, PRIMARY KEY (b, a))",
        "INSERT INTO snapkeyorder.t VALUES ('2024-01-01', 'x', 1), ('2023-05-06', 'y', 2), ('2024-01-01', 'y', 3)",
    )
    decoded = sorted(c.key for c in server_changes(mariadb, "snapkeyorder"))
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, "snapkeyorder", "t")
        ranges = plan_chunks(conn, table, 2)
        keys = sorted(c.key for r in ranges for c in chunk_changes(read_chunk(conn, table, r)))
    finally:
        conn.close()
    assert table.key == (1, 0)  # chunks range over the index as declared
    assert keys == decoded and isinstance(keys[0][0], dt.date)  # keys in column order, as the binlog's


def test_chunk_sits_between_the_changes_before_and_after_it(mariadb: Any) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snaporder",
        "CREATE OR REPLACE TABLE snaporder.t (id INT PRIMARY KEY, v INT)",
    )
    mariadb.execute("INSERT INTO snaporder.t VALUES (1, 1), (2, 2)")
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, "snaporder", "t")
        chunk = read_chunk(conn, table, KeyRange(None, None))
    finally:
        conn.close()
    mariadb.execute("UPDATE snaporder.t SET v = 20 WHERE id = 2")
    before, after = (
        [c for c in server_changes(mariadb, "snaporder") if c.table == "t"][-3:-1],
        server_changes(mariadb, "snaporder")[-1:],
    )
    snap = list(chunk_changes(chunk))
    assert [c.after for c in snap] == [(1, 1), (2, 2)]
    key = snap[0].order_key
    assert all(c.order_key < key for c in before) and all(c.order_key > key for c in after)
    assert key.encode() > max(c.order_key.encode() for c in before)  # the binary encoding agrees


UUIDS = [
    "6ccd780c-baba-1026-9564-5b8c656024db", "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff", "123e4567-e89b-42d3-a456-426614174000",
    "123e4567-e89b-72d3-a456-426614174000", "123e4567-e89b-02d3-c456-426614174000", "01890a5d-ac96-774b-bcce-b302099a8057",
]  # fmt: skip


def test_uuid_and_inet4_snapshot_equal_the_binlogs_in_chunks(mariadb: Any) -> None:
    """A UUID key (the server orders it its own way: chunk bounds go back as its text) and INET4
    values: the snapshot's layout and values equal the binlog's, every row once."""
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snapuuid",
        "CREATE OR REPLACE TABLE snapuuid.u (id UUID PRIMARY KEY, a INET4, v INT)",
        "INSERT INTO snapuuid.u VALUES "
        + ", ".join(f"('{u}', '10.0.{i}.{255 - i}', {i})" for i, u in enumerate(UUIDS)),
    )
    decoded = {c.key: c for c in server_changes(mariadb, "snapuuid")}
    conn = _raw(mariadb)
    try:
        assert server_tables(conn, lambda db, t: db == "snapuuid") == [("snapuuid", "u")]
        table = table_layout(conn, "snapuuid", "u")
        chunks = [read_chunk(conn, table, r) for r in plan_chunks(conn, table, 2)]
    finally:
        conn.close()
    assert len(chunks) == 4
    snap = [c for ch in chunks for c in chunk_changes(ch)]
    assert table.layout == next(iter(decoded.values())).layout
    assert sorted(c.key for c in snap) == sorted(decoded) and len(decoded) == len(UUIDS)
    for c in snap:
        assert c.after == decoded[c.key].after


def test_a_type_snapshots_do_not_know_is_refused_with_its_name() -> None:
    vector = CatalogColumn("emb", "vector", "vector(3)", None, None, None, 12, 63, False)
    with pytest.raises(UnsupportedColumn, match=r"table d.t, column emb: type vector\(3\)"):
        column_of(vector, "d.t")


class _NoBinlogServer:
    """A connection to a server with log_bin off: its snapshot status names no file."""

    def __init__(self) -> None:
        self.result: list[tuple[Any, ...]] = []
        self.sql: list[str] = []

    def cursor(self) -> _NoBinlogServer:
        return self

    def __enter__(self) -> _NoBinlogServer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, params: Any = None) -> None:
        self.sql.append(sql)
        self.result = {
            "SHOW STATUS LIKE 'binlog_snapshot_%'": [
                (b"Binlog_snapshot_file", b""),
                (b"Binlog_snapshot_position", b"0"),
            ],
            "SELECT @@server_id": [(b"1",)],
        }.get(sql, [])

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.result

    def fetchone(self) -> tuple[Any, ...]:
        return self.result[0]


def test_a_server_without_binlog_position_is_refused(mariadb: Any, types_table: tuple[str, str]) -> None:
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, *types_table)
    finally:
        conn.close()
    fake = _NoBinlogServer()
    with pytest.raises(SnapshotError, match=r"table snap.*all types: the server gives no binlog position"):
        read_chunk(fake, table, KeyRange(None, None))
    assert fake.sql[-1] == "COMMIT"  # the snapshot transaction is ended either way


def _replay(changes: list[RowChange]) -> dict[Any, tuple[Any, ...]]:
    """What a sink holds after applying changes by order key (the last change per key wins)."""
    state: dict[Any, tuple[Any, ...]] = {}
    for c in sorted(changes, key=lambda c: c.order_key):
        if c.key_before is not None and c.key_before != c.key:
            state.pop(c.key_before, None)
        if c.op == "delete":
            state.pop(c.key, None)
        else:
            assert c.after is not None
            state[c.key] = c.after
    return state


@pytest.mark.parametrize("locked", [False, True], ids=["snapshot-status", "read-lock"])
def test_chunks_read_during_writes_plus_the_binlog_after_them_equal_the_table(
    mariadb: Any, locked: bool
) -> None:
    """Chunks read at different moments while a workload runs (updates of rows copied and not yet
    copied, deletes, inserts, primary-key changes); with the binlog from the first chunk on, the
    replay by order key equals the table — no binlog before the snapshot is needed. Both ways of
    finding a chunk's position: MariaDB's snapshot status, and the brief global read lock MySQL
    needs (run here on MariaDB)."""
    import random
    import threading
    import time

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snaplive",
        "CREATE OR REPLACE TABLE snaplive.t (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    mariadb.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_400", database="snaplive")
    mariadb.flush_binlogs()
    stop = threading.Event()

    def workload() -> None:
        rnd, conn = random.Random(7), mariadb.connect("snaplive")
        try:
            with conn.cursor() as cur:
                n = 0
                while not stop.is_set():
                    n += 1
                    done.append(n)
                    k = rnd.randint(1, 450)
                    cur.execute(
                        rnd.choice(
                            [
                                f"UPDATE t SET v = 'u{n}' WHERE id = {k}",
                                f"DELETE FROM t WHERE id = {k}",
                                f"INSERT IGNORE INTO t VALUES ({k}, 'i{n}')",
                                f"UPDATE IGNORE t SET id = {k + 1000} WHERE id = {k}",
                            ]
                        )
                    )
        finally:
            conn.close()

    done: list[int] = []

    def after_some_writes() -> None:
        """Let the workload commit a few statements between chunks (threads alone may not)."""
        goal = len(done) + 5
        while len(done) < goal and writer.is_alive():
            time.sleep(0.005)

    writer = threading.Thread(target=workload)
    writer.start()
    conn = _raw(mariadb)
    try:
        table = table_layout(conn, "snaplive", "t")
        chunks = []
        for r in plan_chunks(conn, table, 25):
            after_some_writes()
            chunks.append(read_chunk(conn, table, r, locked=locked))
    finally:
        stop.set()
        writer.join()
        conn.close()
    points = {ch.point for ch in chunks}
    assert len(points) > 3, "the workload did not run between the chunks"
    assert {p.file for p in points} <= {f.name for f in mariadb.binlog_files()}  # names, not b'…'
    first = min(ch.point.order_key() for ch in chunks)
    binlog = [c for c in server_changes(mariadb, "snaplive") if c.order_key > first]
    snapshot = [c for ch in chunks for c in chunk_changes(ch)]
    check = mariadb.connect("snaplive")
    try:
        with check.cursor() as cur:
            cur.execute("SELECT id, v FROM t")
            table_now = {(r[0],): tuple(r) for r in cur.fetchall()}
    finally:
        check.close()
    assert _replay(snapshot + binlog) == table_now


def test_a_chunk_takes_the_columns_of_its_read_not_of_its_plan(mariadb: Any) -> None:
    """An ALTER between the plan and a chunk's read: the chunk has the table's columns as they are
    inside its snapshot (a dropped column is not selected, an added one is)."""
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS snapalter",
        "CREATE OR REPLACE TABLE snapalter.t (id INT PRIMARY KEY, gone INT, v VARCHAR(5))",
        "INSERT INTO snapalter.t VALUES (1, 10, 'a'), (2, 20, 'b')",
    )
    conn = _raw(mariadb)
    try:
        planned = table_layout(conn, "snapalter", "t")
        mariadb.execute("ALTER TABLE snapalter.t DROP COLUMN gone, ADD COLUMN added INT DEFAULT 7")
        chunk = read_chunk(conn, planned, plan_chunks(conn, planned, 10)[0])
    finally:
        conn.close()
    assert [c.name for c in chunk.table.layout] == ["id", "v", "added"]
    assert chunk.rows == [(1, "a", 7), (2, "b", 7)]
