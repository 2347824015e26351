"""The compiled row text formatter (``binlake.render._fastrender``) writes exactly what the generated
one (``render.rowtext``, pure Python, itself held equal to the per-value reference by
test_rowtext.py) writes: every rows event of the corpus and of generated MySQL 8 and MariaDB series,
and every column type of the catalogue fed hostile values (bounds, wrong classes, control bytes,
surrogates, zero dates, aware and naive datetimes, huge TIMEs, NaN), with the same error when the
generated one fails."""

from __future__ import annotations

import datetime as dt
import random
import struct
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.rows import ABSENT, JsonDiff, PartialJson, Rows
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render import rowtext, text
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json, JsonUInt
from binlake.values.temporal import MysqlDate, MysqlDateTime
from binlake.values.types import ColumnType
from tests.conftest import CORPUS, corpus_index
from tests.values.test_plan import CATALOGUE, _layout

try:
    from binlake.render import _fastrender  # type: ignore[attr-defined]
except ImportError:
    _fastrender = None

pytestmark = pytest.mark.skipif(
    _fastrender is None,
    reason="the compiled formatter is not built (no C compiler or Cython at install: pure path only)",
)

OPTIONS = [(2, False), (2, True), (1, False)]  # (verbosity, positional)


def test_the_build_is_current() -> None:
    """A build left from older sources is not used (pure instead): here it fails, to be rebuilt."""
    assert _fastrender.INTERFACE == rowtext.FORMATTER.interface, "stale build: ./dev setup"
    assert rowtext.FORMATTER.chosen == (not native.PURE_FORCED)


def test_only_geometry_and_vector_take_the_generated_expression() -> None:
    """Every other type of the catalogue is formatted in C (a silent ``slow`` would be equal, and slow)."""
    slow = {c.real_type for c in _layout(list(range(len(CATALOGUE)))) if rowtext._text_op(c)[0] == "slow"}
    assert slow == {ColumnType.GEOMETRY, ColumnType.VECTOR}


def rows_events(path: Path) -> Iterator[Event]:
    try:
        for ev in BinlogReader(path):
            if isinstance(ev.body, Rows):
                yield ev
    except BinlogError:
        return


def lines_both_ways(events: list[Event]) -> tuple[list[Any], list[Any]]:
    """Every event's row lines under every option, by the generated formatter then the compiled,
    and the bytes ``dump`` writes of them (the compiled formatter writes rows' lines as bytes)."""
    out: dict[bool, list[Any]] = {}
    try:
        for compiled in (False, True):
            rowtext.FORMATTER.choose(compiled)
            out[compiled] = [
                list(text.rows_lines(ev.body, verbosity, positional))  # type: ignore[arg-type]
                for ev in events
                for verbosity, positional in OPTIONS
            ] + [
                b"".join(text.render_text_bytes(events, verbosity=verbosity, positional=positional))
                for verbosity, positional in OPTIONS
            ]
    finally:
        rowtext.FORMATTER.choose(not native.PURE_FORCED)
    return out[False], out[True]


def test_the_bytes_are_the_encoded_text_blocks() -> None:
    """The pure path's bytes are ``render_text_blocks`` encoded, as the line writer wrote them."""
    path = CORPUS / "mysql-server-8.0.39/std_data/replicated-bin.000001"
    events = list(BinlogReader(path))
    rowtext.FORMATTER.choose(False)
    try:
        blocks = "".join(b + "\n" for b in text.render_text_blocks(events)).encode("utf-8", "surrogateescape")
        assert b"".join(text.render_text_bytes(events)) == blocks
    finally:
        rowtext.FORMATTER.choose(not native.PURE_FORCED)


def test_corpus_rows_format_alike() -> None:
    compared = 0
    for r in corpus_index()["records"]:
        if r.get("events"):
            events = list(rows_events(CORPUS / r["path"]))
            pure, compiled = lines_both_ways(events)
            assert compiled == pure, r["path"]
            compared += sum(len(ev.body.rows) for ev in events)  # type: ignore[union-attr]
    assert compared > 10_000


@pytest.mark.parametrize("flavor", ["mysql80", "mysql57", "mariadb"])
def test_generated_all_types_format_alike(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_500_000, max_file_size=None)
    events = [ev for f in result.files for ev in rows_events(f)]
    pure, compiled = lines_both_ways(events)
    assert compiled == pure
    assert sum(len(ev.body.rows) for ev in events) > 1_000  # type: ignore[union-attr]


UTC = dt.UTC


class SubDatetime(dt.datetime):
    pass


class SubStr(str):
    pass


class SubList(list):  # type: ignore[type-arg]
    pass


