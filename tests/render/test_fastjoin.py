"""The compiled JSON and SQL row formatters (``binlake.render._fastjoin``) write exactly what the
generated ones (``render.jsonrow``, ``render.sqlrow``: pure Python, themselves held equal to the
per-value reference by test_jsonl.py and test_sqlrow.py) write: every rows event of the corpus and
of generated MySQL 8, MySQL 5.7 and MariaDB series, as JSON images and as INSERT, DELETE and UPDATE
both ways, and every column type of the catalogue fed hostile values, with the same error when the
generated one fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.events.rows import ABSENT, JsonDiff, PartialJson, Rows
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.render import joined, jsonrow, sql, sqlrow
from binlake.render.sqlrow import RowSql
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType
from tests.conftest import CORPUS, corpus_index
from tests.render.test_fastrender import HOSTILE, NAMES, SubList, rows_events
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
    others = {ColumnType.FLOAT, ColumnType.SET, ColumnType.GEOMETRY, ColumnType.VECTOR}
    assert slow_json == others
    assert slow_sql == others | {ColumnType.BIT}


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
                    assert outcome(fs.insert, image) == outcome(ps.insert, image)
                    assert outcome(fs.delete, image) == outcome(ps.delete, image)
            if before is not None and after is not None:
                assert outcome(fs.update, before, after) == outcome(ps.update, before, after)
                assert outcome(fs.update, after, before) == outcome(ps.update, after, before)
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
                    assert outcome(fs.insert, image) == outcome(ps.insert, image), (CATALOGUE[k], value)
                    assert outcome(fs.delete, image) == outcome(ps.delete, image), (CATALOGUE[k], value)
                    for other in ([1], ["x"], [None]):
                        assert outcome(fs.update, image, other) == outcome(ps.update, image, other)
                        assert outcome(fs.update, other, image) == outcome(ps.update, other, image)
                    compared += 1
    assert compared > 5_000


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
        assert outcome(fs.insert, image) == outcome(ps.insert, image), image
        assert outcome(fs.delete, image) == outcome(ps.delete, image), image
        for other in ([2, "z", None], [2, ABSENT, None], [2, "z", partial]):
            assert outcome(fs.update, image, other) == outcome(ps.update, image, other), image
            assert outcome(fs.update, other, image) == outcome(ps.update, other, image), image
    assert outcome(fs.update, [1, "x", None]) == outcome(ps.update, [1, "x", None])  # one image: an error
