"""Schema history: a MariaDB with binlog_row_metadata=MINIMAL, decoded with the history, gives every
row the same column -> value mapping as the same workload on a server with FULL metadata; every DDL
of the corpus is applied or reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.events.rows import ABSENT, Rows
from binlake.reader import BinlogReader
from binlake.sandbox import PrivateMariaDB, mariadb_available
from binlake.schema import SchemaHistory, SchemaMismatchError, SchemaTracker
from binlake.schema.defaults import ColumnDefault, DefaultKind
from binlake.schema.model import ColumnSpec
from binlake.snapshot.catalog import server_tables
from binlake.snapshot.schema import seed_at_position
from tests.conftest import corpus_index

SETUP = [
    "CREATE DATABASE app",
    "CREATE TABLE app.users (id INT UNSIGNED PRIMARY KEY, name VARCHAR(40), score BIGINT UNSIGNED, kind ENUM('a','b','c'), flags SET('x','y'))",
    "CREATE TABLE app.notes (id INT PRIMARY KEY, body TEXT CHARACTER SET latin1, at DATETIME(3))",
]
WORKLOAD = [
    "INSERT INTO app.users VALUES (1, 'ann', 18446744073709551615, 'b', 'x,y'), (2, 'bob', 5, 'c', '')",
    "INSERT INTO app.notes VALUES (1, 'caf\u00e9', '2024-01-01 10:00:00.5')",
    "ALTER TABLE app.users ADD COLUMN email VARCHAR(60) AFTER name",
    "UPDATE app.users SET email = 'ann@x' WHERE id = 1",
    "ALTER TABLE app.users DROP COLUMN score",
    "INSERT INTO app.users VALUES (3, 'cy', 'cy@x', 'a', 'y')",
    "ALTER TABLE app.users MODIFY COLUMN kind ENUM('a','b','c') FIRST",
    "UPDATE app.users SET kind = 'c' WHERE id = 3",
    "ALTER TABLE app.users RENAME COLUMN name TO full_name",
    "ALTER TABLE app.users CHANGE COLUMN email mail VARCHAR(80) AFTER id",
    "INSERT INTO app.users (id, full_name, mail) VALUES (4, 'dee', 'd@x')",
    "RENAME TABLE app.notes TO app.memos",
    "INSERT INTO app.memos VALUES (2, 'na\u00efve', NULL)",
    "ALTER TABLE app.memos ADD COLUMN n INT UNSIGNED FIRST",
    "INSERT INTO app.memos VALUES (4000000000, 3, 'x', '2025-05-05 05:05:05')",
    "DELETE FROM app.users WHERE id = 2",
]


def run(db: PrivateMariaDB, statements: list[str]) -> None:
    conn = db.connect()
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    conn.close()


def _image(names: list, img: list | None) -> dict | None:
    return None if img is None else {n: v for n, v in zip(names, img, strict=True) if v is not ABSENT}


def changes(
    files: list[Path], tracker: SchemaTracker | None = None
) -> list[tuple[str, str, dict | None, dict | None]]:
    out = []
    for f in files:
        for ev in BinlogReader(f, observers=[tracker] if tracker else None):
            b = ev.body
            if isinstance(b, Rows) and b.table is not None and b.table.database == "app":
                names = [c.name for c in b.table.columns]
                out += [
                    (b.table.table, b.operation, _image(names, bi), _image(names, ai)) for bi, ai in b.rows
                ]
    return out


@pytest.mark.slow
@pytest.mark.skipif(not mariadb_available(), reason="mariadbd is not installed")
def test_minimal_metadata_with_history_equals_full(tmp_path: Path) -> None:
    with (
        PrivateMariaDB(tmp_path / "full") as full,
        PrivateMariaDB(tmp_path / "minimal", binlog_row_metadata="MINIMAL") as minimal,
    ):
        for db in (full, minimal):
            run(db, SETUP)
        first_full = len(full.flush_binlogs()) - 1
        first_min = len(minimal.flush_binlogs()) - 1
        conn = minimal.connect()
        seeded = seed_at_position(conn, server_tables(conn, lambda db, _: db == "app"))
        assert seeded.seeded_at is not None and seeded.seeded_at[0] == "mariadb-bin.000002"
        for db in (full, minimal):
            run(db, WORKLOAD)
        want = changes(full.flush_binlogs()[first_full:-1])
        files = minimal.flush_binlogs()[first_min:-1]
        bare = changes(files)
        assert bare != want and all(set(img or {}) <= {None} for *_, img in bare)  # MINIMAL: no names
        tracker = SchemaTracker(seeded)
        got = changes(files, tracker)
        assert got == want and len(got) >= 9
        assert tracker.completed > 0 and not tracker.mismatches and not seeded.not_understood
        # the history saved and loaded again gives the same answers
        seeded.save(tmp_path / "h.json")
        again = SchemaHistory.load(tmp_path / "h.json")
        assert again.table("app", "users") == seeded.table("app", "users")
        before = again.at(("mariadb-bin.000002", 5))
        assert [c.name for c in before[("app", "users")].columns] == ["id", "name", "score", "kind", "flags"]
        # from nothing: the CREATE TABLEs are in the earlier binlog, so reading it all also works
        all_files = minimal.binlog_files()[:-1]
        assert [
            c
            for c in changes(all_files, SchemaTracker(SchemaHistory()))
            if c[0] in ("users", "memos", "notes")
        ] == want


def test_mismatch_is_an_error_or_positional(tmp_path: Path, corpus: Path) -> None:
    f = corpus / "zalora-binlog-parser/fixtures/mysql-bin.01"
    ddl = "CREATE TABLE test_db.buildings (a INT, b INT);"
    with pytest.raises(SchemaMismatchError, match="3 columns, the schema history 2") as e:
        list(BinlogReader(f, observers=[SchemaTracker(SchemaHistory.from_ddl_script(ddl))]))
    assert e.value.offset == 197 and str(f) in str(e.value)
    # the way on is named as a user gives it: the CLI option and the Spark source's
    assert "--schema-mismatch positional" in str(e.value) and "schemaMismatch=positional" in str(e.value)
    t = SchemaTracker(SchemaHistory.from_ddl_script(ddl), on_mismatch="positional")
    rows = [ev.body for ev in BinlogReader(f, observers=[t]) if isinstance(ev.body, Rows)]
    assert rows[0].table.columns[0].name is None and t.mismatches


def test_zalora_dump_seed_names_columns(corpus: Path) -> None:
    base = corpus / "zalora-binlog-parser/fixtures"
    h = SchemaHistory.from_ddl_script((base / "test_db.sql").read_text())
    assert [c.name for c in h.table("test_db", "buildings").columns] == [
        "building_no",
        "building_name",
        "address",
    ]
    t = SchemaTracker(h)
    rows = [ev.body for ev in BinlogReader(base / "mysql-bin.01", observers=[t]) if isinstance(ev.body, Rows)]
    assert [c.name for c in rows[0].table.columns] == ["building_no", "building_name", "address"]
    assert rows[0].table.primary_key == [0]


def test_a_seed_table_without_a_database_is_refused(corpus: Path) -> None:
    """SHOW CREATE TABLE text names no database: without a USE before it the table was kept under
    the database '' — never matched by a table map, so --schema silently named nothing and
    ``binlake schema`` printed CREATE TABLE ``.`buildings`."""
    base = corpus / "zalora-binlog-parser/fixtures"
    show_create = (base / "test_db.sql").read_text().split("CREATE TABLE `buildings`", 1)[1].split(";", 1)[0]
    bare = SchemaHistory.from_ddl_script(f"CREATE TABLE `buildings`{show_create};")
    assert [(n.position[0], "names no database" in n.reason) for n in bare.not_understood] == [
        ("<seed>", True)
    ]
    assert ("", "buildings") not in bare.catalog
    used = SchemaHistory.from_ddl_script(f"USE `test_db`;\nCREATE TABLE `buildings`{show_create};")
    assert not used.not_understood and used.table("test_db", "buildings") is not None


def test_every_corpus_ddl_is_applied_or_reported(corpus: Path) -> None:
    applied = reported = 0
    from binlake.errors import BinlogError

    for rec in corpus_index()["records"]:
        h = SchemaHistory()
        t = SchemaTracker(h, on_mismatch="positional")
        try:
            for _ in BinlogReader(
                corpus / rec["path"], observers=[t], verify_checksum=False, require_fde=False
            ):
                pass
        except BinlogError:
            pass
        applied += len(h.changes)
        reported += len(h.not_understood)
        for n in h.not_understood:
            assert n.reason and n.sql
    assert applied > 100
    print(f"corpus DDL: {applied} applied, {reported} reported as not understood")


def test_renames_of_ddl_statements() -> None:
    from binlake.schema.renames import ColumnAdd, ColumnRename, TableDrop, TableRename, renames_in

    assert renames_in("RENAME TABLE a TO b, x.`b c` TO `a`", "db") == [
        TableRename(("db", "a"), ("db", "b")),
        TableRename(("x", "b c"), ("db", "a")),
    ]
    # columns first, then the table, whatever the clause order (as MySQL applies them)
    assert renames_in("ALTER TABLE d.t RENAME TO d.t3, RENAME COLUMN a TO b, CHANGE c cc INT", "db") == [
        ColumnRename(("d", "t"), "a", "b"),
        ColumnRename(("d", "t"), "c", "cc"),
        TableRename(("d", "t"), ("d", "t3")),
    ]
    # an added column is the table's before the rename (its rows get the value, here NULL)
    x = ColumnAdd(("db", "t"), ColumnSpec("x", "INT"), ColumnDefault(DefaultKind.NULL))
    assert renames_in("ALTER TABLE t RENAME AS t4, ADD COLUMN x INT", "db") == [
        x,
        TableRename(("db", "t"), ("db", "t4")),
    ]
    assert renames_in("DROP TABLE IF EXISTS a, d.b", "db") == [TableDrop(("db", "a")), TableDrop(("d", "b"))]
    assert renames_in("TRUNCATE TABLE d.t", "db") == [TableDrop(("d", "t"))]
    assert renames_in("DROP TEMPORARY TABLE t", "db") == []  # no row changes to follow
    for sql in (
        "ALTER TABLE t CHANGE a a BIGINT",
        "CREATE TABLE r (a INT)",
    ):
        assert renames_in(sql, "db") == [], sql


def test_create_table_with_versioned_partitioning_or_data_directory_is_applied() -> None:
    """Two CREATE TABLEs of the corpus (mdev6020, wl13352) that once were reported, not applied."""
    h = SchemaHistory()
    assert h.apply(
        "CREATE TABLE `t1` (\n`a` char(12),\npk integer auto_increment,\n/*Indices*/\nkey (`a` ),\n"
        "primary key (pk)) /*!50100 PARTITION BY key (pk) partitions 2 */",
        "test",
        ("f.000001", 4),
    )
    assert h.apply(
        "CREATE TABLE t2(\nid int primary key, data BLOB,\nkey k1(id)) DATA DIRECTORY = '/tmp/x/'\n"
        "      partition by hash (id) partitions 5",
        "test",
        ("f.000001", 9),
    )
    assert not h.not_understood
    t1, t2 = h.table("test", "t1"), h.table("test", "t2")
    assert t1 is not None and t2 is not None
    assert ([c.name for c in t1.columns], t1.primary_key) == (["a", "pk"], ["pk"])
    assert ([c.type_name for c in t2.columns], t2.primary_key) == (["INT", "BLOB"], ["id"])


def _named_rows(files: list[Path], tracker: SchemaTracker) -> list[tuple]:
    out = []
    for f in files:
        for ev in BinlogReader(f, observers=[tracker]):
            b = ev.body
            if isinstance(b, Rows) and b.table is not None:
                names = tuple(c.name for c in b.table.columns)
                out.append((b.table.table, names, tuple(b.table.primary_key), b.operation, b.rows))
    return out


def test_table_map_cache_stays_on_with_a_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a schema tracker attached the decoder still reuses decoded table maps, the tracker names
    columns in copies (never in the shared maps), and every row and name is as when each map is
    decoded afresh — across ADD / DROP / RENAME COLUMN and RENAME TABLE, where the bytes of a map
    stay the same and only the history says the names changed."""
    from binlake.decoder import EventDecoder
    from binlake.events import BODY_DECODERS
    from binlake.events.types import EventType
    from binlake.generate import generate

    files = generate(
        tmp_path / "s", flavor="mysql57", target_bytes=1_500_000, max_file_size=600_000, ddl_every=40
    ).files
    decoded = []
    real = BODY_DECODERS[EventType.TABLE_MAP]

    def counting(buf, state, header):  # type: ignore[no-untyped-def]
        decoded.append(real(buf, state, header))
        return decoded[-1]

    monkeypatch.setitem(BODY_DECODERS, EventType.TABLE_MAP, counting)
    cached_tracker = SchemaTracker(SchemaHistory())
    got = _named_rows(files, cached_tracker)
    maps_decoded = len(decoded)
    assert all(c.name is None for tm in decoded for c in tm.columns)  # the shared maps untouched
    monkeypatch.setattr(EventDecoder, "_table_map", lambda self, body, header: real(body, self.state, header))
    fresh_tracker = SchemaTracker(SchemaHistory())
    want = _named_rows(files, fresh_tracker)
    assert got == want and len(got) > 1000
    assert {n for *_, names, _, _, _ in got for n in names} >= {"id", "balance", "meta", "extra1"}
    assert any(n.endswith("_r") for _, names, *_ in got for n in names)  # a renamed column named anew
    assert cached_tracker.completed == fresh_tracker.completed > 0
    assert maps_decoded * 20 < cached_tracker.completed  # maps decoded once per layout, not per transaction