HOSTILE: list[Any] = [
    None, 0, 1, -1, 127, 128, 255, 256, -128, -129, 2**15, 2**23, 2**31 - 1, 2**31, -(2**31), 2**63 - 1,
    2**63, -(2**63), -(2**63) - 1, 2**64, 2**70, True, False, JsonUInt(7), 1901, 2155, 9999, 10000,
    1.5, -0.0, float("nan"), float("inf"), float("-inf"), 3.4028234663852886e38, 1e-300,
    Decimal("1.50"), Decimal("-0"), Decimal("NaN"), Decimal("1E+30"),
    "", "abc", "a\nb", "\x1f", "\x7f", " ", "é漢字🙂", "\udcff", "\ud800", "'", "\\", SubStr("x"), "a",
    b"", b"abc", b"\x00", b"\x1f", b"\x20", b"\xff\xfe", b"caf\xc3\xa9", b"'",
    dt.datetime(1, 1, 1), dt.datetime(999, 1, 2, 3, 4, 5, 6), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 29, 12, 0, 0, 123456), dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), dt.datetime(1, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.datetime(1970, 1, 1, tzinfo=UTC),
    dt.datetime(2000, 3, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))), SubDatetime(2001, 1, 1),
    SubDatetime(2001, 1, 1, tzinfo=UTC), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(2000, 2, 29),
    MysqlDate(0, 0, 0), MysqlDate(2020, 0, 1), MysqlDateTime(0, 0, 0), MysqlDateTime(2020, 1, 0, 1, 2, 3, 4),
    dt.timedelta(0), dt.timedelta(hours=-1, microseconds=1), dt.timedelta(days=34, seconds=5, microseconds=7),
    dt.timedelta(hours=838, minutes=59, seconds=59), -dt.timedelta(hours=838, minutes=59, seconds=59),
    dt.timedelta(days=99999, microseconds=1), dt.timedelta(days=-100000), dt.timedelta.max, dt.timedelta.min,
    dt.timedelta(microseconds=-1), ("a",), ("a", "b"), ("b", "a"), (), ("zz",), ("a", "a"), ([1],), [1],
    Json(None), Json({"a": [1, "x\n"]}), Json("é"), PartialJson([JsonDiff("REPLACE", "$.a", 1)]),
    PartialJson([JsonDiff("REMOVE", "$.b")]), PartialJson([JsonDiff("INSERT", "$.\"a\nb\"", 1)]), object(),
    3 + 4j,
]  # fmt: skip


def outcome(fn: Any, image: Any) -> Any:
    out: list[str] = []
    try:
        fn(image, out)
    except Exception as e:  # noqa: BLE001  (the same failure both ways is what is tested)
        return ("error", type(e), str(e))
    return out


VARCHAR = next(k for k, c in enumerate(CATALOGUE) if c[0] == ColumnType.VARCHAR)  # UTF-8
BLOB = next(k for k, c in enumerate(CATALOGUE) if c[0] == ColumnType.BLOB)


def bytes_outcome(fast: Any, image: Any, which: int = 1) -> Any:
    """What ``rows_bytes`` writes of one row whose after image is ``image``, or its error."""
    out = bytearray()
    try:
        if not fast.rows_bytes([(None, image)], which, b"", b"", out):
            return "not written"
    except UnicodeEncodeError:  # where in which text differs; the caller writes such rows as text
        return ("error", UnicodeEncodeError)
    except Exception as e:  # noqa: BLE001
        return ("error", type(e), str(e))
    return bytes(out)


def encoded(lines: Any) -> Any:
    """Lines as ``rows_bytes`` writes them (an error stays that error; an unencodable line fails)."""
    if isinstance(lines, tuple):
        return lines[:2] if lines[1] is UnicodeEncodeError else lines
    try:
        return "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return ("error", UnicodeEncodeError)


NAMES = ["id", "é漢", "a`b", "\udcff", "x\ny", None]


@pytest.mark.parametrize("verbosity,positional", OPTIONS)
def test_every_type_with_hostile_values_formats_alike(verbosity: int, positional: bool) -> None:
    compared = 0
    for k in range(len(CATALOGUE)):
        (col,) = _layout([k])
        col.name = NAMES[k % len(NAMES)]
        pure = rowtext.compile_image_text([col], verbosity, positional, compiled=False)
        fast = rowtext.compile_image_text([col], verbosity, positional, compiled=True)
        assert isinstance(fast, _fastrender.ImageText)
        for value in HOSTILE:
            for image in ([value], (value,)):
                want = outcome(pure, image)
                assert outcome(fast, image) == want, (CATALOGUE[k], value)
                assert bytes_outcome(fast, image) == encoded(want), (CATALOGUE[k], value)
                compared += 1
    assert compared > 5_000


