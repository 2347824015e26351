"""The compiled JSON and SQL row formatters (``binlake.render._fastjoin``) write exactly what the
generated ones (``render.jsonrow``, ``render.sqlrow``: pure Python, themselves held equal to the
per-value reference by test_jsonl.py and test_sqlrow.py) write: every rows event of the corpus and
of generated MySQL 8, MySQL 5.7 and MariaDB series, as JSON images and as INSERT, DELETE and UPDATE
both ways, and every column type of the catalogue fed hostile values, with the same error when the
generated one fails."""

from __future__ import annotations

import dataclasses
import decimal
import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.events.base import Event, EventHeader, UnknownEvent
from binlake.events.rows import ABSENT, JsonDiff, PartialJson, Rows
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render import joined, jsonl, jsonrow, sql, sqlrow
from binlake.render.sqlrow import RowSql
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json
from binlake.values.types import ColumnType
from tests.conftest import CORPUS, corpus_index
from tests.render.test_fastrender import HOSTILE, NAMES, SubList, random_decimals, rows_events
from tests.render.test_sqlrow import named
from tests.values.test_plan import CATALOGUE, _layout

try:
    from binlake.render import _fastjoin  # type: ignore[attr-defined]
except ImportError:
    _fastjoin = None

pytestmark = pytest.mark.skipif(
    _fastjoin is None,
    reason="the compiled formatter is not built (no C compiler or Cython at install: pure path only)",
)


def test_the_build_is_current() -> None:
    """A build left from older sources is not used (pure instead): here it fails, to be rebuilt."""
    assert _fastjoin.INTERFACE == joined.FORMATTER.interface, "stale build: ./dev setup"
    assert joined.FORMATTER.chosen == (not native.PURE_FORCED)


def test_which_types_take_the_generated_expression() -> None:
    """The rest of the catalogue is written in C (a silent ``slow`` would be equal, and slow)."""
    cols = _layout(list(range(len(CATALOGUE))))
    slow_json = {c.real_type for c in cols if jsonrow._op(c)[0] == "slow"}
    slow_sql = {c.real_type for c in cols if sqlrow._op(c)[0] == "slow"}
    others = {ColumnType.GEOMETRY, ColumnType.VECTOR}
    assert slow_json == others | {ColumnType.SET}
    assert slow_sql == others


def _labels(cols: list[ColumnDef]) -> list[str]:
    return [c.label for c in cols]


def both_json(cols: list[ColumnDef]) -> tuple[Any, Any]:
    pure = jsonrow.compile_image_json(_labels(cols), cols, compiled=False)
    fast = jsonrow.compile_image_json(_labels(cols), cols, compiled=True)
    return pure, fast


def both_sql(tm: TableMap) -> tuple[RowSql, RowSql]:
    pure = sql._named_row_sql(tm, False)
    fast = sql._named_row_sql(tm, True)
    return pure, fast


def outcome(fn: Callable[..., str], *images: Any) -> Any:
    try:
        return fn(*images)
    except Exception as e:  # noqa: BLE001  (the same failure both ways is what is tested)
        return ("error", type(e), str(e))


def sql_bytes(fn: Any, *images: Any) -> Any:
    """What the compiled formatter writes into the output (``Joined.write``: ``SqlBlocks``' way),
    or its error."""
    out = bytearray(b"<")
    try:
        fn.write(out, *images)
    except UnicodeEncodeError:  # where in which text differs
        assert out == b"<"
        return ("error", UnicodeEncodeError)
    except Exception as e:  # noqa: BLE001
        assert out == b"<"
        return ("error", type(e), str(e))
    assert out[:1] == b"<"
    return bytes(out[1:])


def encoded(result: Any) -> Any:
    """The pure text as written (UTF-8, surrogate escapes), or its error."""
    if isinstance(result, tuple):
        return result
    try:
        return result.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return ("error", UnicodeEncodeError)


def assert_sql_alike(fast: Any, pure: Any, *images: Any, msg: Any = None) -> None:
    """The compiled statement equals the generated one, as text and as the bytes written."""
    want = outcome(pure, *images)
    assert outcome(fast, *images) == want, msg
    if isinstance(fast, _fastjoin.Joined):
        assert sql_bytes(fast, *images) == encoded(want), msg


