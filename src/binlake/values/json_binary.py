"""MySQL's binary JSON (``json_binary.cc`` layout) -> Python, and Python -> MySQL's JSON text.

Keys and strings are ``str``; numbers keep their kind (int / float); opaque DECIMAL, DATE, TIME,
DATETIME and TIMESTAMP become Decimal / date / timedelta / datetime; any other opaque value is a
``JsonOpaque`` with its field type and bytes. A JSON column's value is a ``Json`` wrapper so that the
JSON literal ``null`` stays distinct from SQL NULL.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from binlake.values.numeric import decode_decimal
from binlake.values.temporal import format_datetime, format_time, make_date, make_datetime, time_from_packed

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0x0, 0x1, 0x2, 0x3
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING = range(0x4, 0xD)
OPAQUE = 0xF

_I16, _U16, _I32, _U32 = struct.Struct("<h"), struct.Struct("<H"), struct.Struct("<i"), struct.Struct("<I")
_I64, _U64, _F64 = struct.Struct("<q"), struct.Struct("<Q"), struct.Struct("<d")

# field types of opaque values we turn into Python temporal/decimal values
_OPAQUE_DECIMAL, _OPAQUE_DATE, _OPAQUE_TIME, _OPAQUE_DATETIME, _OPAQUE_TIMESTAMP = 246, 10, 11, 12, 7
_OPAQUE_DATETIME2, _OPAQUE_TIMESTAMP2, _OPAQUE_TIME2 = 18, 17, 19


class JsonError(ValueError):
    pass


class JsonUInt(int):
    """An integer MySQL stored as unsigned (UINT16/32/64): kept so it re-encodes the same way."""


class JsonDecimal(Decimal):
    """A DECIMAL inside JSON, with the precision it was stored with (its value is the Decimal)."""

    precision: int


@dataclass(frozen=True, slots=True)
class JsonOpaque:
    """An opaque JSON scalar we keep as bytes (MySQL prints it as ``base64:typeNN:…``)."""

    field_type: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Json:
    """The value of a JSON column. ``Json(None)`` is the JSON literal null, not SQL NULL."""

    value: Any
    empty: bool = field(default=False, compare=False)  # stored as zero bytes (MySQL reads that as null)
    # decoded from binary JSON holding no opaque value: only dict/list/str/int/float/bool/None, which
    # the C JSON encoder writes as ``to_mysql_text`` does (see ``text``)
    plain: bool = field(default=False, compare=False, repr=False)

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        """``to_mysql_text(self.value)``; a plain document through the C encoder, unless a float
        may be written otherwise by MySQL (see ``double_text``) or is not finite: those take the
        reference."""
        if self.plain:
            try:
                out = _encode_plain(self.value)
            except ValueError:  # NaN or infinity
                return to_mysql_text(self.value)
            if _REPR_MAY_DIFFER(out) is None:
                return out
        return to_mysql_text(self.value)


# where ``repr`` of a float may not be ``double_text``'s: an exponent, or 16 digits before the point
# (a string holding such text takes the reference too; it writes the same)
_REPR_MAY_DIFFER = re.compile(r"\de[-+]\d|\d{16}\.").search


def double_text(v: float) -> str:
    """A double as MySQL writes it in JSON text (``my_gcvt`` on the shortest digits): fixed notation
    when the decimal point falls within 15 places of the digits, else ``1.5e-16`` / ``1e15`` (no
    ``+``, no padding); ``.0`` after an integral fixed value. Python's ``repr`` writes the same but
    for 1e-15 <= |v| < 1e-4 (``1e-07``, MySQL ``0.0000001``) and 1e15 <= |v| < 1e16 (``1e+15``
    where all 16 digits are not needed: MySQL ``1e15``). Checked against MySQL 9 on 8854 values
    (tests/values/test_json_text.py)."""
    r = repr(v)
    a = -v if v < 0 else v
    if not (1e-15 <= a < 1e-4 or 1e15 <= a < 1e16):
        return r.replace("e+", "e") if "e" in r else r
    mantissa, _, exp = repr(a).partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac.rstrip("0")
    digits = all_digits.lstrip("0")
    point = len(whole) - (len(all_digits) - len(digits)) + (int(exp) if exp else 0)
    digits = digits.rstrip("0")
    n = len(digits)
    if point >= -14 and (point <= 15 or n > point):
        if point <= 0:
            out = "0." + "0" * -point + digits
        elif point < n:
            out = digits[:point] + "." + digits[point:]
        else:
            out = digits + "0" * (point - n) + ".0"
    else:
        out = digits[0] + ("." + digits[1:] if n > 1 else "") + "e" + str(point - 1)
    return "-" + out if v < 0 else out


def _varlen(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Variable-length string length: 7 bits per byte, low bits first, at most 5 bytes."""
    n = 0
    for i in range(5):
        if pos >= end:
            raise JsonError("truncated length")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n, pos
    raise JsonError("length of more than 5 bytes")


