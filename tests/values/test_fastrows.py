"""The compiled row decoder (``binlake.values._fastrows``) gives exactly what the pure path's
generated decoder (the reference) gives: every rows event of the real corpus and of generated MySQL 8
and MariaDB series (every column type), random layouts fed random bytes, truncated images and hostile
length fields, which must fail as the pure path fails (a ``DECODE_FAILURES`` error, reported by the
decoder as ``MalformedEventError``), never read past the buffer nor allocate from a length."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake import native
from binlake.decoder import DECODE_FAILURES
from binlake.errors import BinlogError
from binlake.events.rows import ABSENT, Rows
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.values import plan, rowops
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType
from binlake.wire import bits_set
from tests.values.test_plan import CATALOGUE, LAYOUT_CASES, RECORDS, _layout, exact, layout_case

try:
    from binlake.values import _fastrows  # type: ignore[attr-defined]
except ImportError:
    _fastrows = None

pytestmark = pytest.mark.skipif(
    _fastrows is None,
    reason="the compiled row decoder is not built (no C compiler or Cython at install: pure path only)",
)


def test_the_build_is_current() -> None:
    """A build left from older sources is not used (pure instead): here it fails, to be rebuilt."""
    assert _fastrows.INTERFACE == plan.ROWS.interface, "stale build: ./dev setup (pip install -e .)"
    assert plan.compiled_available()


def both(columns: list[ColumnDef], before: Any, after: Any) -> tuple[Any, Any]:
    return (
        plan.compile_pure_rows_decoder(columns, before, after, ABSENT),
        plan.compile_c_rows_decoder(columns, before, after, ABSENT),
    )


def outcome(decode: Any, buf: bytes) -> Any:
    """The rows and where they end, or "error" (reading past ``end`` is an error too)."""
    try:
        rows, end = decode(buf, 0, len(buf))
    except DECODE_FAILURES:
        return "error"
    return "error" if end != len(buf) else exact(rows)


class Pairs:
    """The two decoders of each (layout, images) met, made once."""

    def __init__(self) -> None:
        self.made: dict[Any, tuple[Any, Any]] = {}

    def compare(self, events: Any) -> int:
        checked = 0
        for ev in events:
            body = ev.body
            if not isinstance(body, Rows) or body.table is None or body.partial or body.version == 0:
                continue
            tm, raw = body.table, body.raw_rows
            if tm.undecodable or raw is None or len(tm.columns) != body.column_count:
                continue
            n = body.column_count
            before = tuple(bits_set(body.columns_before, n)) if body.operation != "insert" else None
            after = tuple(bits_set(body.columns_after, n)) if body.operation != "delete" else None
            key = (tm.signature, before, after)
            if key not in self.made:
                self.made[key] = both(tm.columns, before, after)
            pure, fast = self.made[key]
            want = outcome(pure, raw)
            assert outcome(fast, raw) == want, (ev.offset, tm.table)
            checked += 1
        return checked


@pytest.mark.parametrize("rec", RECORDS or [{}], ids=[r["path"] for r in RECORDS] or ["no corpus"])
def test_corpus_decodes_the_same_both_ways(corpus: Path, rec: dict) -> None:
    """(Without the corpus, the ``corpus`` fixture skips with its reason.)"""
    pairs, checked = Pairs(), 0
    try:
        checked = pairs.compare(BinlogReader(corpus / rec["path"], decode_rows=False, verify_checksum=False))
    except BinlogError:
        pass  # damaged files: what came before the damage was compared
    assert checked > 0 or rec.get("problems") or rec.get("encrypted_from")


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_series_decode_the_same_both_ways(tmp_path: Path, flavor: str) -> None:
    """Every column type the generator writes, NULLs, DDL changing the layouts."""
    files = generate(tmp_path, flavor=flavor, target_bytes=600_000, max_file_size=None, ddl_every=60).files
    pairs = Pairs()
    assert sum(pairs.compare(BinlogReader(f, decode_rows=False)) for f in files) > 1000


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**LAYOUT_CASES)
def test_random_layouts_and_bytes_decode_the_same_both_ways(
    picks: list[int], present_bits: int, op: str, data: bytes
) -> None:
    pure, fast = both(*layout_case(picks, present_bits, op))
    assert outcome(fast, data) == outcome(pure, data)


def _every_type() -> tuple[list[ColumnDef], bytes]:
    """One row of every catalogue type, written by the encoders, and its after-image bytes."""
    from binlake.events.rows import encode_rows_data
    from binlake.events.table_map import TableMap

    cols = _layout(list(range(len(CATALOGUE))))
    n = len(cols)
    tm = TableMap(1, 0, "d", "t", cols)
    pure = plan.compile_pure_rows_decoder(cols, None, tuple(range(n)), ABSENT)
    # values the decoder produced from zero-filled-then-valid bytes: decode a row the encoders wrote
    row = [0] * n
    for i, c in enumerate(cols):
        row[i] = _sample(c)
    ev = Rows("insert", 2, 1, 0, n, 0, (1 << n) - 1, rows=[(None, row)])
    data = encode_rows_data(ev, tm)
    rows, end = pure(data, 0, len(data))
    assert end == len(data)
    return cols, data


def _sample(c: ColumnDef) -> Any:
    import datetime as dt
    from decimal import Decimal

    from binlake.values.json_binary import Json

    t = c.real_type
    samples: dict[int, Any] = {
        ColumnType.FLOAT: 1.5,
        ColumnType.DOUBLE: -2.25,
        ColumnType.NEWDECIMAL: Decimal("-0.5") if c.meta & 0xFF else Decimal(-7),
        ColumnType.YEAR: 2024,
        ColumnType.BIT: 5,
        ColumnType.DATE: dt.date(2020, 2, 29),
        ColumnType.TIME: dt.timedelta(hours=-5, minutes=3),
        ColumnType.DATETIME: dt.datetime(2021, 3, 4, 5, 6, 7),
        ColumnType.TIMESTAMP: dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=dt.UTC),
        ColumnType.TIME2: dt.timedelta(hours=-838, microseconds=-10000 if c.meta else 0),
        ColumnType.DATETIME2: dt.datetime(1999, 12, 31, 23, 59, 59, 100000 if c.meta else 0),
        ColumnType.TIMESTAMP2: dt.datetime(
            2038, 1, 19, 3, 14, 8, 120000 if c.meta else 0, tzinfo=dt.UTC
        ),
        ColumnType.VARCHAR: "héllo" if c.collation not in (63,) else b"h\x00\xff",
        ColumnType.STRING: "abc" if c.collation != 63 else b"ab\x00\x00",
        ColumnType.ENUM: (c.enum_values or [1])[0],
        ColumnType.SET: ("a", "c") if c.set_values and len(c.set_values) == 3 else 3,
        ColumnType.BLOB: "text" if c.collation not in (63, None) else b"\x01\x02",
        ColumnType.GEOMETRY: b"\x00" * 25,
        ColumnType.JSON: Json({"a": [1, 2.5, "x", None, True]}),
        ColumnType.VECTOR: (1.0, -2.0),
    }
    if t in samples:
        v = samples[t]
        if t == ColumnType.STRING and c.collation is None:
            return "abc"
        return v
    if c.unsigned:
        return 200
    return -100


def test_a_row_of_every_type_decodes_the_same_both_ways() -> None:
    cols, data = _every_type()
    pure, fast = both(cols, None, tuple(range(len(cols))))
    assert outcome(fast, data) == outcome(pure, data) != "error"


def test_every_truncation_fails_the_same_both_ways() -> None:
    """A row image cut at every byte: both fail (or both read the rows before the cut)."""
    cols, data = _every_type()
    pure, fast = both(cols, None, tuple(range(len(cols))))
    two = data + data
    for cut in range(len(two)):
        assert outcome(fast, two[:cut]) == outcome(pure, two[:cut]), cut


@pytest.mark.parametrize(
    "col, value_bytes",
    [
        (ColumnDef(0, ColumnType.BLOB, 4, True, collation=63), b"\xff\xff\xff\xff"),
        (ColumnDef(0, ColumnType.BLOB, 3, True, collation=45), b"\xff\xff\xff"),
        (ColumnDef(0, ColumnType.VARCHAR, 1000, True, collation=45), b"\xff\xff"),
        (ColumnDef(0, ColumnType.JSON, 4, True), b"\xfe\xff\xff\x7f"),
        (ColumnDef(0, ColumnType.STRING, (0xFE << 8) | 200, True, collation=63), b"\xff"),
    ],
)
def test_hostile_lengths_fail_without_allocating(col: ColumnDef, value_bytes: bytes) -> None:
    """A length prefix far past the event: the same failure both ways, nothing allocated from it."""
    data = b"\x00" + value_bytes + b"short"
    pure, fast = both([col], None, (0,))
    assert outcome(pure, data) == "error"
    tracemalloc.start()
    try:
        with pytest.raises(ValueError):
            fast(data, 0, len(data))
        assert tracemalloc.get_traced_memory()[1] < 100_000
    finally:
        tracemalloc.stop()


def _read_outcome(path: Path, offset: int) -> Any:
    """The event at ``offset`` read through the reader: its rows, or the error and where."""
    try:
        for ev in BinlogReader(path, verify_checksum=False):
            if ev.offset == offset:
                return exact(ev.body.rows)
    except BinlogError as e:
        return (type(e).__name__, e.offset)
    raise AssertionError(f"no event at {offset}")


def test_damaged_rows_fail_alike_through_the_reader(tmp_path: Path) -> None:
    """Rows events whose values are overwritten with 0xFF (no NULLs: lengths run past the event):
    through the reader, the same rows or the same ``MalformedEventError`` at the same offset."""
    files = generate(tmp_path, flavor="mysql80", target_bytes=150_000, max_file_size=None).files
    clean = files[0].read_bytes()
    events = [ev for ev in BinlogReader(files[0]) if isinstance(ev.body, Rows)][:40]
    errors = 0
    for ev in events:
        nb = (ev.body.column_count + 7) >> 3
        body_end = ev.offset + ev.header.event_size - 4  # the rows are the body's last bytes
        data_len = _rows_data_len(ev)
        start = body_end - data_len
        damaged = bytearray(clean)
        damaged[start : start + nb] = bytes(nb)
        damaged[start + nb : body_end] = b"\xff" * (data_len - nb)
        path = tmp_path / "damaged.000001"
        path.write_bytes(bytes(damaged))
        got = []
        for on in (False, True):
            native.use_compiled(on)
            try:
                got.append(_read_outcome(path, ev.offset))
            finally:
                native.use_compiled(True)
        assert got[0] == got[1], ev.offset
        errors += got[0] == ("MalformedEventError", ev.offset)
    assert errors >= 10


def _rows_data_len(ev: Any) -> int:
    from binlake.events.rows import encode_rows_data

    return len(encode_rows_data(ev.body, ev.body.table))


def test_every_operation_name_is_known_to_the_compiled_module() -> None:
    for k in range(len(CATALOGUE)):
        col = _layout([k])[0]
        assert rowops.column_op(col)[1] in _fastrows.CODES


def test_fsp_over_six_fails_alike() -> None:
    for t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2):
        col = ColumnDef(0, t, 7, True)
        for make in (plan.compile_pure_rows_decoder, plan.compile_c_rows_decoder):
            with pytest.raises(ValueError, match="precision 7"):
                make([col], None, (0,), ABSENT)


def test_binlake_pure_forces_the_pure_path() -> None:
    code = "from binlake.values import plan; print(plan.compile_rows_decoder.__name__)"
    env = {**os.environ, "BINLAKE_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "compile_pure_rows_decoder"
    env.pop("BINLAKE_PURE")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "compile_c_rows_decoder"


def _header_outcome(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except Exception as e:  # the same type and message both ways (the compiled one falls back)
        return (type(e).__name__, str(e))


def _compare_headers(calls: list[tuple[Any, ...]]) -> None:
    from binlake.events import rows

    for args in calls:
        fast = _header_outcome(_fastrows.rows_header, *args, rows._header)
        assert fast == _header_outcome(rows._header, *args), args


def test_rows_headers_read_the_same_both_ways(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rows event header of the corpus and of a generated series, read by the pure reader
    (recorded) and again by the compiled one."""
    from binlake.events import rows

    calls: list[tuple[Any, ...]] = []
    pure_header = rows._header

    def record(*args: Any) -> Any:
        calls.append(args)
        return pure_header(*args)

    monkeypatch.setattr(rows, "_header", record)
    native.use_compiled(False)
    try:
        for rec in RECORDS:
            try:
                for _ in BinlogReader(corpus / rec["path"], decode_rows=False, verify_checksum=False):
                    pass
            except BinlogError:
                pass
    finally:
        native.use_compiled(True)
    monkeypatch.undo()
    assert len(calls) > 1000
    _compare_headers(calls)


