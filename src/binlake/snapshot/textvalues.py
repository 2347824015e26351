"""The text protocol's bytes -> the values the binlog decoder gives for the same column.

The snapshot reads with ``character_set_results = NULL`` (strings in their column's own charset,
as the binlog holds them), ``time_zone = '+00:00'`` (TIMESTAMP in UTC) and no driver conversions, so
every value arrives as the server's bytes and is parsed here, once per column, by a parser chosen
from a table by the column's binlog type. ENUM and SET are selected as numbers (``col+0``), INET6
as its 16 stored bytes (``INET6_ATON``) and FLOAT as a DOUBLE (its own text keeps 6 digits), so
they map exactly as the decoder maps them (``catalog.select_expression``).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from binlake.layout import Column, Layout
from binlake.values.charsets import codec_for, decode_text
from binlake.values.temporal import MysqlDateTime, make_date, make_datetime
from binlake.values.types import ColumnType as T

Parse = Callable[[bytes], Any]
_F32 = struct.Struct("<f")
UTC = dt.UTC


def _float32(raw: bytes) -> float:
    return float(_F32.unpack(_F32.pack(float(raw)))[0])


def _usec(frac: bytes) -> int:
    return int(frac.ljust(6, b"0")[:6]) if frac else 0


def _datetime_parts(raw: bytes) -> tuple[int, int, int, int, int, int, int]:
    date, _, time = raw.partition(b" ")
    y, m, d = date.split(b"-")
    hms, _, frac = time.partition(b".")
    hh, mm, ss = hms.split(b":") if hms else (b"0", b"0", b"0")
    return int(y), int(m), int(d), int(hh), int(mm), int(ss), _usec(frac)


def _date(raw: bytes) -> Any:
    y, m, d = raw.split(b"-")
    return make_date(int(y), int(m), int(d))


def _datetime(raw: bytes) -> Any:
    return make_datetime(*_datetime_parts(raw))


def _timestamp(raw: bytes) -> Any:
    v = make_datetime(*_datetime_parts(raw))
    return v if isinstance(v, MysqlDateTime) else v.replace(tzinfo=UTC)


def _time(raw: bytes) -> dt.timedelta:
    neg = raw.startswith(b"-")
    hms, _, frac = raw.lstrip(b"-").partition(b".")
    hh, mm, ss = hms.split(b":")
    td = dt.timedelta(hours=int(hh), minutes=int(mm), seconds=int(ss), microseconds=_usec(frac))
    return -td if neg else td


def _enum(c: Column) -> Parse:
    names = c.values

    def parse(raw: bytes) -> Any:
        i = int(raw)
        if names is None:
            return i
        return names[i - 1] if 0 < i <= len(names) else "" if i == 0 else i

    return parse


def _set(c: Column) -> Parse:
    names = c.values

    def parse(raw: bytes) -> Any:
        bits = int(raw)
        if names is None or bits >> len(names):
            return bits
        return tuple(n for i, n in enumerate(names) if bits >> i & 1)

    return parse


def _text(c: Column) -> Parse:
    codec = codec_for(c.collation)
    return lambda raw: decode_text(bytes(raw), codec)


_SIMPLE: dict[int, Parse] = {
    T.TINY: int, T.SHORT: int, T.INT24: int, T.LONG: int, T.LONGLONG: int, T.YEAR: int,
    T.NEWDECIMAL: lambda raw: Decimal(raw.decode("ascii")),
    T.FLOAT: _float32,
    T.DOUBLE: float,
    T.BIT: lambda raw: int.from_bytes(raw, "big"),
    T.DATE: _date, T.NEWDATE: _date,
    T.DATETIME: _datetime, T.DATETIME2: _datetime,
    T.TIMESTAMP: _timestamp, T.TIMESTAMP2: _timestamp,
    T.TIME: _time, T.TIME2: _time,
    T.GEOMETRY: bytes,
}  # fmt: skip
_BUILT: dict[int, Callable[[Column], Parse]] = {
    T.ENUM: _enum,
    T.SET: _set,
    T.STRING: _text,
    T.VARCHAR: _text,
    T.VAR_STRING: _text,
    T.BLOB: _text,
}


def parser(c: Column) -> Parse:
    simple = _SIMPLE.get(c.type)
    return simple if simple is not None else _BUILT[c.type](c)


def row_parser(layout: Layout) -> Callable[[Sequence[bytes | None]], tuple[Any, ...]]:
    """One row of raw values -> a tuple of decoder-equal values (NULL stays None)."""
    parsers = [parser(c) for c in layout]

    def parse(row: Sequence[bytes | None]) -> tuple[Any, ...]:
        return tuple(None if v is None else p(v) for p, v in zip(parsers, row, strict=True))

    return parse