def test_a_ddl_logged_with_an_error_code_is_replayed_as_the_change_log_reads_it(corpus: Path) -> None:
    """MySQL 5.7 logs ``DROP TABLE t1, t2`` with error 1051 when t2 is missing: t1 was dropped on
    the source and a replica runs it expecting 1051. The schema history drops t1 (it kept it before)
    and the change log drops it too: the two agree."""
    from binlake.changes import Op, row_changes
    from binlake.txn import iter_transactions

    f = corpus / "mysql-server-8.0.39/std_data/rpl_atomic_ddl_rollback_table.000001"
    history = SchemaHistory()
    tracker = SchemaTracker(history)
    failed_ddl = []
    drops = []
    for t in iter_transactions((1, ev) for ev in BinlogReader(f, observers=[tracker])):
        failed_ddl += [e.body.error_code for e in t.events if getattr(e.body, "error_code", 0)]
        drops += [(c.db, c.table) for c in row_changes(t) if c.op is Op.DROP_TABLE]
        if t.end == 316:  # after CREATE TABLE t1: the history has it
            assert history.table("test", "t1") is not None
    assert failed_ddl == [1051]
    assert ("test", "t1") in drops
    assert history.table("test", "t1") is None and not history.not_understood


def test_a_ddl_logged_with_another_error_took_an_unknown_part_of_its_effect(
    corpus: Path, tmp_path: Path
) -> None:
    """The same DROP logged with 1451 (a foreign key refused one of the tables): which tables went
    is not known, so neither the history nor the change log drops any; the history reports it."""
    import struct
    import zlib

    from binlake.changes import Op, row_changes
    from binlake.txn import iter_transactions

    data = bytearray(
        (corpus / "mysql-server-8.0.39/std_data/rpl_atomic_ddl_rollback_table.000001").read_bytes()
    )
    at = 381  # the DROP TABLE `t1`,`t2` Query event
    size = struct.unpack_from("<I", data, at + 9)[0]
    assert struct.unpack_from("<H", data, at + 19 + 9)[0] == 1051
    struct.pack_into("<H", data, at + 19 + 9, 1451)
    struct.pack_into("<I", data, at + size - 4, zlib.crc32(data[at : at + size - 4]))
    f = tmp_path / "fk.000001"
    f.write_bytes(bytes(data))
    history = SchemaHistory()
    drops = [
        c
        for t in iter_transactions((1, ev) for ev in BinlogReader(f, observers=[SchemaTracker(history)]))
        for c in row_changes(t)
        if c.op is Op.DROP_TABLE
    ]
    assert drops == []
    assert history.table("test", "t1") is not None
    assert [(n.position, "1451" in n.reason) for n in history.not_understood] == [(("fk.000001", 381), True)]
