"""How one column value prints: mysqlbinlog's ``-vv`` text, and the JSON encoding of the change log.

JSON encoding (documented in the README): integers and floats as numbers, DECIMAL as a string
(exact), strings as strings, binary strings as ``{"base64": …}``, DATE ``"YYYY-MM-DD"``, DATETIME and
TIMESTAMP (UTC) ``"YYYY-MM-DD HH:MM:SS[.ffffff]"``, TIME ``"[-]HH:MM:SS[.ffffff]"``, zero dates as their
MySQL text (``"0000-00-00"``), YEAR as a number, ENUM as its name (index if unknown), SET as a list of
names (bitmask if unknown), BIT as a number, JSON columns as MySQL's JSON text, VECTOR as a list.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from decimal import Decimal
from typing import Any, Protocol

from binlake.events.rows import PartialJson
from binlake.values.charsets import codec_for
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json, to_mysql_text
from binlake.values.numeric import bit_length, int_width
from binlake.values.temporal import MysqlDate, MysqlDateTime, format_date, format_datetime, format_time
from binlake.values.types import BLOB_TYPES, ColumnType, string_max_length

PARTIAL_JSON_KEY = "json_diff"  # a partial JSON update in the change log: {"json_diff": [edits]}

_INT_NAMES: dict[int, str] = {
    ColumnType.TINY: "TINYINT",
    ColumnType.SHORT: "SHORTINT",
    ColumnType.INT24: "MEDIUMINT",
    ColumnType.LONG: "INT",
    ColumnType.LONGLONG: "LONGINT",
}
_BLOB_NAMES = {1: "TINYBLOB/TINYTEXT", 2: "BLOB/TEXT", 3: "MEDIUMBLOB/MEDIUMTEXT", 4: "LONGBLOB/LONGTEXT"}


def type_comment(col: ColumnDef) -> str:
    """The type tag mysqlbinlog prints in ``/* … */`` after a value."""
    t, meta = col.real_type, col.meta
    if t in _INT_NAMES:
        return _INT_NAMES[t] + (" UNSIGNED" if col.unsigned else "")
    if t == ColumnType.NEWDECIMAL:
        return f"DECIMAL({meta >> 8},{meta & 0xFF})"
    if t == ColumnType.VARCHAR:
        return f"VARSTRING({meta})"
    if t in (ColumnType.STRING, ColumnType.VAR_STRING):
        return f"STRING({string_max_length(meta)})"
    if t == ColumnType.ENUM:
        return f"ENUM({meta & 0xFF} byte{'s' if meta & 0xFF > 1 else ''})"
    if t == ColumnType.SET:
        return f"SET({meta & 0xFF} bytes)"
    if t == ColumnType.BIT:
        return f"BIT({bit_length(meta)})"
    if t in BLOB_TYPES:
        return _BLOB_NAMES.get(meta, "BLOB/TEXT")
    if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2, ColumnType.TIME2):
        return f"{ColumnType(t).name[:-1]}({meta})"
    if t == ColumnType.NEWDATE:
        return "DATE"
    try:
        return ColumnType(t).name
    except ValueError:
        return f"TYPE{t}"


def stored_bytes(value: Any, col: ColumnDef) -> bytes:
    """The bytes a string value had in the binlog (decoding is lossless, so this inverts it)."""
    if isinstance(value, bytes):
        return value
    codec = codec_for(col.collation)
    if codec in (None, "?", "utf-8"):  # invalid UTF-8 was decoded with surrogateescape: give it back
        return value.encode("utf-8", "surrogateescape")
    return value.encode(codec)


def quote_bytes(raw: bytes) -> str:
    """mysqlbinlog's quoting: control bytes as ``\\xNN``, everything else as stored."""
    out = bytearray(b"'")
    for b in raw:
        if b < 0x20:
            out += b"\\x%02x" % b
        else:
            out.append(b)
    out += b"'"
    return out.decode("utf-8", "surrogateescape")


def _signed(value: int, width: int) -> int:
    bits = width * 8
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _int_text(value: int, col: ColumnDef) -> str:
    if col.unsigned:
        return str(value)
    width = int_width(col.real_type)
    s = _signed(value & ((1 << width * 8) - 1), width)
    return f"{s} ({s + (1 << width * 8)})" if s < 0 else str(s)


def _epoch(value: dt.datetime) -> tuple[str, int]:
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return str(delta.days * 86400 + delta.seconds), delta.microseconds


