"""Table layouts from a live server's catalog, equal to the ``Layout`` the binlog's full metadata
gives (``binlake.changes.layout_of``): type codes, metadata, signedness, collations, the key, ENUM
and SET names — so snapshot rows and binlog rows are typed and encoded the same way."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from binlake.dialects.mysql import quote_ident
from binlake.layout import Column, Layout
from binlake.values.types import ColumnType as T

BINARY_COLLATION = 63


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """One row of ``information_schema.COLUMNS`` (the fields a layout needs)."""

    name: str
    data_type: str  # lower case: int, varchar, ...
    column_type: str  # as written: int(10) unsigned, enum('a','b'), ...
    precision: int | None
    scale: int | None
    datetime_precision: int | None
    octet_length: int | None
    collation: int | None  # id; None for non-text types
    pk: bool


def _char_meta(real_type: int, octets: int) -> int:
    """CHAR/BINARY metadata: the real type in the high byte, the length's low byte in the low
    byte, the length's bits 8-9 folded (XOR) into the high byte's bits 4-5."""
    return ((real_type ^ ((octets & 0x300) >> 4)) << 8) | (octets & 0xFF)


def _bit_meta(c: CatalogColumn) -> int:
    bits = c.precision or 1
    return (bits // 8) << 8 | bits % 8


def _set_meta(c: CatalogColumn) -> int:
    n = len(_values(c.column_type) or ())
    return T.SET << 8 | (n + 7) // 8


def _enum_meta(c: CatalogColumn) -> int:
    n = len(_values(c.column_type) or ())
    return T.ENUM << 8 | (1 if n < 256 else 2)


Meta = Callable[[CatalogColumn], int]
_ZERO: Meta = lambda c: 0  # noqa: E731
_FSP: Meta = lambda c: c.datetime_precision or 0  # noqa: E731
_OCTETS: Meta = lambda c: c.octet_length or 0  # noqa: E731
_CHAR: Meta = lambda c: _char_meta(T.STRING, c.octet_length or 0)  # noqa: E731
_FIXED16: Meta = lambda c: _char_meta(T.STRING, 16)  # noqa: E731

# information_schema DATA_TYPE -> (binlog type code, its metadata, numeric: has signedness)
TYPES: dict[str, tuple[int, Meta, bool]] = {
    "tinyint": (T.TINY, _ZERO, True),
    "smallint": (T.SHORT, _ZERO, True),
    "mediumint": (T.INT24, _ZERO, True),
    "int": (T.LONG, _ZERO, True),
    "bigint": (T.LONGLONG, _ZERO, True),
    "decimal": (T.NEWDECIMAL, lambda c: (c.precision or 10) << 8 | (c.scale or 0), True),
    "float": (T.FLOAT, lambda c: 4, True),
    "double": (T.DOUBLE, lambda c: 8, True),
    "bit": (T.BIT, _bit_meta, False),
    "year": (T.YEAR, _ZERO, True),
    "date": (T.DATE, _ZERO, False),
    "datetime": (T.DATETIME2, _FSP, False),
    "timestamp": (T.TIMESTAMP2, _FSP, False),
    "time": (T.TIME2, _FSP, False),
    "char": (T.STRING, _CHAR, False),
    "binary": (T.STRING, _CHAR, False),
    "varchar": (T.VARCHAR, _OCTETS, False),
    "varbinary": (T.VARCHAR, _OCTETS, False),
    "tinytext": (T.BLOB, lambda c: 1, False),
    "tinyblob": (T.BLOB, lambda c: 1, False),
    "text": (T.BLOB, lambda c: 2, False),
    "blob": (T.BLOB, lambda c: 2, False),
    "mediumtext": (T.BLOB, lambda c: 3, False),
    "mediumblob": (T.BLOB, lambda c: 3, False),
    "longtext": (T.BLOB, lambda c: 4, False),
    "longblob": (T.BLOB, lambda c: 4, False),
    "json": (T.BLOB, lambda c: 4, False),  # MariaDB: JSON is LONGTEXT
    "enum": (T.ENUM, _enum_meta, False),
    "set": (T.SET, _set_meta, False),
    "inet6": (T.STRING, _FIXED16, False),
    "inet4": (T.STRING, lambda c: _char_meta(T.STRING, 4), False),
    "uuid": (T.STRING, _FIXED16, False),  # the binlog holds the text order's 16 bytes (10.11)
    "geometry": (T.GEOMETRY, lambda c: 4, False),
}
for _g in ("point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"):
    TYPES[_g] = TYPES["geometry"]
TYPES["geometrycollection"] = TYPES["geometry"]
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "inet6", "inet4", "uuid"} | {
    t for t, spec in TYPES.items() if spec[0] == T.GEOMETRY
}


_TYPED_BYTES = {"uuid", "inet4", "inet6"}  # stored as bytes, compared and written as their type's text


class UnsupportedColumn(ValueError):
    """A column whose snapshot value cannot (yet) be made equal to its binlog value."""


_QUOTED = re.compile(r"'((?:[^']|'')*)'")


def _values(column_type: str) -> tuple[str, ...] | None:
    """The names of ``enum('a','b')`` / ``set(...)`` as the catalog writes them."""
    if not column_type.lower().startswith(("enum(", "set(")):
        return None
    return tuple(v.replace("''", "'") for v in _QUOTED.findall(column_type))


def column_of(c: CatalogColumn, table: str = "") -> Column:
    """The binlog-equal ``Column`` of one catalog column."""
    spec = TYPES.get(c.data_type)
    if spec is None:
        raise UnsupportedColumn(
            f"table {table}, column {c.name}: type {c.column_type} is not supported by snapshots"
        )
    code, meta, numeric = spec
    # the binlog marks YEAR unsigned too (MariaDB 10.11, binlog_row_metadata=FULL)
    unsigned = ("unsigned" in c.column_type.lower() or c.data_type == "year") if numeric else None
    collation = BINARY_COLLATION if c.data_type in _BINARY_TYPES else c.collation
    return Column(c.name, code, meta(c), unsigned, collation, c.pk, _values(c.column_type))


COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, "
    "c.DATETIME_PRECISION, c.CHARACTER_OCTET_LENGTH, co.ID, c.COLUMN_KEY = 'PRI' "
    "FROM information_schema.COLUMNS c LEFT JOIN information_schema.COLLATIONS co "
    "ON co.COLLATION_NAME = c.COLLATION_NAME "
    "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION"
)
KEY_SQL = (
    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION"
)
TABLES_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
    "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME"
)


def _text(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def _int(v: Any) -> int | None:
    return None if v is None else int(_text(v))


@dataclass(frozen=True, slots=True)
class CatalogTable:
    """A table as the snapshot reads it: its binlog-equal layout and, per column, what to select
    (ENUM/SET as their numbers, INET6, INET4 and UUID as their stored bytes: see ``textvalues``)."""

    db: str
    table: str
    layout: Layout
    selects: tuple[str, ...]
    key: tuple[int, ...]  # the primary key's columns as declared (the index's order: ranges follow it)
    # per column: a key bound goes back as text (the server orders and compares UUID / INET by
    # their type, and reads them from text; a BINARY column's bytes compare as bytes)
    text_bounds: tuple[bool, ...] = ()


def select_expression(c: CatalogColumn) -> str:
    q = quote_ident(c.name)
    if c.data_type in ("enum", "set"):
        return f"{q}+0"
    if c.data_type == "inet6":
        return f"INET6_ATON({q})"
    if c.data_type in ("uuid", "inet4"):  # their stored bytes, as the binlog holds them
        return f"CAST({q} AS BINARY({16 if c.data_type == 'uuid' else 4}))"
    if c.data_type == "float":  # its text has 6 digits; as a DOUBLE it is exact
        return f"CAST({q} AS DOUBLE)"
    return q


def table_layout(conn: Any, db: str, table: str) -> CatalogTable:
    """``db.table`` as the server's catalog describes it now (names are bound parameters here and
    quoted by the MySQL dialect in what is selected: any name is safe)."""
    with conn.cursor() as cur:
        cur.execute(COLUMNS_SQL, (db, table))
        rows = cur.fetchall()
    if not rows:
        raise LookupError(f"table {db}.{table} not found on the server")
    cols = [
        CatalogColumn(
            _text(r[0]), _text(r[1]).lower(), _text(r[2]),
            _int(r[3]), _int(r[4]), _int(r[5]), _int(r[6]), _int(r[7]), bool(_int(r[8])),
        )
        for r in rows
    ]  # fmt: skip
    layout = tuple(column_of(c, f"{db}.{table}") for c in cols)
    with conn.cursor() as cur:
        cur.execute(KEY_SQL, (db, table))
        key_names = [_text(r[0]) for r in cur.fetchall()]
    index = {c.name: i for i, c in enumerate(cols)}
    key = tuple(index[n] for n in key_names)
    text = tuple(c.collation not in (None, BINARY_COLLATION) or c.data_type in _TYPED_BYTES for c in cols)
    return CatalogTable(db, table, layout, tuple(select_expression(c) for c in cols), key, text)


def server_tables(conn: Any, keep: Callable[[str, str], bool] | None = None) -> list[tuple[str, str]]:
    """The base tables of the server's user databases that ``keep(db, table)`` selects."""
    with conn.cursor() as cur:
        cur.execute(TABLES_SQL)
        names = [(_text(d), _text(t)) for d, t in cur.fetchall()]
    return [n for n in names if keep is None or keep(*n)]
