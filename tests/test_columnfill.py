"""ADD COLUMN's value for the rows a table held, read from the binlog alone, equals what a real
server put there (read back by the snapshot reader, whose values are tested equal to the decoder's),
column by column and type by type; what only the server knows is reported, never guessed."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.changes import Op, RowChange
from binlake.events.rows import ABSENT
from binlake.schema.defaults import DefaultKind
from binlake.schema.renames import ColumnAdd, renames_in
from binlake.snapshot.catalog import table_layout
from binlake.snapshot.chunks import KeyRange, chunk_changes, raw_conversions, read_chunk
from tests.support.serverchanges import server_changes

DB = "fill`db"
ADDS = [  # (definition, the value is known from the binlog)
    ("i_def INT NOT NULL DEFAULT -7", True),
    ("u_round INT UNSIGNED DEFAULT '12.5'", True),
    ("i_implicit BIGINT NOT NULL", True),
    ("i_null SMALLINT", True),
    ("de DECIMAL(8,3) DEFAULT -1.5", True),
    ("de_implicit DECIMAL(5,2) NOT NULL", True),
    ("fl FLOAT DEFAULT 0.1", True),
    ("db DOUBLE NOT NULL DEFAULT 2.5e-3", True),
    ("bt BIT(5) DEFAULT b'10110'", True),
    ("bt_implicit BIT(3) NOT NULL", True),
    ("yr YEAR DEFAULT 69", True),
    ("yr_implicit YEAR NOT NULL", True),
    ("da DATE DEFAULT '2024-02-29'", True),
    ("da_implicit DATE NOT NULL", True),
    ("dt DATETIME(3) DEFAULT '2020-01-02 03:04:05.5'", True),
    ("tm TIME(2) NOT NULL DEFAULT '-12:00:00.25'", True),
    ("tm_implicit TIME NOT NULL", True),
    ("ts_now TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP", True),
    ("ts_lit TIMESTAMP NULL DEFAULT '2020-01-01 00:00:00'", False),  # in the session's time zone
    ("dt_now DATETIME DEFAULT NOW()", False),  # likewise
    ("vc VARCHAR(20) DEFAULT _utf8mb4'it''s \\\\ ü'", True),
    ("vc_implicit VARCHAR(3) NOT NULL", True),
    ("ch CHAR(4) CHARACTER SET latin1 NOT NULL DEFAULT 'ab'", True),
    ("bn BINARY(4) NOT NULL DEFAULT 0x6162", True),
    ("bn_implicit BINARY(3) NOT NULL", True),
    ("vb VARBINARY(5) DEFAULT 'xy'", True),
    ("tx TEXT NOT NULL", True),
    ("en ENUM('no','Yes') NOT NULL", True),
    ("en_def ENUM('no','Yes') DEFAULT 'yes'", True),
    ("st SET('a','b','c') DEFAULT 'c,a'", True),
    ("st_implicit SET('a','b') NOT NULL", True),
    ("expr INT DEFAULT (1 + 2)", False),
]


@pytest.fixture(scope="module")
def filled(mariadb: Any) -> tuple[list[RowChange], dict[str, list[Any]]]:
    """The binlog's add_column changes of one ALTER with every kind of ADD, and the values the
    server gave each column in the three rows the table held."""
    q = f"`{DB.replace('`', '``')}`.`t`"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS `{DB.replace('`', '``')}`",
        f"CREATE DATABASE `{DB.replace('`', '``')}`",
        f"CREATE TABLE {q} (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {q} VALUES (1, 10), (2, 20), (3, NULL)",
    )
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            cur.execute(f"ALTER TABLE {q} " + ", ".join(f"ADD COLUMN {d}" for d, _ in ADDS))
    finally:
        conn.close()
    raw = mariadb.connect(conv=raw_conversions(), use_unicode=False)
    try:
        layout = table_layout(raw, DB, "t")
        rows = [c.after for c in chunk_changes(read_chunk(raw, layout, KeyRange(None, None)))]
    finally:
        raw.close()
    names = [c.name for c in layout.layout]
    held = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    return [c for c in server_changes(mariadb, DB) if c.table == "t" and c.op is Op.ADD_COLUMN], held


def test_every_known_fill_equals_what_the_server_wrote(filled: Any) -> None:
    adds, held = filled
    assert [c.layout[0].name for c in adds] == [d.split()[0] for d, _ in ADDS]
    checked = 0
    for c, (definition, known) in zip(adds, ADDS, strict=True):
        (value,) = c.after
        name = c.layout[0].name
        if not known:
            assert value is ABSENT, definition
            continue
        assert len(held[name]) == 3
        for server in held[name]:
            assert (type(value), value) == (type(server), server), definition
        checked += 1
    assert checked == sum(k for _, k in ADDS)


def test_the_fill_column_is_typed_as_the_servers_catalog(filled: Any, mariadb: Any) -> None:
    """The new column's type code, metadata and signedness from the DDL alone equal the catalog's
    (which equal the binlog's full metadata); the charset the ALTER does not say may differ."""
    adds, _ = filled
    raw = mariadb.connect(conv=raw_conversions(), use_unicode=False)
    try:
        catalog = {c.name: c for c in table_layout(raw, DB, "t").layout}
    finally:
        raw.close()
    for c in adds:
        mine, theirs = c.layout[0], catalog[c.layout[0].name]
        assert (mine.type, mine.unsigned, mine.values) == (theirs.type, theirs.unsigned, theirs.values), (
            mine.name
        )
        if mine.collation is not None:  # binary columns: the collation says binary on both sides
            assert (mine.collation == 63) == (theirs.collation == 63), mine.name


def test_defaults_read_from_ddl() -> None:
    """The kinds of default a column definition has (no server needed)."""
    sql = (
        "ALTER TABLE t ADD a INT AUTO_INCREMENT, ADD b INT AS (a + 1) STORED, ADD c INT NOT NULL, "
        "ADD d INT, ADD e INT DEFAULT NULL, ADD f TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3), "
        "RENAME COLUMN x TO y, RENAME TO t2"
    )
    changes = renames_in(sql, "db")
    adds = [r for r in changes if isinstance(r, ColumnAdd)]
    kinds = [a.default.kind for a in adds]
    assert kinds == [
        DefaultKind.UNKNOWN, DefaultKind.UNKNOWN, DefaultKind.IMPLICIT,
        DefaultKind.NULL, DefaultKind.NULL, DefaultKind.NOW,
    ]  # fmt: skip
    assert adds[-1].default.text == 3 and all(a.table == ("db", "t") for a in adds)
    assert [type(r).__name__ for r in changes][-2:] == ["ColumnRename", "TableRename"]


def test_an_add_that_may_change_nothing_is_unknown_and_alter_modifiers_are_read() -> None:
    """ADD COLUMN IF NOT EXISTS of a column that was there changes no row: its default must never
    overwrite them. ALTER ONLINE / IGNORE TABLE are ALTER TABLE."""
    (maybe,) = renames_in("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT DEFAULT 5", "db")
    assert isinstance(maybe, ColumnAdd) and maybe.default.kind is DefaultKind.UNKNOWN
    (online,) = renames_in("alter online ignore table d.t ADD x INT NOT NULL DEFAULT 2", "db")
    assert isinstance(online, ColumnAdd) and online.table == ("d", "t") and online.default.text == "2"
