"""DATE, TIME, DATETIME, TIMESTAMP (old and fractional "2" formats) and YEAR-free temporal helpers.

Exactness rules: every microsecond kept; negative TIME (with fractions) right; zero and partial dates
(``0000-00-00``, ``2013-00-00``) are ``MysqlDate``/``MysqlDateTime`` values, distinct from NULL and from
the epoch; TIMESTAMP is an aware UTC datetime.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, NamedTuple

Decoder = Callable[[bytes, int], tuple[Any, int]]
UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


class MysqlDate(NamedTuple):
    """A DATE that Python's ``date`` cannot hold (zero or partial: month or day 0)."""

    year: int
    month: int
    day: int

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"


class MysqlDateTime(NamedTuple):
    """A DATETIME/TIMESTAMP that Python's ``datetime`` cannot hold (zero or partial date)."""

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def __str__(self) -> str:
        s = f"{self.year:04d}-{self.month:02d}-{self.day:02d} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        return s + (f".{self.microsecond:06d}" if self.microsecond else "")


def make_date(year: int, month: int, day: int) -> dt.date | MysqlDate:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return MysqlDate(year, month, day)


def make_datetime(
    year: int, month: int, day: int, hour: int, minute: int, second: int, usec: int
) -> dt.datetime | MysqlDateTime:
    try:
        return dt.datetime(year, month, day, hour, minute, second, usec)
    except ValueError:
        return MysqlDateTime(year, month, day, hour, minute, second, usec)


def date_decoder() -> Decoder:
    def dec_date(buf: bytes, pos: int) -> tuple[Any, int]:
        v = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        return make_date(v >> 9, (v >> 5) & 15, v & 31), pos + 3

    return dec_date


