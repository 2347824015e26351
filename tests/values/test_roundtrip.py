"""decode(encode(x)) == x for every column type, property-tested, and encode(decode(b)) == b on the
row bytes real servers wrote."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.values import ColumnDef, Json, MysqlDate, MysqlDateTime, column_decoder
from binlake.values.columns import column_encoder
from binlake.values.json_binary import JsonUInt, decode_json_binary, encode_json_binary
from binlake.values.types import ColumnType

UTC = dt.UTC


def roundtrip(col: ColumnDef, value: object) -> object:
    raw = column_encoder(col)(value)
    back, end = column_decoder(col)(raw, 0)
    assert end == len(raw)
    assert column_encoder(col)(back) == raw
    return back


def col(t: int, meta: int = 0, **kw: object) -> ColumnDef:
    return ColumnDef(0, t, meta, True, **kw)  # type: ignore[arg-type]


INT_RANGES = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 3,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}


@given(data=st.data(), t=st.sampled_from(sorted(INT_RANGES)), unsigned=st.booleans())
def test_ints(data: st.DataObject, t: int, unsigned: bool) -> None:
    bits = INT_RANGES[t] * 8
    lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    v = data.draw(st.integers(lo, hi))
    assert roundtrip(col(t, unsigned=unsigned), v) == v


@given(data=st.data(), precision=st.integers(1, 65))
def test_decimals(data: st.DataObject, precision: int) -> None:
    scale = data.draw(st.integers(0, min(30, precision)))
    digits = data.draw(st.integers(0, 10**precision - 1))
    v = Decimal(f"{'-' if data.draw(st.booleans()) else ''}{digits}E-{scale}") if scale else Decimal(digits)
    assert roundtrip(col(ColumnType.NEWDECIMAL, (precision << 8) | scale), v) == v


@given(v=st.floats(width=32, allow_nan=False))
def test_float(v: float) -> None:
    assert roundtrip(col(ColumnType.FLOAT, 4), v) == v


@given(v=st.floats(allow_nan=False))
def test_double(v: float) -> None:
    assert roundtrip(col(ColumnType.DOUBLE, 8), v) == v


@given(
    fsp=st.integers(0, 6),
    us=st.integers(-(838 * 3600 + 59 * 60 + 59) * 10**6, (838 * 3600 + 59 * 60 + 59) * 10**6),
)
def test_time2(fsp: int, us: int) -> None:
    unit = 10 ** (6 - fsp)
    v = dt.timedelta(microseconds=(us // unit) * unit if us >= 0 else -((-us) // unit) * unit)
    assert roundtrip(col(ColumnType.TIME2, fsp), v) == v


@given(fsp=st.integers(0, 6), v=st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)))
def test_datetime2(fsp: int, v: dt.datetime) -> None:
    unit = 10 ** (6 - fsp)
    v = v.replace(microsecond=v.microsecond // unit * unit)
    assert roundtrip(col(ColumnType.DATETIME2, fsp), v) == v
    assert roundtrip(col(ColumnType.DATETIME2, fsp), MysqlDateTime(v.year, 0, 0)) == MysqlDateTime(
        v.year, 0, 0
    )


@given(fsp=st.integers(0, 6), sec=st.integers(1, 2**32 - 1), us=st.integers(0, 999999))
def test_timestamp2(fsp: int, sec: int, us: int) -> None:
    unit = 10 ** (6 - fsp)
    v = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=sec, microseconds=us // unit * unit)
    assert roundtrip(col(ColumnType.TIMESTAMP2, fsp), v) == v


@given(v=st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)))
def test_dates_and_zero_dates(v: dt.date) -> None:
    assert roundtrip(col(ColumnType.DATE), v) == v
    assert roundtrip(col(ColumnType.DATE), MysqlDate(v.year, v.month, 0)) == MysqlDate(v.year, v.month, 0)


@given(v=st.integers(0, 255))
def test_year(v: int) -> None:
    year = 0 if v == 0 else 1900 + v
    assert roundtrip(col(ColumnType.YEAR), year) == year


@given(nbits=st.integers(1, 64), data=st.data())
def test_bit(nbits: int, data: st.DataObject) -> None:
    v = data.draw(st.integers(0, (1 << nbits) - 1))
    assert roundtrip(col(ColumnType.BIT, ((nbits // 8) << 8) | (nbits % 8)), v) == v


@given(text=st.text(max_size=300), binary=st.binary(max_size=300))
def test_strings(text: str, binary: bytes) -> None:
    assert roundtrip(col(ColumnType.VARCHAR, 1200, collation=255), text) == text
    assert roundtrip(col(ColumnType.VARCHAR, 200, collation=63), binary[:200]) == binary[:200]
    assert roundtrip(col(ColumnType.BLOB, 2, collation=63), binary) == binary
    assert roundtrip(col(ColumnType.STRING, (0xCE << 8) | 0xFC, collation=255), text[:255]) == text[:255]
    padded = binary[:8].rstrip(b"\0").ljust(8, b"\0")
    assert roundtrip(col(ColumnType.STRING, (0xFE << 8) | 8, collation=63), padded) == padded


@given(data=st.data())
def test_enum_and_set(data: st.DataObject) -> None:
    names = ["a", "b", "c", "d"]
    e = data.draw(st.sampled_from(["", *names]))
    assert roundtrip(col(ColumnType.STRING, (ColumnType.ENUM << 8) | 1, enum_values=names), e) == e
    members = tuple(n for n in names if data.draw(st.booleans()))
    assert roundtrip(col(ColumnType.STRING, (ColumnType.SET << 8) | 1, set_values=names), members) == members


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**64 - 1).map(JsonUInt),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).filter(lambda d: abs(d) < 10**20),
    st.dates(),
    st.datetimes(),
    st.timedeltas(min_value=-dt.timedelta(hours=800), max_value=dt.timedelta(hours=800)),
)
json_docs = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300)
@given(doc=json_docs)
def test_json(doc: object) -> None:
    raw = encode_json_binary(doc)
    assert decode_json_binary(raw) == doc
    assert encode_json_binary(decode_json_binary(raw)) == raw
    assert roundtrip(col(ColumnType.JSON, 4), Json(doc)) == Json(doc)


def test_large_json_container() -> None:
    doc = {"k": ["x" * 1000] * 100, "n": list(range(5000))}
    raw = encode_json_binary(doc)
    assert raw[0] == 1 and decode_json_binary(raw) == doc  # a large object: 4-byte offsets


def test_vector_and_geometry() -> None:
    vec = struct.unpack("<3f", struct.pack("<3f", 1.1, -2.5, 3.3))
    assert roundtrip(col(ColumnType.VECTOR, 4), vec) == vec
    geo = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 16
    assert roundtrip(col(ColumnType.GEOMETRY, 4), geo) == geo