def assert_events_alike(bodies: list[Rows]) -> int:
    """Every image as JSON, every row as redo and flashback statements, both ways."""
    compared = 0
    json_cache: dict[int, tuple[Any, Any]] = {}
    sql_cache: dict[int, tuple[RowSql, RowSql]] = {}
    for b in bodies:
        tm = b.table
        if tm is None or b.undecoded_reason:
            continue
        if id(tm.columns) not in json_cache:
            json_cache[id(tm.columns)] = both_json(tm.columns)
            sql_cache[id(tm.columns)] = both_sql(named(tm))
        pj, fj = json_cache[id(tm.columns)]
        ps, fs = sql_cache[id(tm.columns)]
        for before, after in b.rows:
            for image in (before, after):
                if image is not None:
                    assert outcome(fj, image) == outcome(pj, image)
                    assert_sql_alike(fs.insert, ps.insert, image)
                    assert_sql_alike(fs.delete, ps.delete, image)
            if before is not None and after is not None:
                assert_sql_alike(fs.update, ps.update, before, after)
                assert_sql_alike(fs.update, ps.update, after, before)
            compared += 1
    return compared


def test_corpus_rows_format_alike() -> None:
    compared = 0
    for r in corpus_index()["records"]:
        if r.get("events"):
            bodies = [ev.body for ev in rows_events(CORPUS / r["path"])]
            compared += assert_events_alike(bodies)  # type: ignore[arg-type]
    assert compared > 10_000


@pytest.mark.parametrize("flavor", ["mysql80", "mysql57", "mariadb"])
def test_generated_all_types_format_alike(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_500_000, max_file_size=None)
    bodies = [ev.body for f in result.files for ev in rows_events(f)]
    assert assert_events_alike(bodies) > 1_000  # type: ignore[arg-type]


def _table(cols: list[ColumnDef], primary_key: list[int] | None = None) -> TableMap:
    return TableMap(1, 0, "d`b", "t\n'x", cols, primary_key=primary_key or [])


def test_every_type_with_hostile_values_formats_alike() -> None:
    compared = 0
    for k in range(len(CATALOGUE)):
        (col,) = _layout([k])
        col.name = NAMES[k % len(NAMES)] or "c"
        pj, fj = both_json([col])
        assert isinstance(fj, _fastjoin.Joined)
        for key in ([], [0]):
            ps, fs = both_sql(_table([col], key))
            assert isinstance(fs.insert, _fastjoin.Joined)
            for value in HOSTILE:
                for image in ([value], (value,)):
                    want = outcome(pj, image)
                    assert outcome(fj, image) == want, (CATALOGUE[k], value)
                    assert_sql_alike(fs.insert, ps.insert, image, msg=(CATALOGUE[k], value))
                    assert_sql_alike(fs.delete, ps.delete, image, msg=(CATALOGUE[k], value))
                    for other in ([1], ["x"], [None]):
                        assert_sql_alike(fs.update, ps.update, image, other)
                        assert_sql_alike(fs.update, ps.update, other, image)
                    compared += 1
    assert compared > 5_000


def float32_values(n: int) -> list[float]:
    """Random float32 bit patterns (every exponent; NaNs and infinities among them), the float32
    edges, and doubles that are not float32 values (or overflow one)."""
    rng = random.Random(18)
    values = [struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(n)]
    edges = [
        0.0,
        -0.0,
        1.0,
        0.1,
        3.4028234663852886e38,
        -3.4028234663852886e38,
        1.401298464324817e-45,
        1.1754943508222875e-38,
        16777216.0,
        16777217.0,
        1e20,
        1.5e-7,
        123456.0,
        1234567.0,
        0.30000001192092896,
    ]
    others = [1e300, -1e39, 3.4028235677973366e38, 0.1 + 2**-40, float("nan"), float("-inf"), 5e-324]
    return values + edges + [-v for v in edges] + others


def test_float_columns_format_alike() -> None:
    """FLOAT's float32 text (and DOUBLE's) written by C equals the generated formatters' for
    200,000 random float32 values, their edges and doubles that are not float32 values."""
    for t in (ColumnType.FLOAT, ColumnType.DOUBLE):
        col = ColumnDef(0, t, 4 if t == ColumnType.FLOAT else 8, True, name="f")
        pj, fj = both_json([col])
        ps, fs = both_sql(_table([col], [0]))
        for v in float32_values(200_000):
            assert outcome(fj, [v]) == outcome(pj, [v]), v
            assert_sql_alike(fs.insert, ps.insert, [v], msg=v)


