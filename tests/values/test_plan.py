"""The generated row decoders give exactly what the per-column decoders (the reference) give: on
every real binlog of the corpus, on generated all-types series of every flavor, and on random
layouts fed random bytes. "Exactly" is stricter than ``==``: the same types, Decimal exponents,
float bits, ``Json.empty`` and key order."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.decoder import DECODE_FAILURES
from binlake.errors import BinlogError
from binlake.events.rows import ABSENT, Rows, decode_image
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json
from binlake.values.plan import PLANS, compile_rows_decoder
from binlake.values.types import ColumnType
from binlake.wire import bits_set
from tests.conftest import corpus_index

RECORDS = [
    r
    for r in corpus_index()["records"]
    if any(k.split(":")[0] in {"23", "24", "25", "30", "31", "32", "40"} for k in r.get("hist", {}))
]


def exact(v: Any) -> Any:
    """A value in a form whose ``==`` is exact: type and representation, recursively."""
    if isinstance(v, Json):
        return ("Json", v.empty, exact(v.value))
    if isinstance(v, dict):
        return (type(v), tuple((exact(k), exact(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return (type(v), tuple(exact(x) for x in v))
    if isinstance(v, (float, Decimal, dt.datetime, dt.date, dt.timedelta)) or hasattr(v, "_fields"):
        return (type(v), repr(v), float.hex(v) if isinstance(v, float) else None)
    return (type(v), v)


def generic_rows(ev: Rows, buf: bytes, tm: TableMap) -> tuple[list, int]:
    """The reference: each image value by value through the per-column decoders."""
    before = bits_set(ev.columns_before, ev.column_count)
    after = bits_set(ev.columns_after, ev.column_count)
    out, pos = [], 0
    while pos < len(buf):
        b = a = None
        if ev.operation != "insert":
            b, pos = decode_image(buf, pos, before, tm)
        if ev.operation != "delete":
            a, pos = decode_image(buf, pos, after, tm)
        out.append((b, a))
    return out, pos


def fast_rows(ev: Rows, buf: bytes, tm: TableMap) -> tuple[list, int]:
    before = tuple(bits_set(ev.columns_before, ev.column_count)) if ev.operation != "insert" else None
    after = tuple(bits_set(ev.columns_after, ev.column_count)) if ev.operation != "delete" else None
    return PLANS.get(tm.signature, tm.columns, before, after, ABSENT)(buf, 0, len(buf))


def compare_events(events: Any) -> int:
    """Decode the rows of every rows event both ways; the number of events compared."""
    checked = 0
    for ev in events:
        body = ev.body
        if (
            not isinstance(body, Rows)
            or body.table is None
            or body.partial
            or body.version == 0
            or body.table.undecodable
        ):
            continue
        buf = body.raw_rows if body.raw_rows is not None else _reencoded(body)
        fast, end = fast_rows(body, buf, body.table)
        want, want_end = generic_rows(body, buf, body.table)
        assert end == want_end == len(buf)
        assert exact(fast) == exact(want)
        if body.raw_rows is None:  # decoded by the reader: the same values again
            assert exact(body.rows) == exact(want)
        checked += 1
    return checked


def _reencoded(body: Rows) -> bytes:
    from binlake.events.rows import encode_rows_data

    assert body.table is not None
    return encode_rows_data(body, body.table)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["path"] for r in RECORDS])
def test_generated_equals_per_column(corpus: Path, rec: dict) -> None:
    checked = 0
    try:
        checked = compare_events(BinlogReader(corpus / rec["path"], decode_rows=False, verify_checksum=False))
    except BinlogError:
        pass  # damaged files: what came before the damage was compared
    assert checked > 0 or rec.get("problems") or rec.get("encrypted_from")


@pytest.mark.parametrize("flavor", ["mysql80", "mysql57", "mariadb"])
def test_generated_series_decodes_the_same_both_ways(tmp_path: Path, flavor: str) -> None:
    """Every column type the generator writes, NULLs included, DDL changing the layouts; the
    MySQL 5.7 series (no metadata) named and typed by the schema history along the way."""
    files = generate(
        tmp_path / flavor, flavor=flavor, target_bytes=600_000, max_file_size=None, ddl_every=60
    ).files
    for decode_rows in (False, True):  # each read with a history of its own, from the series' start
        tracker = [SchemaTracker(SchemaHistory())] if flavor == "mysql57" else None
        checked = sum(compare_events(BinlogReader(f, decode_rows=decode_rows, observers=tracker)) for f in files)
        assert checked > 500
        if tracker:
            assert tracker[0].completed > 0


UTF8, LATIN1, BINARY = 45, 8, 63
# (type, meta, unsigned, collation, enum or set names): every type a row image can hold
CATALOGUE: list[tuple[int, int, bool | None, int | None, list[str] | None]] = [
    (ColumnType.TINY, 0, False, None, None),
    (ColumnType.TINY, 0, True, None, None),
    (ColumnType.SHORT, 0, None, None, None),
    (ColumnType.INT24, 0, False, None, None),
    (ColumnType.INT24, 0, True, None, None),
    (ColumnType.LONG, 0, True, None, None),
    (ColumnType.LONGLONG, 0, False, None, None),
    (ColumnType.FLOAT, 4, None, None, None),
    (ColumnType.DOUBLE, 8, None, None, None),
    (ColumnType.NEWDECIMAL, (10 << 8) | 0, None, None, None),
    (ColumnType.NEWDECIMAL, (30 << 8) | 10, None, None, None),
    (ColumnType.NEWDECIMAL, (5 << 8) | 5, None, None, None),
    (ColumnType.YEAR, 0, None, None, None),
    (ColumnType.BIT, (1 << 8) | 3, None, None, None),
    (ColumnType.DATE, 0, None, None, None),
    (ColumnType.TIME, 0, None, None, None),
    (ColumnType.DATETIME, 0, None, None, None),
    (ColumnType.TIMESTAMP, 0, None, None, None),
    *[(ColumnType.TIME2, fsp, None, None, None) for fsp in range(7)],
    *[(ColumnType.DATETIME2, fsp, None, None, None) for fsp in (0, 1, 3, 4, 6)],
    *[(ColumnType.TIMESTAMP2, fsp, None, None, None) for fsp in (0, 2, 5, 6)],
    (ColumnType.VARCHAR, 40, None, UTF8, None),
    (ColumnType.VARCHAR, 1000, None, UTF8, None),
    (ColumnType.VARCHAR, 20, None, LATIN1, None),
    (ColumnType.VARCHAR, 16, None, BINARY, None),
    (ColumnType.VARCHAR, 30, None, None, None),
    (ColumnType.VARCHAR, 40, None, 35, None),  # ucs2: UTF-16-BE, odd lengths do not decode
    (ColumnType.VARCHAR, 80, None, 60, None),  # utf32
    (ColumnType.BLOB, 2, None, 28, None),  # gbk
    (ColumnType.STRING, (0xFE << 8) | 30, None, 95, None),  # cp932
    (ColumnType.STRING, (0xFE << 8) | 40, None, UTF8, None),
    (ColumnType.STRING, (0xFE << 8) | 4, None, BINARY, None),
    (ColumnType.STRING, (0xFE << 8) | 10, None, None, None),
    (ColumnType.STRING, (ColumnType.ENUM << 8) | 1, None, UTF8, ["a", "b"]),
    (ColumnType.STRING, (ColumnType.ENUM << 8) | 1, None, None, None),
    (ColumnType.STRING, (ColumnType.ENUM << 8) | 2, None, UTF8, ["x"] * 300),
    (ColumnType.STRING, (ColumnType.SET << 8) | 1, None, UTF8, ["a", "b", "c"]),
    (ColumnType.STRING, (ColumnType.SET << 8) | 1, None, None, None),
    (ColumnType.STRING, (ColumnType.SET << 8) | 2, None, UTF8, [f"m{i}" for i in range(12)]),
    (ColumnType.BLOB, 1, None, UTF8, None),
    (ColumnType.BLOB, 2, None, BINARY, None),
    (ColumnType.BLOB, 3, None, LATIN1, None),
    (ColumnType.BLOB, 4, None, None, None),
    (ColumnType.GEOMETRY, 4, None, None, None),
    (ColumnType.JSON, 2, None, None, None),
    (ColumnType.JSON, 4, None, None, None),
    (ColumnType.VECTOR, 4, None, None, None),
]


def _layout(picks: list[int]) -> list[ColumnDef]:
    cols = []
    for i, k in enumerate(picks):
        t, meta, unsigned, collation, names = CATALOGUE[k]
        col = ColumnDef(i, t, meta, True, unsigned=unsigned, collation=collation)
        if meta >> 8 == ColumnType.ENUM and t == ColumnType.STRING:
            col.enum_values = names
        elif meta >> 8 == ColumnType.SET and t == ColumnType.STRING:
            col.set_values = names
        cols.append(col)
    return cols


def _outcome(decode: Any, buf: bytes) -> Any:
    """The rows and end position, or "error" (a value running past the bytes is an error too)."""
    try:
        rows, end = decode()
    except DECODE_FAILURES:  # what the decoder turns into MalformedEventError
        return "error"
    return "error" if end != len(buf) else exact(rows)


# a random layout of up to 8 catalogue columns, which of them an image holds, the event kind, bytes
LAYOUT_CASES = {
    "picks": st.lists(st.integers(0, len(CATALOGUE) - 1), min_size=1, max_size=8),
    "present_bits": st.integers(0, 255),
    "op": st.sampled_from(["insert", "update", "delete"]),
    "data": st.binary(max_size=120),
}


def layout_case(
    picks: list[int], present_bits: int, op: str
) -> tuple[list[ColumnDef], tuple[int, ...] | None, tuple[int, ...] | None]:
    """The columns of a random case and its images' present columns (None: no such image)."""
    cols = _layout(picks)
    n = len(cols)
    image = tuple(bits_set(present_bits & ((1 << n) - 1) or (1 << n) - 1, n))
    return cols, image if op != "insert" else None, image if op != "delete" else None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**LAYOUT_CASES)
def test_random_layouts_and_bytes_decode_the_same_both_ways(
    picks: list[int], present_bits: int, op: str, data: bytes
) -> None:
    cols, before, after = layout_case(picks, present_bits, op)
    n = len(cols)
    tm = TableMap(1, 0, "d", "t", cols)
    present = sum(1 << i for i in before or after or ())
    ev = Rows(op, 2, 1, 0, n, present if op != "insert" else 0, present if op != "delete" else 0)
    fast = compile_rows_decoder(cols, before, after, ABSENT)
    assert _outcome(lambda: fast(data, 0, len(data)), data) == _outcome(
        lambda: generic_rows(ev, data, tm), data
    )