@settings(max_examples=500, deadline=None)
@given(
    buf=st.binary(max_size=40),
    post=st.sampled_from([6, 8, 10]),
    version=st.sampled_from([0, 1, 2]),
    op=st.sampled_from(["insert", "update", "delete"]),
)
def test_random_rows_headers_read_the_same_both_ways(buf: bytes, post: int, version: int, op: str) -> None:
    _compare_headers([(buf, post, version, op)])


@settings(max_examples=300, deadline=None)
@given(
    ncols=st.integers(0, 250),
    post=st.sampled_from([6, 8, 10]),
    version=st.sampled_from([0, 1, 2]),
    op=st.sampled_from(["insert", "update", "delete"]),
    data=st.data(),
)
def test_rows_headers_of_any_one_byte_column_count_are_read_in_c(
    ncols: int, post: int, version: int, op: str, data: st.DataObject
) -> None:
    """A table wider than 64 columns (one grown by ALTERs) has its rows headers read in C too, not
    handed to the reference, and read as the reference reads them."""
    from binlake.events import rows

    def refuse(*args: Any) -> Any:
        raise AssertionError(f"handed to the reference: {args}")

    nb = (ncols + 7) >> 3
    head = data.draw(st.binary(min_size=4 if post == 6 else 6, max_size=4 if post == 6 else 6))
    head += data.draw(st.binary(min_size=2, max_size=2))  # flags
    if version == 2 and post >= 10:
        extra = data.draw(st.binary(max_size=5))
        head += (len(extra) + 2).to_bytes(2, "little") + extra
    bitmaps = data.draw(st.binary(min_size=2 * nb, max_size=2 * nb))
    buf = head + bytes([ncols]) + bitmaps + data.draw(st.binary(max_size=8))
    assert _fastrows.rows_header(buf, post, version, op, refuse) == rows._header(buf, post, version, op)


