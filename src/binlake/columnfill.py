"""The value an ``ADD COLUMN`` gives every row a table held, typed as the binlog decoder types it.

``schema.defaults`` reads what the DDL says (a literal, NULL, the statement's time, the type's
implicit default); here that becomes the column's ``Column`` (type code and metadata as a row event
of the new layout would carry them, via ``snapshot.catalog``) and its value as the decoder gives it
(via ``snapshot.textvalues``: a literal is the text the server parses, as the text protocol sends
it). What only the server could compute is an ``UnknownFill``: the reason, for reports.
"""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from binlake.layout import Column
from binlake.schema.defaults import ColumnDefault, DefaultKind
from binlake.schema.model import ColumnSpec
from binlake.snapshot.catalog import BINARY_COLLATION, CatalogColumn, UnsupportedColumn, column_of
from binlake.snapshot.textvalues import parser
from binlake.values.temporal import MysqlDate, MysqlDateTime
from binlake.values.types import ColumnType as T


class UnknownFill(str):
    """Why the value of the rows a table held cannot be told from the binlog (it is a ``str``)."""


# sqlglot's type names -> information_schema's DATA_TYPE (the rest: lower case, unsigned prefix off)
_DATA_TYPES = {"TIMESTAMPTZ": "timestamp", "BOOLEAN": "tinyint", "UDECIMAL": "decimal"}
_MBMAXLEN = {"utf8mb4": 4, "utf8": 3, "utf8mb3": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4}
_DATE_TYPES = {T.DATE, T.NEWDATE, T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2}
_TIMESTAMPS = {T.TIMESTAMP, T.TIMESTAMP2}
_INTEGERS = {T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG}


def fill_column(spec: ColumnSpec) -> Column:
    """The new column as a row event of the new layout describes it."""
    name = spec.type_name
    data_type = _DATA_TYPES.get(name) or (name[1:] if spec.unsigned else name).lower()
    if data_type == "json":  # MySQL logs JSON as itself (MariaDB: LONGTEXT, which reads as text too)
        return Column(spec.name, T.JSON, 4, None, spec.collation, False)
    params = [int(p) for p in spec.params if p.strip().isdigit()]
    first = params[0] if params else None
    octets = first * _MBMAXLEN.get((spec.charset or "").lower(), 1) if first is not None else None
    catalog = CatalogColumn(
        spec.name,
        data_type,
        spec.mysql_type(),
        first,
        params[1] if len(params) > 1 else None,
        first,
        octets,
        spec.collation,
        False,
    )
    return column_of(catalog)


def column_fill(spec: ColumnSpec, default: ColumnDefault, when: int) -> tuple[Column, Any] | None:
    """The added column and the value the rows held get (``UnknownFill`` when the binlog cannot
    tell it); None for a column type no layout describes. DDL is input: nothing here raises."""
    try:
        column = fill_column(spec)
    except (UnsupportedColumn, ValueError):
        return None
    try:
        return column, fill_value(column, default, when)
    except (ValueError, ArithmeticError, KeyError, IndexError, UnicodeError):
        return column, UnknownFill(f"its default {default.text!r} is not read here")


def fill_value(column: Column, default: ColumnDefault, when: int) -> Any:
    """The decoder's value of ``default`` in ``column`` for a statement run at epoch second ``when``
    (``UnknownFill`` when the binlog cannot tell)."""
    kind, text = default.kind, default.text
    if kind is DefaultKind.NULL:
        return None
    if kind is DefaultKind.UNKNOWN:
        return UnknownFill(f"its default is {text}")
    if kind is DefaultKind.IMPLICIT:
        return _implicit(column)
    if kind is DefaultKind.NOW:
        if column.type in _TIMESTAMPS and not text:  # UTC: exact to the second the statement ran
            return dt.datetime.fromtimestamp(when, dt.UTC)
        return UnknownFill("it is the time the ALTER ran (fractions of a second or the server's time zone)")
    return _literal(column, text)


def _implicit(c: Column) -> Any:
    """A NOT NULL column's value without DEFAULT: zero, empty, the first ENUM name, the zero date."""
    if c.type in _DATE_TYPES:
        return MysqlDateTime(0, 0, 0) if c.type not in (T.DATE, T.NEWDATE) else MysqlDate(0, 0, 0)
    if c.type == T.ENUM:
        return c.values[0] if c.values else 1
    if c.type == T.SET:
        return () if c.values is not None else 0
    if c.type in (T.JSON, T.GEOMETRY):
        return UnknownFill("a NOT NULL JSON or geometry column without DEFAULT takes what the server chose")
    if _is_binary_char(c):  # BINARY(n): n zero bytes
        return bytes(_char_length(c))
    if c.type in (T.STRING, T.VARCHAR, T.VAR_STRING, T.BLOB):
        return parser(c)(b"")
    if c.type in (T.TIME, T.TIME2):
        return dt.timedelta(0)
    return _literal(c, "0")


def _is_binary_char(c: Column) -> bool:
    """BINARY(n): a fixed-width binary string, which the decoder pads to its length with zeros."""
    return c.type == T.STRING and c.collation == BINARY_COLLATION


def _char_length(c: Column) -> int:
    """CHAR/BINARY length from its metadata (``catalog._char_meta`` folded its bits 8-9)."""
    return ((((c.meta >> 8) & 0x30) ^ 0x30) << 4) | (c.meta & 0xFF)


def _literal(c: Column, text: str | bytes | int | None) -> Any:
    """A literal as the server stores it in ``c`` (as the text protocol would send it back)."""
    if isinstance(text, int):  # b'0101'
        return text if c.type == T.BIT or c.type in _INTEGERS else _literal(c, str(text))
    raw = text.encode("utf-8") if isinstance(text, str) else (text or b"")
    if c.type == T.ENUM and c.values:
        name = raw.decode("utf-8")
        return next(
            (v for v in c.values if v.lower() == name.lower()), UnknownFill(f"{name!r} is no ENUM value")
        )
    if c.type == T.SET and c.values is not None:
        names = {n.lower() for n in raw.decode("utf-8").split(",") if n}
        return tuple(v for v in c.values if v.lower() in names)
    if c.type in _TIMESTAMPS and raw.strip(b"0-: .") != b"":
        return UnknownFill("a TIMESTAMP literal is in the session's time zone, which the binlog does not say")
    if c.type == T.NEWDECIMAL:
        return Decimal(raw.decode("ascii")).quantize(Decimal(1).scaleb(-(c.meta & 0xFF)))
    if c.type == T.YEAR:
        y = int(raw)
        return y if y == 0 and raw.strip() in (b"0", b"") or y >= 100 else y + (2000 if y < 70 else 1900)
    if c.type == T.BIT:
        return int(raw)
    if _is_binary_char(c):  # zero-padded as the decoder pads it
        return raw.ljust(_char_length(c), b"\0")
    if c.type in _INTEGERS:
        return int(Decimal(raw.decode("ascii")).to_integral_value(ROUND_HALF_UP))  # MySQL: half away from 0
    return parser(c)(raw)