def _opaque(field_type: int, data: bytes) -> Any:
    if field_type == _OPAQUE_DECIMAL and len(data) >= 2:
        value = JsonDecimal(decode_decimal(data, 2, data[0], data[1])[0])
        value.precision = data[0]
        return value
    if (
        field_type
        in (_OPAQUE_DATE, _OPAQUE_DATETIME, _OPAQUE_TIMESTAMP, _OPAQUE_DATETIME2, _OPAQUE_TIMESTAMP2)
        and len(data) == 8
    ):
        packed = int.from_bytes(data, "little", signed=True)
        neg = packed < 0
        packed = abs(packed)
        ymdhms, usec = packed >> 24, packed & 0xFFFFFF
        ymd, hms = ymdhms >> 17, ymdhms & 0x1FFFF
        ym = ymd >> 5
        y, m, d = ym // 13, ym % 13, ymd & 31
        if field_type == _OPAQUE_DATE:
            return make_date(y, m, d)
        if not neg:
            return make_datetime(y, m, d, hms >> 12, (hms >> 6) & 63, hms & 63, usec)
    if field_type in (_OPAQUE_TIME, _OPAQUE_TIME2) and len(data) == 8:
        return time_from_packed(int.from_bytes(data, "little", signed=True))
    return JsonOpaque(field_type, data)


def _spend(budget: list[int], n: int) -> None:
    """Entries may point at the same bytes: without a budget a few hundred bytes of nested arrays
    whose two entries share one child decode to 2^depth values. Every value of a document MySQL wrote
    has bytes of its own, so more decoded bytes than the document holds means overlap."""
    budget[0] -= n
    if budget[0] < 0:
        raise JsonError("values overlap: the document decodes to more than its bytes hold")


def _scalar(t: int, buf: bytes, pos: int, end: int, budget: list[int]) -> Any:
    if t == LITERAL:
        lit = buf[pos]
        if lit == 0:
            return None
        if lit == 1:
            return True
        if lit == 2:
            return False
        raise JsonError(f"bad literal {lit}")
    if t == INT16:
        return _I16.unpack_from(buf, pos)[0]
    if t == UINT16:
        return JsonUInt(_U16.unpack_from(buf, pos)[0])
    if t == INT32:
        return _I32.unpack_from(buf, pos)[0]
    if t == UINT32:
        return JsonUInt(_U32.unpack_from(buf, pos)[0])
    if t == INT64:
        return _I64.unpack_from(buf, pos)[0]
    if t == UINT64:
        return JsonUInt(_U64.unpack_from(buf, pos)[0])
    if t == DOUBLE:
        return _F64.unpack_from(buf, pos)[0]
    if t == STRING:
        n, p = _varlen(buf, pos, end)
        if p + n > end:
            raise JsonError("string runs past the value")
        _spend(budget, n)
        return buf[p : p + n].decode("utf-8", "surrogateescape")
    if t == OPAQUE:
        if pos >= end:
            raise JsonError("truncated opaque")
        ftype = buf[pos]
        n, p = _varlen(buf, pos + 1, end)
        if p + n > end:
            raise JsonError("opaque runs past the value")
        _spend(budget, n)
        budget[1] += 1
        return _opaque(ftype, bytes(buf[p : p + n]))
    raise JsonError(f"unknown JSON type 0x{t:02x}")


