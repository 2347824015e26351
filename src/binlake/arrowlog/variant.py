"""Spark/Parquet VARIANT values built in pure Python: the change log's row images and keys.

A variant is two byte strings: ``metadata`` (a dictionary of the object keys) and ``value``. Row images
of one table layout share their keys, so a ``LayoutEncoder`` builds the metadata once per layout and
per row only the value bytes: an object whose fields are in the order Spark searches them (names by
UTF-16 code units, as Java compares strings), each value encoded by a function chosen once per column
from its declared type (the mapping is ``binlake.arrowlog.images``'s). Nothing here imports Spark.

Encoding (Apache Parquet VariantEncoding.md): a value starts with one header byte, its basic type in
the low two bits (0 primitive, 1 short string, 2 object, 3 array); integers little-endian.
"""

from __future__ import annotations

import datetime as dt
import itertools
import struct
from collections.abc import Callable, Sequence
from decimal import Context, Decimal
from typing import Any

# primitive type ids (header byte = id << 2)
NULL, TRUE, FALSE, INT8, INT16, INT32, INT64, DOUBLE = 0, 1, 2, 3, 4, 5, 6, 7
DECIMAL4, DECIMAL8, DECIMAL16, DATE, TIMESTAMP, TIMESTAMP_NTZ, FLOAT, BINARY, STRING = range(8, 17)
PRIMITIVE, SHORT_STRING, OBJECT, ARRAY = range(4)
NULL_VALUE = b"\x00"
EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_EPOCH_NTZ = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_US = dt.timedelta(microseconds=1)
_EXACT = Context(prec=100)  # decimals up to 38 digits are never rounded

Encode = Callable[[Any], bytes]  # one non-NULL value -> its variant value bytes

_I8, _I16, _I32, _I64 = (struct.Struct(f"<B{c}").pack for c in "bhiq")
_F32, _F64 = struct.Struct("<Bf").pack, struct.Struct("<Bd").pack
_LEN = struct.Struct("<BI").pack
_DEC4, _DEC8 = struct.Struct("<BBi").pack, struct.Struct("<BBq").pack


def key_order(name: str) -> bytes:
    """The order of object keys: Java's String order (UTF-16 code units), which Spark searches by."""
    return name.encode("utf-16-be", "surrogatepass")


def enc_int8(v: int) -> bytes:
    return _I8(INT8 << 2, v)


def enc_int16(v: int) -> bytes:
    return _I16(INT16 << 2, v)


def enc_int32(v: int) -> bytes:
    return _I32(INT32 << 2, v)


def enc_int64(v: int) -> bytes:
    return _I64(INT64 << 2, v)


def enc_int(v: int) -> bytes:
    """An integer in the narrowest variant type; beyond int64 (BIGINT UNSIGNED, BIT(64)) a decimal."""
    if -(1 << 63) <= v < 1 << 63:
        if -128 <= v < 128:
            return _I8(INT8 << 2, v)
        if -(1 << 31) <= v < 1 << 31:
            return _I32(INT32 << 2, v)
        return _I64(INT64 << 2, v)
    return _decimal16(v, 0)


def enc_uint64(v: int) -> bytes:
    """BIGINT UNSIGNED / BIT(64): int64 while it fits, else decimal(20,0)."""
    return _I64(INT64 << 2, v) if v < 1 << 63 else _decimal16(v, 0)


def enc_float(v: float) -> bytes:
    return _F32(FLOAT << 2, v)


def enc_double(v: float) -> bytes:
    return _F64(DOUBLE << 2, v)


def _decimal16(unscaled: int, scale: int) -> bytes:
    return bytes((DECIMAL16 << 2, scale)) + unscaled.to_bytes(16, "little", signed=True)


def decimal_encoder(precision: int, scale: int) -> Encode:
    """A DECIMAL(p,s) column (p <= 38): the unscaled integer in 4, 8 or 16 bytes by the precision."""
    q = Decimal(1).scaleb(-scale)

    def unscaled(v: Decimal) -> int:
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)
        if exp != -scale:
            sign, digits, exp = v.quantize(q, context=_EXACT).as_tuple()
            assert isinstance(exp, int)
        n = int("".join(map(str, digits))) if digits else 0
        return -n if sign else n

    if precision <= 9:
        return lambda v: _DEC4(DECIMAL4 << 2, scale, unscaled(v))
    if precision <= 18:
        return lambda v: _DEC8(DECIMAL8 << 2, scale, unscaled(v))
    return lambda v: _decimal16(unscaled(v), scale)


