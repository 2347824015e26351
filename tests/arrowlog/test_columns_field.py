"""The ``columns`` field built by copying each layout's buffers per row
(``_fastvariant.columns_array``) against the reference, which takes a list of each distinct
layout once by row (``changelog._columns`` with ``compiled=False``): the same array, valid to the
last buffer, for layouts of every shape — names of any text, NULL flags and numbers, ENUM/SET
values absent, empty or many — rows of no layout (renames, drops) included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.arrowlog.changelog import COLUMN, _columns, columns_value
from binlake.changes import _layouts
from binlake.events.rows import Rows
from binlake.generate import generate
from binlake.spark.changelog import file_transactions

fastvariant = pytest.importorskip(
    "binlake.arrowlog._fastvariant", reason="the compiled change log is not built"
)

COLUMNS = pa.list_(COLUMN)
INT32 = st.integers(-(2**31), 2**31 - 1)
COLUMN_VALUE = st.fixed_dictionaries(
    {
        "name": st.text(max_size=12),
        "type": st.none() | INT32,
        "meta": st.none() | INT32,
        "unsigned": st.none() | st.booleans(),
        "collation": st.none() | INT32,
        "pk": st.none() | st.booleans(),
        "values": st.none() | st.lists(st.text(max_size=6), max_size=4),
    }
)


def reference(layouts: list[list[dict[str, Any]]], which: list[int | None]) -> pa.Array:
    return pa.array(layouts, COLUMNS).take(pa.array(which, pa.int32()))


@settings(max_examples=200, deadline=None)
@given(
    layouts=st.lists(st.lists(COLUMN_VALUE, max_size=6), min_size=1, max_size=4),
    picks=st.lists(st.none() | st.integers(0, 3), max_size=40),
)
def test_any_layouts_alike(layouts: list[list[dict[str, Any]]], picks: list[int | None]) -> None:
    which = [None if p is None else p % len(layouts) for p in picks]
    got = fastvariant.columns_array(layouts, which, COLUMNS)
    got.validate(full=True)
    want = reference(layouts, which)
    assert got.equals(want)
    assert got.to_pylist() == want.to_pylist()


def test_a_layout_out_of_range_is_refused() -> None:
    with pytest.raises(IndexError):
        fastvariant.columns_array([[]], [0, 1], COLUMNS)


def test_real_layouts_alike(tmp_path: Path) -> None:
    """The layouts of a generated series of every type (ENUM and SET values, keys, collations):
    the field of a batch of them in any order, by both ways, through ``_columns``."""
    result = generate(tmp_path / "bin", flavor="mysql80", seed=5, target_bytes=150_000, ddl_every=20)
    layouts = []
    for t in file_transactions(result.files[0]):
        for ev in t.events:
            if isinstance(ev.body, Rows) and ev.body.table is not None:
                layout = _layouts(ev.body.table)
                if layout not in layouts:
                    layouts.append(layout)
    assert len(layouts) >= 3 and any(c.values for lay in layouts for c in lay)
    which: list[int | None] = [i % len(layouts) if i % 7 else None for i in range(500)]
    got = _columns(layouts, which, len(which), compiled=True)
    want = _columns(layouts, which, len(which), compiled=False)
    assert got.equals(want)
    assert got.to_pylist()[:20] == [None if w is None else columns_value(layouts[w]) for w in which[:20]]