def test_decimal_columns_format_alike() -> None:
    """DECIMAL in JSON and SQL (C takes ``str`` where it is ``format(v, "f")``) for random decimals
    of every exponent, zeros and the special values."""
    col = ColumnDef(0, ColumnType.NEWDECIMAL, (65 << 8) | 30, True, name="d")
    pj, fj = both_json([col])
    ps, fs = both_sql(_table([col], [0]))
    for v in random_decimals(30_000):
        assert outcome(fj, [v]) == outcome(pj, [v]), v
        assert_sql_alike(fs.insert, ps.insert, [v], msg=v)


def test_bit_columns_format_alike() -> None:
    """SQL's ``b'...'`` of every BIT width (C to 64 bits) for random and edge values."""
    rng = random.Random(18)
    for width in range(1, 65):
        col = ColumnDef(0, ColumnType.BIT, ((width // 8) << 8) | (width % 8), True, name="b")
        ps, fs = both_sql(_table([col], [0]))
        values = [0, 1, 2**width - 1, 2**61 - 1, 2**61, 2**63, 2**64 - 1, 2**64, 2**70, -1, -(2**63), True, 1.0]
        for v in values + [rng.getrandbits(width) for _ in range(300)]:
            assert_sql_alike(fs.insert, ps.insert, [v], msg=(width, v))
            assert_sql_alike(fs.update, ps.update, [v], [v], msg=(width, v))


def random_texts(n: int) -> list[str]:
    """Strings of quotes, backslashes, every control character, ASCII, Latin-1, BMP, astral and
    surrogate code points, mixed."""
    rng = random.Random(18)
    alphabet = ['"', "\\", "'", "a", "Z", " ", "\x7f", "é", "漢", "𝄞", "\udc80", "\ud800"] + [
        chr(c) for c in range(32)
    ]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(n)]


def test_strings_and_json_documents_with_escapes_format_alike() -> None:
    """JSON's escapes written by C (``encode_basestring``'s) for text and JSON documents' text."""
    text = ColumnDef(0, ColumnType.VARCHAR, 256, True, name="s")
    doc = ColumnDef(1, ColumnType.JSON, 4, True, name="j")
    pj, fj = both_json([text, doc])
    ps, fs = both_sql(_table([text, doc], [0]))
    for t in random_texts(20_000):
        for image in (
            [t, Json({t: [t, 1]})],
            [t, Json({t: [t, 1.5e20]}, plain=True)],
            [t, Json(t, plain=True)],
        ):
            assert outcome(fj, image) == outcome(pj, image), t
            assert_sql_alike(fs.insert, ps.insert, image, msg=t)
    events = [Event(_header(), OddBody(s=t, d={t: t}), t, 4) for t in random_texts(3000)]
    assert jsonl_outcome(events, True) == jsonl_outcome(events, False)


JSON_COLUMN = next(k for k, c in enumerate(CATALOGUE) if c[0] == ColumnType.JSON)
VARCHAR = next(k for k, c in enumerate(CATALOGUE) if c[0] == ColumnType.VARCHAR)


def test_images_the_compiled_formatter_does_not_take_go_to_the_generated_one() -> None:
    """ABSENT columns, another length or sequence type, and (DELETE and UPDATE, whose WHERE may
    leave out the JSON column) a partial JSON update."""
    cols = _layout([0, VARCHAR, JSON_COLUMN])
    for i, c in enumerate(cols):
        c.name = f"c{i}"
    pj, fj = both_json(cols)
    ps, fs = both_sql(_table(cols, [0]))
    partial = PartialJson([JsonDiff("REPLACE", "$.a", 1)])
    images: list[Any] = [
        [1, "x", None],
        [ABSENT, "x", None],
        [1, ABSENT, ABSENT],
        (1, "y", partial),
        [1, "y", partial],
        [1, 2],
        [1, 2, 3, 4],
        [],
        "abc",
        None,
        SubList([1, "x", None]),
    ]
    for image in images:
        assert outcome(fj, image) == outcome(pj, image), image
        assert_sql_alike(fs.insert, ps.insert, image, msg=image)
        assert_sql_alike(fs.delete, ps.delete, image, msg=image)
        for other in ([2, "z", None], [2, ABSENT, None], [2, "z", partial]):
            assert_sql_alike(fs.update, ps.update, image, other, msg=image)
            assert_sql_alike(fs.update, ps.update, other, image, msg=image)
    assert_sql_alike(fs.update, ps.update, [1, "x", None])  # one image: an error


# ---- whole JSON event lines (``_fastjoin.EventJson``, ``jsonl.render_jsonl_bytes``) ----


@dataclasses.dataclass
class OddBody:
    """A body dataclass of every field value class the writer meets (and some it must hand back)."""

    i: Any = 1
    s: Any = "plain"
    n: Any = None
    b: Any = True
    d: Any = dataclasses.field(default_factory=dict)
    x: Any = b""
    _private: int = 0


@dataclasses.dataclass
class GtidBody:
    sid: str = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    gno: Any = 7
    g: Any = "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"

    @property
    def gtid(self) -> Any:
        return self.g


@dataclasses.dataclass
class NoFields:
    @property
    def gtid(self) -> Any:
        return {"a": [1]}


class RowsChild(Rows):
    """Not exactly ``Rows``: the pure line sends it through ``event_dict``."""


@dataclasses.dataclass
class BrokenGtid:
    a: int = 1

    @property
    def gtid(self) -> Any:
        raise ValueError("a property that fails")


# fmt: off
ODD_FIELDS: list[Any] = [
    0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**40, True, False, None, "", "a\"b", "a\\b", "tab\t",
    "\x00\x1f", "ünïcödé ✓ 𝄞", "\udc80\udcff", "\ud800", 1.5, float("nan"), float("inf"), -0.0, b"", b"\x00\xff",
    (), (1, "a"), [1, 2], {}, {"k": 1}, {"k": {"n": {"m": None}}}, {"k": float("nan")}, {1: "int key"},
    {"k": b"bytes"}, {"k": [1]}, {"k": "a\"q"}, {"k": True, "f": 1.25, "s": "ü"}, {("a", "b"): 1},
    {"k": 10**30}, {"\udc80": 1}, object(), ["\ud800"], decimal.Decimal("1.5"),
]
# fmt: on


def _header(**kw: Any) -> EventHeader:
    fields = {
        "timestamp": 1700000000,
        "type_code": 2,
        "server_id": 1,
        "event_size": 100,
        "log_pos": 200,
        "flags": 0,
    }
    fields.update(kw)
    return EventHeader(**fields)


def odd_events() -> list[Event]:
    evs: list[Event] = []
    for v in ODD_FIELDS:
        evs.append(Event(_header(), OddBody(i=v, s=v, d=v, x=v), "f", 4))
        evs.append(Event(_header(type_code=33), GtidBody(gno=v, g=v), "f", 4))
        for field in ("timestamp", "server_id", "event_size", "log_pos", "flags"):
            evs.append(Event(_header(**{field: v}), GtidBody(), "f", 4))
        evs.append(Event(_header(), OddBody(), "f", 4, checksum=v))
        evs.append(Event(_header(), OddBody(), "f", 4, inner_index=v))
        evs.append(Event(_header(), OddBody(), "f", v))
        evs.append(Event(_header(), OddBody(), v, 4))
    evs += [
        Event(_header(), NoFields(), 'f\u00fc"', 4, checksum=0xFFFFFFFF, inner_index=3),
        Event(_header(), BrokenGtid(), "f", 4),
        Event(_header(), UnknownEvent(b"\x01\x02"), "f", 4),
        Event(_header(type_code=255), OddBody(), "f", 4),  # an unknown type's name
        Event(_header(), 42, "f", 4),  # not a dataclass
        Event(_header(), {"a": 1}, "f", 4),
    ]
    return evs


def rows_variants(ev: Event) -> list[Event]:
    """A rows event as read, and changed where the writer must hand it back or fail alike."""
    b = ev.body
    out = [ev]
    for change in (
        {"partition_id": 3},
        {"undecoded_reason": "odd", "raw_rows": b"\x00"},
        {"table_id": True},
        {"flags": 2.0},
        {"operation": "update"},
        {"operation": "insert", "rows": [(None, None)]},
        {"operation": "delete", "rows": [(None, None)]},
        {"operation": 1},
        {"operation": "déjà"},
        {"rows": [(None, None, None)]},
        {"rows": []},
        {"table": None},
    ):
        copy = dataclasses.replace(b)
        for k, v in change.items():
            setattr(copy, k, v)
        out.append(dataclasses.replace(ev, body=copy))
    child = RowsChild.__new__(RowsChild)
    for f in dataclasses.fields(Rows):
        setattr(child, f.name, getattr(b, f.name))
    out.append(dataclasses.replace(ev, body=child))
    return out


def jsonl_outcome(events: list[Event], compiled: bool) -> Any:
    """The bytes ``dump --format json`` writes of ``events`` one by one (each its block, or its error)."""
    joined.FORMATTER.choose(compiled)
    try:
        got = []
        for ev in events:
            try:
                got.append(b"".join(jsonl.render_jsonl_bytes([ev])))
            except Exception as e:  # noqa: BLE001  (the same failure both ways is what is tested)
                got.append(("error", type(e), str(e)))
        return got
    finally:
        joined.FORMATTER.choose(not native.PURE_FORCED)


def test_event_lines_of_odd_events_are_the_pure_ones() -> None:
    """Header fields of every class (bools, floats, big and negative ints, text), body fields of
    every class (escapes, non-ASCII, surrogates that do not encode, NaN, nested and odd dicts),
    ``gtid`` properties that fail, bodies that are not dataclasses, rows events the writer must hand
    back: the compiled writer gives the pure path's bytes, or its error."""
    evs = odd_events()
    corpus_rows = next(iter(rows_events(CORPUS / corpus_index()["records"][0]["path"])), None)
    for f in sorted(CORPUS.rglob("*")):
        if corpus_rows is not None:
            break
        if f.is_file():
            corpus_rows = next(iter(rows_events(f)), None)
    assert corpus_rows is not None
    evs += rows_variants(corpus_rows)
    pure, fast = jsonl_outcome(evs, False), jsonl_outcome(evs, True)
    for ev, p, c in zip(evs, pure, fast, strict=True):
        assert p == c, ev
    assert sum(isinstance(p, tuple) for p in pure) >= 3  # some fail, alike


def test_event_lines_of_the_series_are_the_pure_ones(tmp_path: Path) -> None:
    """Generated MySQL 8, 5.7 and MariaDB series (every column type, DDL, schema history)."""
    for flavor in ("mysql80", "mysql57", "mariadb"):
        result = generate(tmp_path / flavor, flavor=flavor, target_bytes=400_000, max_file_size=None)
        tracker = SchemaTracker(SchemaHistory(), on_mismatch="positional")
        evs = [ev for f in result.files for ev in BinlogReader(f, observers=[tracker])]
        joined.FORMATTER.choose(False)
        try:
            pure = b"".join(jsonl.render_jsonl_bytes(evs))
        finally:
            joined.FORMATTER.choose(not native.PURE_FORCED)
        assert b"".join(jsonl.render_jsonl_bytes(evs)) == pure, flavor
        assert len(evs) > 2000


def test_event_lines_are_written_in_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an intact series no event goes back to the pure line (a silent fallback would be equal,
    and slow), and only bodies the writer has no plan for go to the pure body encoder."""
    result = generate(tmp_path, flavor="mysql80", target_bytes=300_000, max_file_size=None)
    evs = [ev for f in result.files for ev in BinlogReader(f)]
    calls: list[str] = []
    line, other = jsonl.JsonLines.line, jsonl.JsonLines._other
    monkeypatch.setattr(jsonl.JsonLines, "line", lambda self, ev: calls.append("line") or line(self, ev))
    monkeypatch.setattr(jsonl.JsonLines, "_other", lambda self, ev: calls.append("other") or other(self, ev))
    joined.FORMATTER.choose(True)  # (BINLAKE_PURE=1 chooses pure at start-up: this test is of the compiled one)
    try:
        written = b"".join(jsonl.render_jsonl_bytes(evs))
    finally:
        joined.FORMATTER.choose(not native.PURE_FORCED)
    assert calls == []
    assert written.count(b"\n") == len(evs)