_HEAD = (struct.Struct("<HH"), struct.Struct("<II"))  # element count, byte size
_KEY_ENTRY = (struct.Struct("<HH"), struct.Struct("<IH"))  # key offset, key length


def _read_container(t: int, buf: bytes, base: int, end: int, depth: int, budget: list[int]) -> Any:
    """An object or array. The common entries (literals, small integers, strings with a one-byte
    length, nested containers) are read here; every other value goes through ``_scalar``, in the
    same order and with the same checks."""
    if depth > 150:
        raise JsonError("nesting deeper than 150")
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    osz = 4 if large else 2
    rd = _U32.unpack_from if large else _U16.unpack_from
    if base + 2 * osz > end:
        raise JsonError("truncated container header")
    count, size = _HEAD[large].unpack_from(buf, base)
    _spend(budget, count)
    if base + size > end:
        raise JsonError(f"container size {size} runs past the value")
    cend = base + size
    is_object = t in (SMALL_OBJECT, LARGE_OBJECT)
    p = base + 2 * osz
    keys: list[str] = []
    if is_object:
        if p + count * (osz + 2) > cend:
            raise JsonError("key entries run past the container")
        key_entry = _KEY_ENTRY[large].unpack_from
        for _ in range(count):
            koff, klen = key_entry(buf, p)
            p += osz + 2
            if base + koff + klen > cend:
                raise JsonError("key runs past the container")
            keys.append(buf[base + koff : base + koff + klen].decode("utf-8", "surrogateescape"))
    entry = 1 + osz
    if p + count * entry > cend:
        raise JsonError("value entries run past the container")
    values: list[Any] = []
    append = values.append
    for _ in range(count):
        vt = buf[p]
        if vt == INT16:
            append(_I16.unpack_from(buf, p + 1)[0])
        elif vt == LITERAL and buf[p + 1] <= 1:
            append(True if buf[p + 1] else None)
        elif vt in (LITERAL, UINT16) or (large and vt in (INT32, UINT32)):
            append(_scalar(vt, buf, p + 1, cend, budget))
        else:
            q = base + rd(buf, p + 1)[0]
            if q >= cend:
                raise JsonError("value offset past the container")
            if vt == STRING and buf[q] < 0x80:  # a string of fewer than 128 bytes
                n = buf[q]
                if q + 1 + n > cend:
                    raise JsonError("string runs past the value")
                budget[0] -= n
                if budget[0] < 0:
                    _spend(budget, 0)
                append(buf[q + 1 : q + 1 + n].decode("utf-8", "surrogateescape"))
            elif vt == DOUBLE:
                append(_F64.unpack_from(buf, q)[0])
            elif vt <= LARGE_ARRAY:
                append(_read_container(vt, buf, q, cend, depth + 1, budget))
            else:
                append(_scalar(vt, buf, q, cend, budget))
        p += entry
    return dict(zip(keys, values, strict=True)) if is_object else values


def _value(t: int, buf: bytes, pos: int, end: int, depth: int, budget: list[int]) -> Any:
    if t <= LARGE_ARRAY:
        return _read_container(t, buf, pos, end, depth, budget)
    return _scalar(t, buf, pos, end, budget)


def decode_json_binary(data: bytes) -> Any:
    """One binary JSON document -> Python. Empty input is JSON null (as MySQL reads it)."""
    if not data:
        return None
    try:
        return _value(data[0], data, 1, len(data), 0, [len(data), 0])
    except (struct.error, IndexError) as e:
        raise JsonError(f"truncated JSON value: {e}") from None


