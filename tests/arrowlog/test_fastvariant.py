"""The compiled VARIANT image encoder (``binlake.arrowlog._fastvariant``) against the pure one, the
reference: the same bytes for every value of every column type (and the same error where the
reference raises one), for hand-picked edge values, random ones, every image of the real corpus and of
generated series; and the same change-log record batches."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
import subprocess
import sys
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.arrowlog import images as images_module
from binlake.arrowlog.changelog import VARIANT, changelog_batches
from binlake.arrowlog.images import LayoutImages
from binlake.changes import Column
from binlake.errors import BinlogError
from binlake.events.rows import ABSENT, JsonDiff, PartialJson
from binlake.generate import generate
from binlake.spark.changelog import file_changes
from binlake.values.json_binary import Json, JsonUInt
from binlake.values.temporal import MysqlDate, MysqlDateTime
from binlake.values.types import ColumnType as T
from tests.conftest import corpus_index

_fastvariant = pytest.importorskip(
    "binlake.arrowlog._fastvariant", reason="the compiled image encoder is not built (./dev setup)"
)

RECORDS = corpus_index()["records"]
UTC = dt.UTC
BIG = "é" * 70  # a long (non-short) string, not ASCII
INTS = [0, 1, -1, 127, -128, 128, -129, 32767, -32768, 32768, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63)]
INTS += [2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**40, True, False]


def col(
    name: str, t: int, meta: int = 0, unsigned: bool = False, collation: int | None = 33, **kw: Any
) -> Column:
    return Column(name, t, meta, unsigned, collation, kw.get("pk", False), kw.get("values"))


def decimals(p: int, s: int) -> list[Any]:
    wide = Context(prec=100)
    q = Decimal(1).scaleb(-s)
    top = wide.subtract(wide.power(10, p - s), q)
    out = [Decimal(0).quantize(q), -Decimal(0).quantize(q), top, -top, q, -q, wide.add(top, q), -top - q]
    out += [
        Decimal("1.5"),
        Decimal("1E+3"),
        Decimal("1E-9"),
        Decimal("0E-10"),
        Decimal("12345678901234567890"),
    ]
    out += [Decimal("NaN"), Decimal("-Infinity"), Decimal(10) ** 40, 7, 1.25, "x"]
    return out


DATES = [
    dt.date(1970, 1, 1),
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(2000, 2, 29),
    dt.date(1969, 12, 31),
]
DATES += [dt.date(1900, 3, 1), dt.date(2024, 12, 31), MysqlDate(0, 0, 0), MysqlDate(2020, 0, 5)]
TIMES = [dt.datetime(1970, 1, 1), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]
TIMES += [dt.datetime(2024, 2, 29, 12, 30, 15, 123456), dt.datetime(1969, 12, 31, 23, 59, 59, 1)]
TIMES += [
    dt.datetime(2020, 1, 1, fold=1),
    MysqlDateTime(0, 0, 0, 0, 0, 0, 0),
    MysqlDateTime(2020, 5, 0, 1, 2, 3, 4),
]
AWARE = [t.replace(tzinfo=UTC) for t in TIMES if isinstance(t, dt.datetime) and t.year > 1]
AWARE += [dt.datetime(2020, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))), dt.date(2020, 1, 1)]
DELTAS = [
    dt.timedelta(0),
    dt.timedelta(hours=838, minutes=59, seconds=59),
    -dt.timedelta(hours=838, minutes=59, seconds=59),
]
DELTAS += [
    dt.timedelta(microseconds=1),
    -dt.timedelta(microseconds=1),
    dt.timedelta(days=-1, seconds=5, microseconds=7),
]
DELTAS += [dt.timedelta(hours=5, microseconds=123456), dt.timedelta(days=400), "10:00:00"]
DELTAS += [dt.timedelta.max, dt.timedelta.min, dt.timedelta(days=999_999), dt.timedelta(days=-1_000_000)]
FLOATS = [
    0.0,
    -0.0,
    1.5,
    -2.25,
    math.inf,
    -math.inf,
    math.nan,
    -math.nan,
    1e-45,
    3.4e38,
    3.5e38,
    1e300,
    5,
    "1",
]
TEXTS = ["", "a", "x" * 63, "x" * 64, BIG, "\udcff", "a\x00b", b"\xff\xfe", b"", bytearray(b"ab"), 5]
JSONS = [
    Json({"a": [1, 2.5, None, True]}, plain=True),
    Json({"a": 1}),
    Json(None, empty=True),
    Json("\udcff"),
]
JSONS += [Json({"b": 1e20, "c": "é" * 40}, plain=True), Json([Decimal("1.50")]), Json(math.nan, plain=True)]
JSONS += [PartialJson([JsonDiff("REPLACE", "$.a", 1), JsonDiff("REMOVE", "$.b", None)]), {"raw": 1}, 3]

CASES: list[tuple[Column, list[Any]]] = [
    *(
        (col("i", t, unsigned=u), INTS)
        for t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG)
        for u in (False, True)
    ),
    (col("y", T.YEAR), [0, 1901, 2155, 70000, -1]),
    (col("bit8", T.BIT, meta=0x0100), [0, 255, 2**63, -1]),
    (col("bit64", T.BIT, meta=0x0800), [0, 2**63 - 1, 2**63, 2**64 - 1, -1, -(2**63) - 1]),
    *(
        (col("d", T.NEWDECIMAL, meta=(p << 8) | s), decimals(p, s))
        for p, s in ((9, 2), (18, 0), (18, 9), (38, 10), (38, 38), (65, 30), (1, 0), (10, 4), (19, 0))
    ),
    (col("f", T.FLOAT), FLOATS),
    (col("g", T.DOUBLE), FLOATS),
    (col("dt", T.DATE), DATES + [dt.datetime(2020, 1, 1, 5)]),
    (col("dt", T.NEWDATE), DATES),
    *(
        (col("ts", t, meta=m), TIMES + AWARE)
        for t in (T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2)
        for m in (0, 3, 6)
    ),
    *((col("tm", t, meta=m), DELTAS) for t in (T.TIME, T.TIME2) for m in (0, 1, 3, 6)),
    *(
        (col("s", t), TEXTS)
        for t in (T.VARCHAR, T.STRING, T.VAR_STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
    ),
    *((col("b", t, collation=63), TEXTS) for t in (T.VARCHAR, T.STRING, T.BLOB)),
    (col("geo", T.GEOMETRY, collation=63), TEXTS),
    (col("e", T.ENUM, values=("a", "b")), ["a", "", BIG, "\udcff", 0, 3, 70000, b"a"]),
    (col("set", T.SET, values=("a", "b")), [(), ("a",), ("a", "b"), ("é",) * 40, 5, ("a", 1), ["a"]]),
    (col("j", T.JSON), JSONS),
    (col("vec", T.VECTOR), [(1.0, 2.5), (), [math.nan]]),
    (col("unknown", 250), [1, "x", b"y", None, {"k": [1]}, dt.date(2020, 1, 1)]),
]


def outcome(f: Any, row: Any) -> Any:
    try:
        return f(row)
    except Exception as e:  # the same error type and message both ways
        return (type(e), str(e))


def both(layout: tuple[Column, ...], row: tuple[Any, ...]) -> None:
    pure, fast = LayoutImages(layout, False), LayoutImages(layout, True)
    assert fast.image.metadata == pure.image.metadata
    assert outcome(fast.image, row) == outcome(pure.image, row), row
    key = tuple(v for c, v in zip(layout, row, strict=True) if c.pk)
    if ABSENT not in key:
        assert outcome(fast.key, key) == outcome(pure.key, key), key


@pytest.mark.parametrize(
    "column,values", CASES, ids=[f"{c.type}-{c.meta}-{c.unsigned}-{c.collation}" for c, _ in CASES]
)
def test_every_value_type_encodes_alike(column: Column, values: list[Any]) -> None:
    other = col("other", T.LONG, pk=True)
    for value in [*values, None]:
        for pk in (False, True):
            c = dataclasses.replace(column, pk=pk)
            both((c,), (value,))
            both((other, c), (1, value))
            both((c, other), (value, ABSENT))  # a MINIMAL image: a partial object
            both((other, c), (ABSENT, value))


def test_a_wide_layout_encodes_alike() -> None:
    """Offsets of every width (an image over 255 and 65,535 bytes), over 255 fields, long names."""
    rng = random.Random(7)
    for n in (1, 3, 40, 256, 300):
        layout = tuple(col(f"c{i:03d}" + "ж" * (i % 3), T.VARCHAR, pk=i % 7 == 0) for i in range(n))
        for size in (0, 5, 300, 70_000, 17_000_000 // max(n, 1)):
            row = tuple("x" * rng.randrange(size + 1) for _ in range(n))
            both(layout, row)
            both(layout, tuple(ABSENT if i % 2 else v for i, v in enumerate(row)))
            both(layout, tuple(None for _ in row))


def test_a_short_row_fails_alike() -> None:
    layout = (col("a", T.LONG), col("b", T.LONG))
    pure, fast = LayoutImages(layout, False), LayoutImages(layout, True)
    for row in ((1,), [1, 2], [1]):
        assert outcome(fast.image, row) == outcome(pure.image, row)


SCALARS = (
    st.none()
    | st.integers(-(2**65), 2**65)
    | st.floats()
    | st.decimals(places=3)
    | st.decimals()
    | st.text(max_size=80)
    | st.binary(max_size=80)
    | st.dates()
    | st.datetimes(timezones=st.none() | st.just(UTC) | st.timezones())
    | st.timedeltas()
    | st.tuples(st.text(max_size=3))
    | st.just(ABSENT)
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([c for c, _ in CASES]), min_size=1, max_size=6), st.data())
def test_random_values_encode_alike(columns: list[Column], data: Any) -> None:
    layout = tuple(dataclasses.replace(c, name=f"{c.name}{i}", pk=i % 2 == 0) for i, c in enumerate(columns))
    picks = st.one_of(SCALARS, *(st.sampled_from(v) for c, v in CASES if c in columns))
    row = tuple(data.draw(picks) for _ in layout)
    both(layout, row)


def same_batches(changes: list[Any]) -> int:
    pure = list(changelog_batches(changes, size=500, compiled=False))
    fast = list(changelog_batches(changes, size=500, compiled=True))
    assert len(pure) == len(fast)
    for a, b in zip(pure, fast, strict=True):
        assert a.schema == b.schema
        for name in ("before", "after", "pk", "pk_before"):
            x, y = a.column(name), b.column(name)
            assert x.is_null().equals(y.is_null()), name
            for part in ("value", "metadata"):
                assert x.field(part).to_pylist() == y.field(part).to_pylist(), name
        assert a.equals(b)
    return sum(b.num_rows for b in fast)


@pytest.mark.parametrize(
    "rec", RECORDS or [{}], ids=[r.get("path", "none") for r in RECORDS] or ["no corpus"]
)
def test_corpus_images_encode_alike(corpus: Path, rec: dict) -> None:
    if rec.get("problems") or "path" not in rec:
        pytest.skip("damaged or unsupported upstream file")
    try:
        changes = list(file_changes(corpus / rec["path"]))
    except BinlogError as e:  # encrypted, damaged, no format description: the decoder's tests cover them
        pytest.skip(f"not decodable: {type(e).__name__}")
    same_batches(changes)


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb", "mysql57"])
def test_generated_series_encode_alike(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path / "bin", flavor=flavor, seed=5, target_bytes=400_000)
    changes = [c for f in result.files for c in file_changes(f)]
    assert same_batches(changes) == len(changes) > 500


def test_an_empty_batch_list_and_names_only() -> None:
    assert list(changelog_batches([], compiled=True)) == []


def test_binlake_pure_selects_the_pure_encoder() -> None:
    code = "from binlake.arrowlog import images; print(images.ENCODER.chosen)"
    for env, want in (({"BINLAKE_PURE": "1"}, "False"), ({"BINLAKE_PURE": "0"}, "True")):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "PATH": ""}, check=True
        )
        assert out.stdout.strip() == want


def test_the_build_is_current() -> None:
    """A build left from older sources is not used (pure instead): here it fails, to be rebuilt."""
    assert _fastvariant.INTERFACE == images_module.ENCODER.interface, "stale build: ./dev setup"
    assert images_module.ENCODER.chosen
    assert isinstance(_fastvariant.VariantColumn().array(VARIANT), pa.StructArray)


def test_a_columns_buffers_go_with_its_array() -> None:
    """A column's array holds the memory it was built in (no copy), so it is made once: a second
    time is refused, never an array over memory that went with the first."""
    col = _fastvariant.VariantColumn()
    col.add_bytes(b"\x0c\x01", b"\x01\x00\x00")  # a variant 1 (int8), and empty metadata
    col.add_null()
    first = col.array(VARIANT)
    assert first.field("value").to_pylist() == [b"\x0c\x01", b""] and first.null_count == 1
    with pytest.raises(RuntimeError, match="already made"):
        col.array(VARIANT)
    del col  # the array outlives its builder
    assert first.field("value").to_pylist() == [b"\x0c\x01", b""]


def test_name_changes_and_odd_fields_build_alike(tmp_path: Path) -> None:
    """Renames, drops and added columns among row changes; a field the compiled builder does not
    take (a position past int64, a gtid that is not text, a malformed order key) is built the
    pure way: the same rows or the same error."""
    result = generate(tmp_path / "bin", seed=3, target_bytes=600_000, ddl_every=20)
    changes = [c for f in result.files for c in file_changes(f)]
    assert {c.op.value for c in changes} >= {"rename_table", "rename_column", "insert", "update", "delete"}
    same_batches(changes)
    row = next(c for c in changes if c.layout is not None)
    odd = [
        row._replace(position=2**64),
        row._replace(position=None),
        row._replace(server_id=True),
        row._replace(file="\udcff"),
        row._replace(db=5),
        row._replace(origin=dataclasses.replace(row.origin, gtid=b"x")),
        row._replace(origin=dataclasses.replace(row.origin, commit_time_us=None, last_committed=-1)),
        row._replace(order_key=row.order_key._replace(node=b"short")),
        row._replace(order_key=row.order_key._replace(event=2**32)),
        row._replace(order_key=row.order_key._replace(event=-1)),
        row._replace(order_key=(1, 2)),
    ]
    for c in odd:
        pure = outcome(lambda cs: list(changelog_batches(cs, compiled=False)), [row, c])
        fast = outcome(lambda cs: list(changelog_batches(cs, compiled=True)), [row, c])
        if isinstance(pure, tuple):
            assert fast == pure, c
        else:  # the same rows; the change the compiled builder left is a batch of its own
            assert pa.Table.from_batches(fast).equals(pa.Table.from_batches(pure)), c


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(0, 2**64 - 1).map(JsonUInt)
    | st.floats()
    | st.sampled_from([1e20, 1e-7, 1.5e300, -0.0, 1e16, 123456789012345678.0, 1e15, 4.9e-5, 1e-15, 9.9e-16])
    | st.text(
        alphabet=st.characters(codec="utf-8") | st.sampled_from('"\\\x00\x01\x08\x0c\n\r\t\x1f\x7f\u2028é😀')
    )
)


@settings(max_examples=600, deadline=None)
@given(
    st.recursive(
        JSON_SCALARS,
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
        max_leaves=16,
    ),
    st.booleans(),
)
def test_json_documents_encode_alike(doc: Any, plain: bool) -> None:
    """The compiled text of a plain document is ``Json.text()``'s and the reference's
    ``to_mysql_text``: quoting, control characters, floats (``1e20``), unsigned and big integers."""
    both((col("j", T.JSON),), (Json(doc, plain=plain),))


def test_changes_the_compiled_builder_leaves_keep_their_batches_whole(tmp_path: Path) -> None:
    """Where every change is one the compiled builder does not take (a float position, which Arrow
    takes as an integer), batches are still built whole, the pure way, with the same rows."""
    result = generate(tmp_path / "bin", seed=9, target_bytes=200_000)
    changes = [c for f in result.files for c in file_changes(f)]
    odd = [c._replace(position=float(c.position)) if i % 3 else c for i, c in enumerate(changes)]
    pure = list(changelog_batches(odd, size=300, compiled=False))
    fast = list(changelog_batches(odd, size=300, compiled=True))
    assert pa.Table.from_batches(fast).equals(pa.Table.from_batches(pure))
    assert len(fast) <= 2 * len(pure) + 1