def time_decoder() -> Decoder:
    """Old TIME (before 5.6.4): signed 3-byte integer ±HHMMSS."""

    def dec_time(buf: bytes, pos: int) -> tuple[dt.timedelta, int]:
        v = int.from_bytes(buf[pos : pos + 3], "little", signed=True)
        sign = -1 if v < 0 else 1
        v = abs(v)
        td = dt.timedelta(hours=v // 10000, minutes=(v // 100) % 100, seconds=v % 100)
        return sign * td, pos + 3

    return dec_time


def datetime_decoder() -> Decoder:
    """Old DATETIME: 8-byte integer YYYYMMDDhhmmss."""

    def dec_datetime(buf: bytes, pos: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[pos : pos + 8], "little")
        d, t = divmod(v, 1000000)
        value = make_datetime(d // 10000, (d // 100) % 100, d % 100, t // 10000, (t // 100) % 100, t % 100, 0)
        return value, pos + 8

    return dec_datetime


def timestamp_from(seconds: int, usec: int) -> dt.datetime | MysqlDateTime:
    if seconds == 0 and usec == 0:
        return MysqlDateTime(0, 0, 0)
    return _EPOCH + dt.timedelta(seconds=seconds, microseconds=usec)


def timestamp_decoder() -> Decoder:
    def dec_timestamp(buf: bytes, pos: int) -> tuple[Any, int]:
        return timestamp_from(int.from_bytes(buf[pos : pos + 4], "little"), 0), pos + 4

    return dec_timestamp


def frac_size(fsp: int) -> int:
    return (fsp + 1) // 2


def _read_frac(buf: bytes, pos: int, fsp: int) -> int:
    """Fraction of DATETIME2/TIMESTAMP2 in microseconds (big-endian, scaled by precision)."""
    n = (fsp + 1) // 2
    if n == 0:
        return 0
    v = int.from_bytes(buf[pos : pos + n], "big")
    return v * (10000 if n == 1 else 100 if n == 2 else 1)


def timestamp2_decoder(fsp: int) -> Decoder:
    size = 4 + frac_size(fsp)

    def dec_timestamp2(buf: bytes, pos: int) -> tuple[Any, int]:
        sec = int.from_bytes(buf[pos : pos + 4], "big")
        return timestamp_from(sec, _read_frac(buf, pos + 4, fsp)), pos + size

    return dec_timestamp2


DATETIMEF_INT_OFS = 0x8000000000


def unpack_datetime_int(v: int) -> tuple[int, int, int, int, int, int]:
    """The 40-bit DATETIME2 integer part (sign removed) -> y, m, d, h, mi, s."""
    ymd, hms = v >> 17, v & 0x1FFFF
    ym = ymd >> 5
    return ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63


def datetime2_decoder(fsp: int) -> Decoder:
    size = 5 + frac_size(fsp)

    def dec_datetime2(buf: bytes, pos: int) -> tuple[Any, int]:
        v = int.from_bytes(buf[pos : pos + 5], "big") - DATETIMEF_INT_OFS
        y, m, d, h, mi, s = unpack_datetime_int(abs(v))
        return make_datetime(y, m, d, h, mi, s, _read_frac(buf, pos + 5, fsp)), pos + size

    return dec_datetime2


def time_from_packed(packed: int) -> dt.timedelta:
    """A packed TIME (``(hh<<12 | mm<<6 | ss) << 24 | usec``, negated when negative) -> timedelta."""
    neg = packed < 0
    packed = -packed if neg else packed
    hms, usec = packed >> 24, packed & 0xFFFFFF
    td = dt.timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 63, seconds=hms & 63, microseconds=usec)
    return -td if neg else td


def time2_packed(buf: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """Read TIME2 bytes into MySQL's packed time integer (negative fractions stored reversed)."""
    if fsp >= 5:
        return int.from_bytes(buf[pos : pos + 6], "big") - 0x800000000000, pos + 6
    intpart = int.from_bytes(buf[pos : pos + 3], "big") - 0x800000
    if fsp == 0:
        return intpart << 24, pos + 3
    if fsp <= 2:
        frac = buf[pos + 3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        return (intpart << 24) + frac * 10000, pos + 4
    frac = int.from_bytes(buf[pos + 3 : pos + 5], "big")
    if intpart < 0 and frac:
        intpart += 1
        frac -= 0x10000
    return (intpart << 24) + frac * 100, pos + 5


def time2_decoder(fsp: int) -> Decoder:
    def dec_time2(buf: bytes, pos: int) -> tuple[dt.timedelta, int]:
        packed, end = time2_packed(buf, pos, fsp)
        return time_from_packed(packed), end

    return dec_time2


def format_time(td: dt.timedelta, fsp: int = 6) -> str:
    """MySQL TIME text: ``[-]HH:MM:SS[.frac]`` with hours beyond 24."""
    us = td.days * 86400_000000 + td.seconds * 1000000 + td.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    s, frac = divmod(us, 1000000)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if fsp:
        out += "." + f"{frac:06d}"[:fsp]
    return out


def format_datetime(v: Any, fsp: int = 6) -> str:
    """MySQL DATETIME text of a datetime or MysqlDateTime, with ``fsp`` fractional digits."""
    if v.__class__ is dt.datetime and (v.tzinfo is None or v.tzinfo is UTC) and fsp <= 6:
        # isoformat pads the year to 4 digits and cuts (not rounds) the fraction, as below; a UTC
        # offset it appends falls past the cut
        return v.isoformat(" ", "microseconds")[: 20 + fsp] if fsp else v.isoformat(" ", "seconds")[:19]
    if isinstance(v, MysqlDateTime):
        base = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        usec = v.microsecond
    else:
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        base = (
            v.strftime("%Y-%m-%d %H:%M:%S")
            if v.year >= 1000
            else (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}")
        )
        usec = v.microsecond
    return base + ("." + f"{usec:06d}"[:fsp] if fsp else "")


def format_date(v: Any) -> str:
    if v.__class__ is dt.date:
        return v.isoformat()  # the same text, one C call
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"


# ---- encoders: the exact inverse of each decoder above -------------------------------------------

Encoder = Callable[[Any], bytes]


def date_encoder() -> Encoder:
    return lambda v: ((v.year << 9) | (v.month << 5) | v.day).to_bytes(3, "little")


def time_encoder() -> Encoder:
    def enc_time(td: dt.timedelta) -> bytes:
        us = td.days * 86400_000000 + td.seconds * 1000000 + td.microseconds
        sign, s = (-1 if us < 0 else 1), abs(us) // 1000000
        h, rem = divmod(s, 3600)
        return (sign * (h * 10000 + (rem // 60) * 100 + rem % 60)).to_bytes(3, "little", signed=True)

    return enc_time


def datetime_encoder() -> Encoder:
    def enc_datetime(v: Any) -> bytes:
        n = ((v.year * 100 + v.month) * 100 + v.day) * 1000000 + (v.hour * 100 + v.minute) * 100 + v.second
        return n.to_bytes(8, "little")

    return enc_datetime


def _seconds_usec(v: Any) -> tuple[int, int]:
    if isinstance(v, MysqlDateTime):
        return 0, 0
    delta = v - _EPOCH
    return delta.days * 86400 + delta.seconds, delta.microseconds


def timestamp_encoder() -> Encoder:
    return lambda v: _seconds_usec(v)[0].to_bytes(4, "little")


def _frac_bytes(usec: int, fsp: int) -> bytes:
    n = (fsp + 1) // 2
    if n == 0:
        return b""
    return (usec // (10000 if n == 1 else 100 if n == 2 else 1)).to_bytes(n, "big")


def timestamp2_encoder(fsp: int) -> Encoder:
    def enc_timestamp2(v: Any) -> bytes:
        sec, usec = _seconds_usec(v)
        return sec.to_bytes(4, "big") + _frac_bytes(usec, fsp)

    return enc_timestamp2


def datetime2_encoder(fsp: int) -> Encoder:
    def enc_datetime2(v: Any) -> bytes:
        ymd = ((v.year * 13 + v.month) << 5) | v.day
        hms = (v.hour << 12) | (v.minute << 6) | v.second
        return (((ymd << 17) | hms) + DATETIMEF_INT_OFS).to_bytes(5, "big") + _frac_bytes(v.microsecond, fsp)

    return enc_datetime2


def time_to_packed(td: dt.timedelta) -> int:
    us = td.days * 86400_000000 + td.seconds * 1000000 + td.microseconds
    neg, us = us < 0, abs(us)
    s, frac = divmod(us, 1000000)
    h, rem = divmod(s, 3600)
    packed = (((h << 12) | ((rem // 60) << 6) | (rem % 60)) << 24) + frac
    return -packed if neg else packed


def _c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero), which MySQL's packing uses."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def time2_encoder(fsp: int) -> Encoder:
    """MySQL's my_time_packed_to_binary: integer part by arithmetic shift, fraction by C remainder,
    so a negative fraction is stored as its two's complement (the decoder undoes exactly that)."""

    def enc_time2(td: dt.timedelta) -> bytes:
        packed = time_to_packed(td)
        if fsp >= 5:
            return (packed + 0x800000000000).to_bytes(6, "big")
        head = ((packed >> 24) + 0x800000).to_bytes(3, "big")
        frac = packed - _c_div(packed, 1 << 24) * (1 << 24)
        if fsp == 0:
            return head
        if fsp <= 2:
            return head + bytes([_c_div(frac, 10000) & 0xFF])
        return head + (_c_div(frac, 100) & 0xFFFF).to_bytes(2, "big")

    return enc_time2