def test_float_columns_format_alike() -> None:
    """FLOAT's ``%-20g`` and DOUBLE's ``%-.20g`` printed by C equal Python's for random float32 bit
    patterns and random doubles (every exponent; NaNs and infinities take Python's)."""
    rng = random.Random(18)
    values = [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(100_000)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(100_000)]
    values += [0.0, -0.0, 1e16, 1e-5, 123456.5, 1e300, 5e-324, float("inf"), float("nan")]
    for t in (ColumnType.FLOAT, ColumnType.DOUBLE):
        col = ColumnDef(0, t, 4 if t == ColumnType.FLOAT else 8, True, name="f")
        pure = rowtext.compile_image_text([col], 2, False, compiled=False)
        fast = rowtext.compile_image_text([col], 2, False, compiled=True)
        for v in values:
            assert outcome(fast, [v]) == outcome(pure, [v]), v
        assert bytes_outcome(fast, [values[0]]) == encoded(outcome(pure, [values[0]]))


def random_decimals(n: int) -> list[Decimal]:
    """Decimals of random digits and exponents (-40 .. +5: plain and scientific ``str``), both signs,
    zeros of every exponent, and the special values."""
    rng = random.Random(18)
    out = [
        Decimal(
            (
                rng.getrandbits(1),
                tuple(rng.randrange(10) for _ in range(rng.randrange(1, 40))),
                rng.randrange(-40, 6),
            )
        )
        for _ in range(n)
    ]
    out += [Decimal((sign, (0,), e)) for sign in (0, 1) for e in range(-40, 6)]
    return out + [Decimal("NaN"), Decimal("-Infinity"), Decimal("sNaN"), Decimal("1E+2")]


def test_decimal_and_bit_columns_format_alike() -> None:
    """DECIMAL (C takes ``str`` where it is ``format(v, "f")``) and BIT (the bits in C) for random
    decimals and every bit width with random values, as the generated formatter writes them."""
    rng = random.Random(18)
    col = ColumnDef(0, ColumnType.NEWDECIMAL, (65 << 8) | 30, True, name="d")
    pure = rowtext.compile_image_text([col], 2, False, compiled=False)
    fast = rowtext.compile_image_text([col], 2, False, compiled=True)
    for v in random_decimals(30_000):
        assert outcome(fast, [v]) == outcome(pure, [v]), v
    for width in range(1, 65):
        col = ColumnDef(0, ColumnType.BIT, ((width // 8) << 8) | (width % 8), True, name="b")
        pure = rowtext.compile_image_text([col], 2, False, compiled=False)
        fast = rowtext.compile_image_text([col], 2, False, compiled=True)
        values = [0, 1, 2**width - 1, 2**61 - 1, 2**61, 2**63, 2**64 - 1, -1, True]
        values += [rng.getrandbits(width) for _ in range(300)]
        for v in values:
            assert outcome(fast, [v]) == outcome(pure, [v]), (width, v)
            assert bytes_outcome(fast, [v]) == encoded(outcome(pure, [v])), (width, v)


def test_images_with_absent_columns_or_of_another_length_go_to_the_generated_formatter() -> None:
    cols = _layout([0, 9, VARCHAR, BLOB])
    pure = rowtext.compile_image_text(cols, 2, False, compiled=False)
    fast = rowtext.compile_image_text(cols, 2, False, compiled=True)
    images: list[Any] = [
        [1, Decimal("2"), "x", None],
        [ABSENT, Decimal("2"), "x", None],
        [1, ABSENT, ABSENT, ABSENT],
        (ABSENT, None, "y", b"z"),
        [1, 2, 3],
        [1, 2, 3, 4, 5],
        [],
        "abcd",
        None,
        SubList([1, Decimal("2"), "x", None]),
    ]
    for image in images:
        assert outcome(fast, image) == outcome(pure, image), image
        assert bytes_outcome(fast, image) == encoded(outcome(pure, image)), image


def test_a_name_that_does_not_encode_leaves_the_lines_to_the_str_path() -> None:
    (col,) = _layout([0])
    col.name = "\ud800"  # not a surrogate escape: no UTF-8 for it
    fast = rowtext.compile_image_text([col], 2, False, compiled=True)
    assert bytes_outcome(fast, [1]) == "not written"
    assert outcome(fast, [1]) == outcome(rowtext.compile_image_text([col], 2, False), [1])


def test_the_rows_loop_writes_what_the_python_loop_writes() -> None:
    cols = _layout([0, VARCHAR])
    fast = rowtext.compile_image_text(cols, 2, False, compiled=True)
    pure = rowtext.compile_image_text(cols, 2, False, compiled=False)
    rows = [([1, "a"], [2, "b"]), ([3, None], [ABSENT, "c"])]
    for which in (0, 1, 2):
        got: list[str] = []
        fast.rows(rows, which, ["H1", "H2"], ["S"] if which == 2 else [], got)
        want: list[str] = []
        for before, after in rows:
            want += ["H1", "H2"]
            if which in (0, 2):
                pure(before, want)
            if which == 2:
                want.append("S")
            if which in (1, 2):
                pure(after, want)
        assert got == want
        raw = bytearray()
        assert fast.rows_bytes(rows, which, b"H1\nH2\n", b"S\n" if which == 2 else b"", raw)
        assert bytes(raw) == "".join(line + "\n" for line in want).encode()
