"""Row images and keys as VARIANT objects (column name -> typed value), one encoder per table layout.

The mapping from a column's declared MySQL type to the variant value (documented in the README,
"The change log"): integers by declared width (TINYINT int8, UNSIGNED one width up; BIGINT UNSIGNED
and BIT(64) beyond int64 as decimal(20,0)); DECIMAL(p<=38) as a variant decimal of that scale (wider:
its text); FLOAT float, DOUBLE double; DATE date, DATETIME timestamp_ntz, TIMESTAMP timestamp (UTC);
zero and partial dates and TIME as their MySQL text (``0000-00-00``, ``-838:59:59.000000``); YEAR int16;
BIT int64; text as string (bytes of an unknown charset that are not UTF-8 as binary); binary types and
GEOMETRY as binary; ENUM and SET as their text (``a,b``; the index or bit mask when the names are
unknown); JSON as MySQL's JSON text; a partial JSON update as ``{"json_diff": [{"op", "path",
"value"}]}`` (an object where a JSON column otherwise always holds a string, so sinks recognise it);
VECTOR as an array of floats. A column a MINIMAL image does not carry is left out of the object; SQL
NULL is a variant null.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from typing import Any

from binlake import native
from binlake.arrowlog import variant as v
from binlake.events.rows import ABSENT, PartialJson
from binlake.identitycache import IdentityCache
from binlake.layout import Column, Layout
from binlake.render.values import PARTIAL_JSON_KEY  # the one name, as JSON output writes it too
from binlake.values.json_binary import Json, to_mysql_text
from binlake.values.numeric import bit_length
from binlake.values.temporal import format_date, format_datetime, format_time
from binlake.values.types import ColumnType

_PARTIAL_KEYS = (PARTIAL_JSON_KEY, "op", "path", "value")
_TEXT = {
    ColumnType.VARCHAR, ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.BLOB, ColumnType.TINY_BLOB,
    ColumnType.MEDIUM_BLOB, ColumnType.LONG_BLOB,
}  # fmt: skip
BINARY_COLLATION = 63


def _int(enc: v.Encode) -> v.Encode:
    """An integer of declared width; one outside it (signedness unknown) by its own size."""

    def f(x: Any) -> bytes:
        try:
            return enc(x)
        except struct.error:
            return v.enc_int(x)

    return f


_INTS: dict[int, tuple[v.Encode, v.Encode]] = {  # type -> (signed, unsigned)
    ColumnType.TINY: (v.enc_int8, v.enc_int16),
    ColumnType.SHORT: (v.enc_int16, v.enc_int32),
    ColumnType.INT24: (v.enc_int32, v.enc_int32),
    ColumnType.LONG: (v.enc_int32, v.enc_int64),
    ColumnType.LONGLONG: (v.enc_int64, v.enc_uint64),
}


def _temporal(typed: v.Encode, fsp: int, text: Callable[[Any, int], str], py: type) -> v.Encode:
    """A date/time column: typed when Python holds it, a zero or partial date as its MySQL text."""
    return lambda x: typed(x) if isinstance(x, py) else v.enc_string(text(x, fsp))


def _text(x: Any) -> bytes:
    return v.enc_string(x) if isinstance(x, str) else v.enc_binary(x)


def _bytes(x: Any) -> bytes:
    return v.enc_binary(bytes(x)) if isinstance(x, (bytes, bytearray)) else v.enc_string(str(x))


def _enum(x: Any) -> bytes:
    return v.enc_string(x) if isinstance(x, str) else v.enc_int(x)


def _set(x: Any) -> bytes:
    return v.enc_string(",".join(x)) if isinstance(x, tuple) else v.enc_int(x)


def _vector(x: Any) -> bytes:
    return v.array_value([v.enc_float(f) for f in x])


def _json(keys: v.Keys) -> v.Encode:
    def f(x: Any) -> bytes:
        if isinstance(x, Json):
            return v.enc_string(to_mysql_text(x.value))
        if isinstance(x, PartialJson):
            edits = [
                {"op": d.operation, "path": d.path}
                | ({} if d.operation == "REMOVE" else {"value": to_mysql_text(d.value)})
                for d in x.diffs
            ]
            return v.encode_any({PARTIAL_JSON_KEY: edits}, keys)
        return v.encode_any(x, keys)

    return f


# how the compiled encoder (``binlake.arrowlog._fastvariant``) writes a column's values: a kind it
# takes values of the expected type in (the rest go to the column's pure encoder) and its argument
Kind = tuple[str, int]
PY: Kind = ("PY", 0)  # every value through the pure encoder
_INT_KINDS: dict[v.Encode, str] = {
    v.enc_int8: "INT8",
    v.enc_int16: "INT16",
    v.enc_int32: "INT32",
    v.enc_int64: "INT64",
    v.enc_uint64: "UINT64",
}
_DECIMAL_KINDS = ((9, "DEC4"), (18, "DEC8"), (38, "DEC16"))  # largest precision, kind


def column_encoder(c: Column, keys: v.Keys) -> v.Encode:
    """The encoder of one column's non-NULL values (see the module docstring)."""
    return column_encoding(c, keys)[0]