def decode_json_column(data: bytes) -> Json:
    """A JSON column's value: ``Json(decode_json_binary(data))``, marked ``plain`` when no opaque
    value was met; zero bytes are ``Json(None, empty=True)``."""
    if not data:
        return Json(None, empty=True)
    budget = [len(data), 0]  # bytes left, opaque values met
    try:
        value = _value(data[0], data, 1, len(data), 0, budget)
    except (struct.error, IndexError) as e:
        raise JsonError(f"truncated JSON value: {e}") from None
    return Json(value, plain=not budget[1])


def _text(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(double_text(v))
    elif isinstance(v, str):
        out.append(_quote(v))
    elif isinstance(v, dict):
        out.append("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.append(", ")
            out.append(_quote(k))
            out.append(": ")
            _text(x, out)
        out.append("}")
    elif isinstance(v, list):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(", ")
            _text(x, out)
        out.append("]")
    elif isinstance(v, Decimal):  # fixed notation, as MySQL writes a DECIMAL (str: 1E-8, 0E-9)
        out.append(format(v, "f"))
    elif isinstance(v, dt.datetime):
        out.append('"' + format_datetime(v, 6) + '"')
    elif isinstance(v, dt.date):
        out.append(f'"{v.year:04d}-{v.month:02d}-{v.day:02d}"')
    elif isinstance(v, dt.timedelta):
        out.append('"' + format_time(v, 6) + '"')
    elif isinstance(v, JsonOpaque):
        out.append(f'"base64:type{v.field_type}:{base64.b64encode(v.data).decode()}"')
    elif hasattr(v, "_fields"):  # MysqlDate / MysqlDateTime
        out.append(f'"{v}"')
    else:
        raise TypeError(f"cannot render {type(v).__name__} as JSON")


_quote = json.encoder.encode_basestring  # type: ignore[attr-defined]  # json.dumps(str, ensure_ascii=False)


def _not_plain(v: Any) -> Any:
    raise TypeError(f"{type(v).__name__} is not a plain JSON value")


# json.dumps(v, ensure_ascii=False, allow_nan=False) with MySQL's separators (json's defaults): the C
# encoder called directly, one call for a whole plain document
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    _c_encode = _c_make_encoder(None, _not_plain, _quote, None, ": ", ", ", False, False, False)

    def _encode_plain(v: Any) -> str:
        return "".join(_c_encode(v, 0))

else:  # an interpreter without the C accelerator
    _encode_plain = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False).encode  # type: ignore[assignment]


def to_mysql_text(v: Any) -> str:
    """JSON text the way MySQL prints it (``", "`` and ``": "`` separators, key order kept)."""
    out: list[str] = []
    _text(v, out)
    return "".join(out)


# ---- encoder: Python -> MySQL binary JSON, laid out as the server lays it out ---------------------


def _varlen_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int_type(v: int) -> tuple[int, bytes]:
    if isinstance(v, JsonUInt) or v > 0x7FFFFFFFFFFFFFFF:
        for t, st in ((UINT16, _U16), (UINT32, _U32), (UINT64, _U64)):
            if v < 1 << (st.size * 8):
                return t, st.pack(v)
    for t, st in ((INT16, _I16), (INT32, _I32), (INT64, _I64)):
        if -(1 << (st.size * 8 - 1)) <= v < 1 << (st.size * 8 - 1):
            return t, st.pack(v)
    raise JsonError(f"integer {v} does not fit JSON")


def _opaque_bytes(v: Any) -> tuple[int, bytes]:
    if isinstance(v, JsonOpaque):
        return v.field_type, v.data
    if isinstance(v, Decimal):
        sign, digits, exp = v.as_tuple()
        scale = max(-int(exp), 0)
        precision = getattr(v, "precision", None) or max(len(digits) + max(int(exp), 0), scale, 1)
        from binlake.values.numeric import encode_decimal

        return _OPAQUE_DECIMAL, bytes([precision, scale]) + encode_decimal(v, precision, scale)
    if isinstance(v, dt.datetime):
        ymd = ((v.year * 13 + v.month) << 5) | v.day
        hms = (v.hour << 12) | (v.minute << 6) | v.second
        return _OPAQUE_DATETIME, ((((ymd << 17) | hms) << 24) + v.microsecond).to_bytes(
            8, "little", signed=True
        )
    if isinstance(v, dt.date):
        ymd = ((v.year * 13 + v.month) << 5) | v.day
        return _OPAQUE_DATE, ((ymd << 17) << 24).to_bytes(8, "little", signed=True)
    if isinstance(v, dt.timedelta):
        from binlake.values.temporal import time_to_packed

        return _OPAQUE_TIME, time_to_packed(v).to_bytes(8, "little", signed=True)
    raise JsonError(f"cannot store {type(v).__name__} in JSON")


def _scalar_bytes(v: Any) -> tuple[int, bytes]:
    if v is None:
        return LITERAL, b"\x00"
    if v is True:
        return LITERAL, b"\x01"
    if v is False:
        return LITERAL, b"\x02"
    if isinstance(v, int):
        return _int_type(v)
    if isinstance(v, float):
        return DOUBLE, _F64.pack(v)
    if isinstance(v, str):
        raw = v.encode("utf-8", "surrogateescape")
        return STRING, _varlen_bytes(len(raw)) + raw
    if hasattr(v, "_fields") and not isinstance(v, tuple):
        raise JsonError("zero dates cannot be stored in JSON")
    t, data = _opaque_bytes(v)
    return OPAQUE, bytes([t]) + _varlen_bytes(len(data)) + data


def _encode(v: Any) -> tuple[int, bytes]:
    if isinstance(v, dict):
        return _container(v, True)
    if isinstance(v, list):
        return _container(v, False)
    return _scalar_bytes(v)


def _container(v: dict[str, Any] | list[Any], is_object: bool) -> tuple[int, bytes]:
    for large in (False, True):
        out = _layout(v, is_object, large)
        if out is not None:
            return (LARGE_OBJECT if large else SMALL_OBJECT) if is_object else (
                LARGE_ARRAY if large else SMALL_ARRAY
            ), out
    raise JsonError("JSON document too large")


def _layout(v: dict[str, Any] | list[Any], is_object: bool, large: bool) -> bytes | None:
    osz = 4 if large else 2
    limit = 1 << (osz * 8)
    items = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
    n = len(items)
    keys = [str(k).encode("utf-8", "surrogateescape") for k, _ in items] if is_object else []
    header = 2 * osz + (n * (osz + 2) if is_object else 0) + n * (1 + osz)
    pos = header + sum(len(k) for k in keys)
    key_entries, value_entries, tail = bytearray(), bytearray(), bytearray()
    kpos = header
    for k in keys:
        if kpos >= limit or len(k) > 0xFFFF:
            return None
        key_entries += kpos.to_bytes(osz, "little") + len(k).to_bytes(2, "little")
        kpos += len(k)
    for _, x in items:
        t, data = _encode(x)
        inline = t in (LITERAL, INT16, UINT16) or (large and t in (INT32, UINT32))
        if inline:
            value_entries += bytes([t]) + data.ljust(osz, b"\0")
        else:
            if pos >= limit:
                return None
            value_entries += bytes([t]) + pos.to_bytes(osz, "little")
            tail += data
            pos += len(data)
    size = pos
    if size >= limit:
        return None
    return (
        n.to_bytes(osz, "little")
        + size.to_bytes(osz, "little")
        + key_entries
        + value_entries
        + b"".join(keys)
        + tail
    )


def encode_json_binary(v: Any) -> bytes:
    """Python -> MySQL binary JSON (small containers unless they do not fit, keys in the given order)."""
    t, data = _encode(v)
    return bytes([t]) + data