def text_value(value: Any, col: ColumnDef) -> str:
    """A value as ``mysqlbinlog -vv`` prints it (so the two can be diffed)."""
    if value is None:
        return "NULL"
    t = col.real_type
    if t in _INT_NAMES:
        return _int_text(value, col)
    if t == ColumnType.FLOAT:
        return "%-20g" % value
    if t == ColumnType.DOUBLE:
        return "%-.20g" % value
    if t == ColumnType.NEWDECIMAL:
        return format(value, "f")
    if t in (ColumnType.VARCHAR, ColumnType.STRING, ColumnType.VAR_STRING) or t in BLOB_TYPES:
        return quote_bytes(stored_bytes(value, col))
    if t in (ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2):
        if isinstance(value, MysqlDateTime):
            return "0"
        secs, usec = _epoch(value)
        fsp = col.meta if t == ColumnType.TIMESTAMP2 else 0
        return f"{secs}.{usec:06d}"[: len(secs) + 1 + fsp] if fsp else secs
    if t in (ColumnType.DATETIME2, ColumnType.DATETIME):
        return "'" + format_datetime(value, col.meta if t == ColumnType.DATETIME2 else 0) + "'"
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return "'" + format_date(value).replace("-", ":") + "'"
    if t in (ColumnType.TIME2, ColumnType.TIME):
        return "'" + format_time(value, col.meta if t == ColumnType.TIME2 else 0) + "'"
    if t == ColumnType.YEAR:
        return f"{value:04d}"
    if t == ColumnType.BIT:
        return "b'" + format(value, f"0{bit_length(col.meta)}b") + "'"
    if t == ColumnType.ENUM:
        return str(_enum_index(value, col))
    if t == ColumnType.SET:
        return set_bits(_set_mask(value, col), col.meta & 0xFF)
    if t == ColumnType.JSON:
        return _json_text(value, col)
    if t == ColumnType.GEOMETRY:
        return quote_bytes(value)
    if t == ColumnType.VECTOR:
        return "[" + ",".join(float32_text(v) for v in value) + "]"
    return repr(value)


def _json_text(value: Any, col: ColumnDef) -> str:
    """JSON text; a partial update as nested JSON_REPLACE/INSERT/REMOVE calls on the old value."""
    if isinstance(value, PartialJson):
        expr = f"@{col.index + 1}"
        for d in value.diffs:
            arg = "" if d.operation == "REMOVE" else f", {to_mysql_text(d.value)}"
            # the path as a string value is quoted: a control byte in it (a crafted binlog) must not
            # end the ``###`` comment line and start a line a SQL client would run
            path = quote_bytes(d.path.encode("utf-8", "surrogateescape"))
            expr = f"JSON_{d.operation}({expr}, {path}{arg})"
        return expr
    return "'" + value.text() + "'"


def _enum_index(value: Any, col: ColumnDef) -> int:
    if isinstance(value, int):
        return value
    names = col.enum_values or []
    return names.index(value) + 1 if value in names else 0


def set_bits(mask: int, size: int) -> str:
    """A SET as mysqlbinlog and mariadb-binlog print it: its stored bytes (little-endian) in order,
    each byte's bits high to low — ``s0,s63`` of a 64-member SET is ``b'00000001…10000000'``."""
    return "b'" + "".join(format(byte, "08b") for byte in mask.to_bytes(size, "little")) + "'"


def _set_mask(value: Any, col: ColumnDef) -> int:
    if isinstance(value, int):
        return value
    names = col.set_values or []
    return sum(1 << names.index(v) for v in value)


_F32 = struct.Struct("<f")
_G_DIGITS = ("%.6g", "%.7g", "%.8g", "%.9g")


def float32_text(v: float) -> str:
    """Shortest decimal text (6 to 9 digits) that reads back as the same float32."""
    pack, unpack = _F32.pack, _F32.unpack
    for fmt in _G_DIGITS:
        s = fmt % v
        if unpack(pack(float(s)))[0] == v:
            return s
    return repr(v)


class TypedColumn(Protocol):
    """What value formatting needs of a column: a ``ColumnDef`` or a ``binlake.changes.Column``."""

    @property
    def real_type(self) -> int: ...

    @property
    def meta(self) -> int: ...


def json_value(value: Any, col: TypedColumn) -> Any:
    """A value in the change log's JSON encoding (see the module docstring)."""
    if value is None or isinstance(value, bool):
        return value
    t = col.real_type
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return float(float32_text(value)) if t == ColumnType.FLOAT else value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, (dt.datetime, MysqlDateTime)):
        fsp = col.meta if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2) else 0
        return format_datetime(value, fsp)
    if isinstance(value, (dt.date, MysqlDate)):
        return format_date(value)
    if isinstance(value, dt.timedelta):
        return format_time(value, col.meta if t == ColumnType.TIME2 else 0)
    if isinstance(value, Json):
        return value.text()
    if isinstance(value, PartialJson):
        return {
            PARTIAL_JSON_KEY: [
                {
                    "op": d.operation,
                    "path": d.path,
                    **({} if d.operation == "REMOVE" else {"value": to_mysql_text(d.value)}),
                }
                for d in value.diffs
            ]
        }
    if isinstance(value, tuple):
        if t == ColumnType.VECTOR:
            return [float(float32_text(v)) for v in value]
        return list(value)
    return str(value)


# Names every generated row formatter (jsonrow, sqlrow) finds in its namespace: value classes and
# the formatters of this module its code calls.
FORMAT_ENV: dict[str, Any] = {
    "DEC": Decimal,
    "JSON": Json,
    "DT": dt.datetime,
    "DATE": dt.date,
    "TD": dt.timedelta,
    "FDT": format_datetime,
    "FD": format_date,
    "FT": format_time,
}
