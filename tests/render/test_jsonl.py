"""``dump --format json``'s fast path equals the reference (a dict per event, ``json.dumps``) line for
line, and the per-layout row formatter equals ``json_value`` value for value, on every event of the
corpus and of generated all-types series (MySQL 8 with full metadata, MariaDB)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from binlake.changes import Column
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.rows import ABSENT
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.render import joined
from binlake.render.jsonl import reference_jsonl, render_jsonl, render_jsonl_bytes
from binlake.render.jsonrow import compile_image_json, reference_image_json
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.values.types import ColumnType
from tests.conftest import CORPUS, corpus_index


def events(path: Path) -> Iterator[Event]:
    try:
        yield from BinlogReader(path, observers=[SchemaTracker(SchemaHistory(), on_mismatch="positional")])
    except BinlogError:
        return  # damaged or encrypted files end with their own error (tests/test_corpus.py)


def assert_same(path: Path) -> int:
    evs = list(events(path))
    want_lines = list(reference_jsonl(evs))
    for ev, got, want in zip(evs, render_jsonl(evs), want_lines, strict=True):
        assert got == want, f"{ev.source}:{ev.offset}"
    # what ``dump --format json`` writes: the lines encoded, in blocks (by C when it is built),
    # in small blocks too (the cut between blocks moves nothing)
    want = "".join(line + "\n" for line in want_lines).encode("utf-8", "surrogateescape")
    assert b"".join(render_jsonl_bytes(evs)) == want, f"{path} (compiled: {joined.compiled_joiner()})"
    assert b"".join(render_jsonl_bytes(evs, batch_bytes=1000)) == want
    return len(evs)


def test_corpus_events_render_as_the_reference(corpus: Path) -> None:
    records = [r for r in corpus_index()["records"] if r.get("events")]
    assert sum(assert_same(CORPUS / r["path"]) for r in records) > 15_000


@pytest.mark.parametrize("flavor", ["mysql80", "mariadb"])
def test_generated_all_types_render_as_the_reference(tmp_path: Path, flavor: str) -> None:
    result = generate(tmp_path, flavor=flavor, target_bytes=1_500_000, max_file_size=None)
    assert sum(assert_same(f) for f in result.files) > 5_000


def col(t: int, meta: int = 0) -> Column:
    return Column("c", t, meta, False, None, False)


ODD_VALUES = [
    (col(ColumnType.DOUBLE), float("nan")),
    (col(ColumnType.DOUBLE), float("-inf")),
    (col(ColumnType.FLOAT), float("inf")),
    (col(ColumnType.LONG), True),
    (col(ColumnType.VARCHAR), b"\x00\xff"),
    (col(ColumnType.VARCHAR), 'quote " backslash \\ newline \n tab \t \udcff'),
    (col(ColumnType.SET, 1), ()),
    (col(ColumnType.SET, 1), 5),
    (col(ColumnType.ENUM, 1), 3),
    (col(ColumnType.NEWDECIMAL, 0x0A02), "not a decimal"),
]


@pytest.mark.parametrize(("column", "value"), ODD_VALUES)
def test_odd_values_take_the_reference(column: Column, value: object) -> None:
    """Values a column rarely holds (non-finite floats, a bool, a SET bitmask, control characters)."""
    labels = ['a"b', "c"]
    columns = [column, col(ColumnType.LONG)]
    fast, ref = compile_image_json(labels, columns), reference_image_json(labels, columns)
    for image in ([value, 1], [None, ABSENT], [value, ABSENT]):
        assert fast(image) == ref(image)
    json.loads(fast([value, 1]).replace("NaN", "0").replace("Infinity", "0"))


def test_equal_labels_keep_the_reference_order() -> None:
    columns = [col(ColumnType.LONG)] * 3
    fast = compile_image_json(["a", "b", "a"], columns)
    assert fast([1, 2, 3]) == reference_image_json(["a", "b", "a"], columns)([1, 2, 3]) == '{"a": 3, "b": 2}'


def test_a_wide_table_compiles() -> None:
    """4,096 columns (MySQL's limit): the generated expression is flat, not nested per column."""
    columns = [col(ColumnType.LONG)] * 4096
    labels = [f"c{i}" for i in range(4096)]
    assert json.loads(compile_image_json(labels, columns)(list(range(4096))))["c4095"] == 4095