def _count_outcome(count: Any, data: bytes) -> int | None:
    """What ``count_rows_data`` makes of a walk: the rows, or None (decoding then says why)."""
    try:
        rows, end = count(data, 0, len(data))
    except (IndexError, ValueError):
        return None
    return rows if end == len(data) else None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**LAYOUT_CASES)
def test_random_layouts_count_the_same_both_ways(
    picks: list[int], present_bits: int, op: str, data: bytes
) -> None:
    from binlake.values.rowcount import compile_rows_counter

    cols, before, after = layout_case(picks, present_bits, op)
    fast = plan.compile_c_rows_counter(cols, before, after)
    assert _count_outcome(fast, data) == _count_outcome(compile_rows_counter(cols, before, after), data)


def test_a_row_of_every_type_counts_the_same_at_every_cut() -> None:
    from binlake.values.rowcount import compile_rows_counter

    cols, data = _every_type()
    after = tuple(range(len(cols)))
    fast = plan.compile_c_rows_counter(cols, None, after)
    pure = compile_rows_counter(cols, None, after)
    two = data + data
    assert _count_outcome(fast, two) == 2
    for cut in range(len(two)):
        assert _count_outcome(fast, two[:cut]) == _count_outcome(pure, two[:cut]), cut


@pytest.mark.parametrize(
    "op",
    [
        ("STR", 0, 0, None),
        ("STR", 5, 0, None),
        ("BIT", 9, 0, None),
        ("DECIMAL", 66, 2, None),
        ("DECIMAL", 5, 6, None),
    ],
)
def test_a_program_out_of_range_is_refused(op: tuple[Any, ...]) -> None:
    """The C reads trust an operation's integers: a program outside their ranges is never built."""
    with pytest.raises(ValueError, match="cannot take"):
        _fastrows.RowsDecoder(None, [(0, *op)], 1, ABSENT)