def enc_decimal(v: Decimal) -> bytes:
    """A decimal of unknown declared precision (inside JSON documents): the smallest that holds it."""
    sign, digits, exp = v.as_tuple()
    if not isinstance(exp, int) or len(digits) > 38 or exp > 0 or -exp > 38:
        return enc_string(format(v, "f"))
    n = int("".join(map(str, digits))) if digits else 0
    n = -n if sign else n
    if len(digits) <= 9:
        return _DEC4(DECIMAL4 << 2, -exp, n)
    if len(digits) <= 18:
        return _DEC8(DECIMAL8 << 2, -exp, n)
    return _decimal16(n, -exp)


def enc_string(v: str) -> bytes:
    b = v.encode("utf-8", "surrogateescape")
    n = len(b)
    if n < 64:
        return bytes(((n << 2) | SHORT_STRING,)) + b
    return _LEN(STRING << 2, n) + b


def enc_binary(v: bytes) -> bytes:
    return _LEN(BINARY << 2, len(v)) + v


def enc_date(v: dt.date) -> bytes:
    return _I32(DATE << 2, v.toordinal() - EPOCH_DAY)


def enc_timestamp_ntz(v: dt.datetime) -> bytes:
    return _I64(TIMESTAMP_NTZ << 2, (v - _EPOCH_NTZ) // _US)


def enc_timestamp(v: dt.datetime) -> bytes:
    """An instant (aware datetime; a naive one is taken as UTC)."""
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    return _I64(TIMESTAMP << 2, (v - _EPOCH_UTC) // _US)


def enc_bool(v: bool) -> bytes:
    return bytes(((TRUE if v else FALSE) << 2,))


class Keys:
    """A metadata dictionary being built: key -> id, in first-seen order."""

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.ids: dict[str, int] = {}
        for n in names:
            self.id(n)

    def id(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.ids)
        return i

    def metadata(self) -> bytes:
        """The metadata bytes: version 1, not sorted, offsets of the width the strings need."""
        data = [k.encode("utf-8", "surrogatepass") for k in self.ids]
        offsets = [0, *itertools.accumulate(map(len, data))]
        size = _width(max(offsets[-1], len(data)))
        head = bytes((1 | ((size - 1) << 6),))
        return head + _uints([len(data), *offsets], size) + b"".join(data)


def _width(n: int) -> int:
    return 1 if n < 1 << 8 else 2 if n < 1 << 16 else 3 if n < 1 << 24 else 4


def _uints(values: Sequence[int], size: int) -> bytes:
    if size == 1:
        return bytes(values)
    if size == 2:
        return struct.pack(f"<{len(values)}H", *values)
    if size == 4:
        return struct.pack(f"<{len(values)}I", *values)
    return b"".join(v.to_bytes(3, "little") for v in values)


def object_value(ids: Sequence[int], values: Sequence[bytes]) -> bytes:
    """An object of fields already in key order: their ids and encoded values."""
    offsets = [0, *itertools.accumulate(map(len, values))]
    osize = _width(offsets[-1])
    isize = _width(max(ids, default=0))
    return (
        _object_head(len(ids), isize, osize) + _uints(ids, isize) + _uints(offsets, osize) + b"".join(values)
    )


def _object_head(n: int, isize: int, osize: int) -> bytes:
    """An object's header byte and field count (``n`` fields, ids and offsets that wide)."""
    large = n > 255
    head = bytes(((((large << 4) | ((isize - 1) << 2) | (osize - 1)) << 2) | OBJECT,))
    return head + field_count(n)


def field_count(n: int) -> bytes:
    """How an object of ``n`` fields writes their number, just after its header byte (one byte, or
    four for more than 255 fields)."""
    return n.to_bytes(4 if n > 255 else 1, "little")


def object_starts(n: int) -> list[bytes]:
    """How an object of exactly ``n`` fields begins (its header byte and count), for every id and
    offset width: an image holds each column of its layout where it begins so for the layout's
    column count (a MINIMAL image holds fewer fields, and its count or header differs)."""
    return [_object_head(n, isize, osize) for isize in (1, 2, 3, 4) for osize in (1, 2, 3, 4)]


def one_field_starts(key_id: int) -> list[bytes]:
    """How an object of the one field ``key_id`` begins, whatever its value's size: its header,
    count, id and first offset (0), for each offset width ``object_value`` may choose."""
    isize = _width(key_id)
    return [_object_head(1, isize, osize) + _uints([key_id], isize) + bytes(osize) for osize in (1, 2, 3, 4)]


def metadata_keys(metadata: bytes) -> list[str]:
    """The key names a variant's metadata holds, by id."""
    return _Reader(metadata).keys


def array_value(values: Sequence[bytes]) -> bytes:
    n = len(values)
    offsets = [0, *itertools.accumulate(map(len, values))]
    osize = _width(offsets[-1])
    large = n > 255
    head = bytes(((((large << 2) | (osize - 1)) << 2) | ARRAY,))
    return head + n.to_bytes(4 if large else 1, "little") + _uints(offsets, osize) + b"".join(values)


def encode_any(v: Any, keys: Keys) -> bytes:
    """A Python value by its own type (JSON documents, names): dict -> object, list -> array."""
    if v is None:
        return NULL_VALUE
    if isinstance(v, bool):
        return enc_bool(v)
    if isinstance(v, int):
        return enc_int(v)
    if isinstance(v, float):
        return enc_double(v)
    if isinstance(v, Decimal):
        return enc_decimal(v)
    if isinstance(v, str):
        return enc_string(v)
    if isinstance(v, (bytes, bytearray)):
        return enc_binary(bytes(v))
    if isinstance(v, dt.datetime):
        return enc_timestamp(v) if v.tzinfo is not None else enc_timestamp_ntz(v)
    if isinstance(v, dt.date):
        return enc_date(v)
    if isinstance(v, dict):
        items = sorted(((key_order(k), keys.id(k), encode_any(x, keys)) for k, x in v.items()))
        return object_value([i for _, i, _ in items], [b for _, _, b in items])
    if isinstance(v, (list, tuple)):
        return array_value([encode_any(x, keys) for x in v])
    return enc_string(str(v))


def encode_document(v: Any) -> tuple[bytes, bytes]:
    """(value, metadata) of one Python value with its own dictionary."""
    keys = Keys()
    value = encode_any(v, keys)
    return value, keys.metadata()


class ObjectEncoder:
    """Objects with the fields ``names`` (one layout's columns, or its key), each value by its
    column's encoder; the metadata is built once (``keys``: a dictionary holding ``names`` and keys
    values may nest). A row is a tuple in ``names`` order; ``skip`` (a MINIMAL image's ABSENT)
    leaves a field out."""

    def __init__(
        self, names: Sequence[str], encoders: Sequence[Encode], skip: object = None, keys: Keys | None = None
    ) -> None:
        keys = keys or Keys(names)
        self.metadata = keys.metadata()
        order = sorted(range(len(names)), key=lambda i: key_order(names[i]))
        self._plan = [(i, encoders[i]) for i in order]
        self._ids = [keys.ids[names[i]] for i in order]
        self._skip = skip
        n = len(names)
        isize = _width(max(self._ids, default=0))
        large = n > 255
        count = field_count(n)
        ids = _uints(self._ids, isize)
        # the bytes before the offsets, by offset width (1..4)
        self._heads = [
            bytes(((((large << 4) | ((isize - 1) << 2) | (osize - 1)) << 2) | OBJECT,)) + count + ids
            for osize in (1, 2, 3, 4)
        ]
        self._pack = {size: struct.Struct(f"<{n + 1}{c}").pack for size, c in ((1, "B"), (2, "H"), (4, "I"))}

    def __call__(self, row: Sequence[Any]) -> bytes:
        skip = self._skip
        if skip is not None and skip in row:
            return self._partial(row)
        values = [NULL_VALUE if (v := row[i]) is None else enc(v) for i, enc in self._plan]
        offsets = list(itertools.accumulate(map(len, values), initial=0))
        total = offsets[-1]
        if total < 1 << 8:
            return self._heads[0] + self._pack[1](*offsets) + b"".join(values)
        if total < 1 << 16:
            return self._heads[1] + self._pack[2](*offsets) + b"".join(values)
        return self._heads[3] + self._pack[4](*offsets) + b"".join(values)

    def _partial(self, row: Sequence[Any]) -> bytes:
        ids, values = [], []
        for fid, (i, enc) in zip(self._ids, self._plan, strict=True):
            v = row[i]
            if v is self._skip:
                continue
            ids.append(fid)
            values.append(NULL_VALUE if v is None else enc(v))
        return object_value(ids, values)


# ---- decoding (tests, error messages, users reading a change log outside Spark) ----


def decode(value: bytes, metadata: bytes) -> Any:
    """A variant as Python: objects dict, arrays list, decimals Decimal, dates/timestamps datetime
    (TIMESTAMP aware UTC, TIMESTAMP_NTZ naive), binary bytes."""
    return _Reader(metadata).read(value, 0)


class _Reader:
    def __init__(self, metadata: bytes) -> None:
        size = (metadata[0] >> 6) + 1
        n = int.from_bytes(metadata[1 : 1 + size], "little")
        offs = [
            int.from_bytes(metadata[1 + size * (k + 1) : 1 + size * (k + 2)], "little") for k in range(n + 1)
        ]
        base = 1 + size * (n + 2)
        self.keys = [
            metadata[base + offs[k] : base + offs[k + 1]].decode("utf-8", "surrogatepass") for k in range(n)
        ]

    def read(self, b: bytes, p: int) -> Any:
        h = b[p]
        basic, arg = h & 3, h >> 2
        if basic == SHORT_STRING:
            return b[p + 1 : p + 1 + arg].decode("utf-8", "surrogateescape")
        if basic == OBJECT:
            large, isize, osize = (arg >> 4) & 1, ((arg >> 2) & 3) + 1, (arg & 3) + 1
            n, q = _count(b, p + 1, large)
            ids = [int.from_bytes(b[q + k * isize : q + (k + 1) * isize], "little") for k in range(n)]
            q += n * isize
            offs = [int.from_bytes(b[q + k * osize : q + (k + 1) * osize], "little") for k in range(n + 1)]
            start = q + (n + 1) * osize
            return {self.keys[i]: self.read(b, start + o) for i, o in zip(ids, offs, strict=False)}
        if basic == ARRAY:
            large, osize = (arg >> 2) & 1, (arg & 3) + 1
            n, q = _count(b, p + 1, large)
            offs = [int.from_bytes(b[q + k * osize : q + (k + 1) * osize], "little") for k in range(n + 1)]
            start = q + (n + 1) * osize
            return [self.read(b, start + o) for o in offs[:-1]]
        return _primitive(arg, b, p + 1)


def _count(b: bytes, p: int, large: int) -> tuple[int, int]:
    w = 4 if large else 1
    return int.from_bytes(b[p : p + w], "little"), p + w


def _primitive(t: int, b: bytes, p: int) -> Any:
    def sint(w: int, at: int = p) -> int:
        return int.from_bytes(b[at : at + w], "little", signed=True)

    if t == NULL:
        return None
    if t in (TRUE, FALSE):
        return t == TRUE
    if t in (INT8, INT16, INT32, INT64):
        return sint({INT8: 1, INT16: 2, INT32: 4, INT64: 8}[t])
    if t == DOUBLE:
        return struct.unpack_from("<d", b, p)[0]
    if t == FLOAT:
        return struct.unpack_from("<f", b, p)[0]
    if t in (DECIMAL4, DECIMAL8, DECIMAL16):
        return Decimal(sint({DECIMAL4: 4, DECIMAL8: 8, DECIMAL16: 16}[t], p + 1)).scaleb(-b[p], _EXACT)
    if t == DATE:
        return dt.date.fromordinal(sint(4) + EPOCH_DAY)
    if t == TIMESTAMP:
        return _EPOCH_UTC + sint(8) * _US
    if t == TIMESTAMP_NTZ:
        return _EPOCH_NTZ + sint(8) * _US
    if t in (BINARY, STRING):
        n = int.from_bytes(b[p : p + 4], "little")
        raw = b[p + 4 : p + 4 + n]
        return raw if t == BINARY else raw.decode("utf-8", "surrogateescape")
    raise ValueError(f"variant primitive type {t} not supported here")