def column_encoding(c: Column, keys: v.Keys) -> tuple[v.Encode, Kind]:
    """A column's pure encoder and the kind the compiled encoder writes it as."""
    t, meta = c.type, c.meta
    if t in _INTS:
        enc = _INTS[t][1 if c.unsigned else 0]
        return _int(enc), (_INT_KINDS[enc], 0)
    if t == ColumnType.NEWDECIMAL:
        p, s = meta >> 8, meta & 0xFF
        if p > 38:
            return (lambda x: v.enc_string(format(x, "f"))), PY
        return v.decimal_encoder(p, s), (next(k for top, k in _DECIMAL_KINDS if p <= top), s)
    if t == ColumnType.FLOAT:
        return v.enc_float, ("FLOAT", 0)
    if t == ColumnType.DOUBLE:
        return v.enc_double, ("DOUBLE", 0)
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return _temporal(v.enc_date, 0, lambda x, _: format_date(x), dt.date), ("DATE", 0)
    if t in (ColumnType.DATETIME, ColumnType.DATETIME2):
        fsp = meta if t == ColumnType.DATETIME2 else 0
        return _temporal(v.enc_timestamp_ntz, fsp, format_datetime, dt.datetime), ("TS_NTZ", 0)
    if t in (ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2):
        fsp = meta if t == ColumnType.TIMESTAMP2 else 0
        return _temporal(v.enc_timestamp, fsp, format_datetime, dt.datetime), ("TS", 0)
    if t in (ColumnType.TIME, ColumnType.TIME2):
        fsp = meta if t == ColumnType.TIME2 else 0
        return (lambda x: v.enc_string(format_time(x, fsp))), ("TIME", fsp)
    if t == ColumnType.YEAR:
        return _int(v.enc_int16), ("INT16", 0)
    if t == ColumnType.BIT:
        enc = v.enc_uint64 if bit_length(meta) > 63 else v.enc_int64
        return enc, (_INT_KINDS[enc], 0)
    if t == ColumnType.ENUM:
        return _enum, ("ENUM", 0)
    if t == ColumnType.SET:
        return _set, ("SET", 0)
    if t == ColumnType.JSON:
        return _json(keys), ("JSON", 0)
    if t == ColumnType.VECTOR:
        return _vector, PY
    if t == ColumnType.GEOMETRY or (t in _TEXT and c.collation == BINARY_COLLATION):
        return _bytes, ("BYTES", 0)
    if t in _TEXT:
        return _text, ("TEXT", 0)
    return (lambda x: v.encode_any(x, keys)), PY


class LayoutImages:
    """One layout's encoders: images (every column) and keys (the primary key's columns); with
    ``compiled``, the compiled plans of the same encoders (``_fastvariant.ObjectPlan``)."""

    def __init__(self, layout: Layout, compiled: bool = False) -> None:
        names = [c.name for c in layout]
        keys = v.Keys(names)
        if any(c.type == ColumnType.JSON for c in layout):
            for k in _PARTIAL_KEYS:
                keys.id(k)
        self.compiled = compiled
        self.image = _object(layout, ABSENT, keys, compiled)
        pk = [c for c in layout if c.pk]
        self.key = _object(pk, None, v.Keys([c.name for c in pk]), compiled)


def _object(columns: Sequence[Column], skip: object, keys: v.Keys, compiled: bool) -> Any:
    codes = [column_encoding(c, keys) for c in columns]
    pure = v.ObjectEncoder([c.name for c in columns], [enc for enc, _ in codes], skip, keys)
    if not compiled:
        return pure
    assert _fastvariant is not None
    return _fastvariant.ObjectPlan(pure, [(_fastvariant.KINDS[k], arg) for _, (k, arg) in codes])


def image_cache(compiled: bool = False) -> IdentityCache[Layout, LayoutImages]:
    """``LayoutImages`` by layout (the core reuses a layout object per table map), bounded."""
    return IdentityCache(lambda layout: LayoutImages(layout, compiled))


def use_compiled_images(compiled: bool | None = None) -> bool:
    """Whether to write images with the compiled encoder: ``compiled`` if built, else whether it
    is built and chosen (``native.use_compiled``, ``BINLAKE_PURE``)."""
    return ENCODER.chosen if compiled is None else compiled and _fastvariant is not None


# the compiled encoder (optional; the pure encoders above are the reference)
ENCODER = native.OptionalModule("binlake.arrowlog._fastvariant", 6)
_fastvariant = ENCODER.built  # the built module, whether chosen or not (None: not built, or stale)
if _fastvariant is not None:
    _fastvariant.set_json_type(Json)
