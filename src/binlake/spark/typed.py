"""Typed tables from the change log's JSON images: MySQL column -> Arrow/Delta type, exactly.

Mapping (documented in the README): integers to the narrowest signed type that holds them (BIGINT
UNSIGNED to DECIMAL(20,0)); DECIMAL(p,s) to decimal128(p,s) (p > 38: string); FLOAT/DOUBLE to
float32/float64; DATE to date32, DATETIME to timestamp without zone, TIMESTAMP to timestamp UTC —
zero and partial dates become NULL here (the change log keeps them); TIME to a string
``[-]HHH:MM:SS[.ffffff]`` (Delta has no time type); YEAR to int16; BIT to int64 (BIT(64):
DECIMAL(20,0)); text, ENUM and JSON to string; SET to a comma-separated string; binary types and
GEOMETRY to binary; VECTOR to list<float32>.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

from binlake.render.values import PARTIAL_JSON_KEY
from binlake.values.types import ColumnType

_INT = {
    ColumnType.TINY: (pa.int8(), pa.int16()),
    ColumnType.SHORT: (pa.int16(), pa.int32()),
    ColumnType.INT24: (pa.int32(), pa.int32()),
    ColumnType.LONG: (pa.int32(), pa.int64()),
    ColumnType.LONGLONG: (pa.int64(), pa.decimal128(20, 0)),
}
_TEXT = {
    ColumnType.VARCHAR,
    ColumnType.STRING,
    ColumnType.VAR_STRING,
    ColumnType.BLOB,
    ColumnType.TINY_BLOB,
    ColumnType.MEDIUM_BLOB,
    ColumnType.LONG_BLOB,
}


def arrow_type(col: dict[str, Any]) -> pa.DataType:
    t, meta = col["type"], col["meta"]
    if t in _INT:
        return _INT[t][1 if col.get("unsigned") else 0]
    if t == ColumnType.NEWDECIMAL:
        p, s = meta >> 8, meta & 0xFF
        return pa.decimal128(p, s) if p <= 38 else pa.string()
    if t == ColumnType.FLOAT:
        return pa.float32()
    if t == ColumnType.DOUBLE:
        return pa.float64()
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return pa.date32()
    if t in (ColumnType.DATETIME, ColumnType.DATETIME2):
        return pa.timestamp("us")
    if t in (ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2):
        return pa.timestamp("us", tz="UTC")
    if t == ColumnType.YEAR:
        return pa.int16()
    if t == ColumnType.BIT:
        return pa.decimal128(20, 0) if (meta >> 8) * 8 + (meta & 0xFF) > 63 else pa.int64()
    if t == ColumnType.GEOMETRY or (t in _TEXT and col.get("collation") == 63):
        return pa.binary()
    if t == ColumnType.VECTOR:
        return pa.list_(pa.float32())
    return pa.string()  # text of unknown charset is str when it is UTF-8 (else base64 in the log)


def _parse_datetime(s: str) -> dt.datetime | None:
    if s.startswith("0000") or "-00" in s[:10]:
        return None
    return dt.datetime.fromisoformat(s)


def convert(value: Any, col: dict[str, Any], atype: pa.DataType) -> Any:
    """A change-log JSON value -> the Python value pyarrow stores for ``atype``."""
    if value is None:
        return None
    if isinstance(value, dict) and "base64" in value:
        raw = base64.b64decode(value["base64"])
        return raw if atype == pa.binary() else raw.decode("utf-8", "replace")
    if isinstance(value, dict) and PARTIAL_JSON_KEY in value:  # batch_head refuses these first
        raise ValueError("a partial JSON update cannot be applied without its before image")
    if atype == pa.float32():  # the change log prints a FLOAT's shortest text: back to its float32
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if pa.types.is_decimal(atype):
        return Decimal(value) if isinstance(value, str) else Decimal(value)
    if pa.types.is_timestamp(atype):
        v = _parse_datetime(value)
        return v.replace(tzinfo=dt.UTC) if v is not None and atype.tz else v
    if pa.types.is_date(atype):
        return None if value.startswith("0000") or "-00" in value else dt.date.fromisoformat(value)
    if col["type"] == ColumnType.SET:
        return ",".join(value) if isinstance(value, list) else str(value)
    if pa.types.is_binary(atype):
        return value.encode("utf-8") if isinstance(value, str) else value
    if pa.types.is_string(atype) and not isinstance(value, str):
        return str(value)
    return value
