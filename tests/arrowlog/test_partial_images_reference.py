"""Review of 3175c14: ``compact.partial_images`` rewritten (one head slice per head length, looked
up with ``index_in``; the image bytes read with ``StructArray.field`` instead of ``struct_field``)
gives what the implementation before it (d2fbca8, copied here as the reference) gave, on generated
windows: MINIMAL images (fewer fields than the layout), wide layouts (over 255 columns: a 5-byte
head), heads cut short, empty and NULL images, NULL ``after`` structs over bytes that look whole,
layouts whose width is not known (``columns=first``), ``rows`` with NULLs, and tables in several
chunks sliced out of larger arrays (offsets). Also the row index and ``_servers_left``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.arrowlog import compact
from binlake.arrowlog.changelog import COLUMN, VARIANT
from binlake.arrowlog.compact import WRITE_OP_VALUES, _layout_widths, partial_images
from binlake.arrowlog.variant import _object_head, object_starts, object_value


def reference_partial_images(t: pa.Table, rows: pa.Array, widths: dict[int, int] | None = None) -> pa.Array:
    """``partial_images`` as of d2fbca8 (before 3175c14), verbatim."""
    writes = pc.and_(rows, pc.is_in(t["op"], WRITE_OP_VALUES)).fill_null(False)
    if not pc.any(writes).as_py():
        return pa.repeat(pa.scalar(False), t.num_rows)
    count = _layout_widths(t, widths)
    values = pc.struct_field(t["after"].combine_chunks(), "value")
    full = pa.repeat(pa.scalar(False), t.num_rows)
    for w in pc.unique(count.filter(writes)).to_pylist():
        if w is None:
            continue
        starts = pa.array(object_starts(w), pa.binary())
        head = pc.binary_slice(values, 0, len(starts[0].as_py()))
        full = pc.or_(full, pc.and_(pc.equal(count, w), pc.is_in(head, starts)).fill_null(False))
    return pc.and_(writes, pc.invert(full)).combine_chunks()


# field counts around the one-byte/four-byte count boundary, and small ones
COUNTS = [0, 1, 2, 3, 7, 254, 255, 256, 257, 300]
OPS = ["insert", "update", "insert", "update", "delete", "rename_table", "drop_table", "truncate"]


@st.composite
def image(draw: Any, width: int | None) -> bytes | None:
    """An after image's value bytes for a layout of ``width`` columns (None: a NULL value)."""
    kind = draw(
        st.sampled_from(
            ["whole", "whole", "whole", "minimal", "other", "head", "short", "empty", "junk", "real"]
        )
    )
    isize, osize = draw(st.sampled_from([1, 2, 3, 4])), draw(st.sampled_from([4, 3, 2, 1]))
    w = width if width is not None else draw(st.sampled_from(COUNTS))
    tail = draw(st.binary(max_size=6))
    if kind == "whole":
        return _object_head(w, isize, osize) + tail
    if kind == "minimal":
        return _object_head(draw(st.integers(0, max(w - 1, 0))), isize, osize) + tail
    if kind == "other":
        return _object_head(draw(st.sampled_from(COUNTS)), isize, osize) + tail
    if kind == "head":  # a whole head, nothing after it
        return _object_head(w, isize, osize)
    if kind == "short":  # a head cut short (of a large object's five bytes, fewer)
        h = _object_head(w, isize, osize)
        return h[: draw(st.integers(0, len(h) - 1))]
    if kind == "empty":
        return b""
    if kind == "real":
        n = draw(st.sampled_from([0, 1, 2, 3, 256]))
        return object_value(list(range(n)), [b"\x0c\x05"] * n)
    return draw(st.binary(max_size=8))


@st.composite
def windows(draw: Any) -> tuple[pa.Table, pa.Array, dict[int, int] | None]:
    n = draw(st.integers(1, 24))
    once = draw(st.booleans())
    layout_widths = draw(st.lists(st.sampled_from(COUNTS), min_size=1, max_size=4))
    ops, afters, after_valid, columns, layouts = [], [], [], [], []
    for _ in range(n):
        layout = draw(st.integers(0, len(layout_widths) - 1))
        width = layout_widths[layout]
        carries = not once or draw(st.booleans())
        ops.append(draw(st.sampled_from(OPS)))
        value = draw(image(width)) if draw(st.integers(0, 4)) else None
        afters.append(value)
        after_valid.append(draw(st.integers(0, 4)) > 0)
        columns.append(
            [
                {
                    "name": f"c{i}",
                    "type": 3,
                    "meta": 0,
                    "unsigned": False,
                    "collation": 0,
                    "pk": False,
                    "values": None,
                }
                for i in range(width)
            ]
            if carries
            else None
        )
        layouts.append(layout)
    # NULL structs over bytes that look whole: the reference read them as NULL (struct_field)
    value = pa.array([b"" if v is None else v for v in afters], pa.binary())
    value_valid = [v is not None for v in afters]
    value = pc.if_else(pa.array(value_valid), value, pa.nulls(n, pa.binary()))
    metadata = pa.array([b"\x01\x00\x00"] * n, pa.binary())
    after = pa.StructArray.from_arrays(
        [value, metadata],
        fields=list(VARIANT),
        mask=pa.array([not v for v in after_valid]),
    )
    cols: dict[str, Any] = {
        "op": pa.array(ops, pa.string()),
        "after": after,
        "columns": pa.array(columns, pa.list_(COLUMN)),
    }
    if once:
        cols["layout"] = pa.array(layouts, pa.int64())
    whole = pa.table(cols)
    # chunked, each chunk a slice of a larger table (offsets into its arrays)
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=3))) | {0, n})
    padded = pa.concat_tables([whole.slice(0, 1), whole, whole.slice(0, 1)]).combine_chunks()
    t = pa.concat_tables([padded.slice(a + 1, b - a) for a, b in zip(cuts, cuts[1:], strict=False)])
    assert t.num_rows == n
    rows = pa.array(
        draw(st.lists(st.sampled_from([True, True, True, True, False, None]), min_size=n, max_size=n)),
        pa.bool_(),
    )
    widths = draw(
        st.one_of(
            st.none(), st.just({}), st.dictionaries(st.integers(0, 5), st.sampled_from(COUNTS), max_size=3)
        )
    )
    return t, rows, widths


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows())
def test_partial_images_as_before(window: tuple[pa.Table, pa.Array, dict[int, int] | None]) -> None:
    t, rows, widths = window
    before = None if widths is None else dict(widths)
    now = None if widths is None else dict(widths)
    expected = reference_partial_images(t, rows, before)
    got = partial_images(t, rows, now)
    assert got.to_pylist() == expected.to_pylist()
    assert got.type == expected.type
    assert before == now


@pytest.mark.parametrize("n", [0, 1, 5, 70_000])
def test_the_row_index_is_a_range(n: int) -> None:
    index = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)
    assert index.equals(pa.array(range(n), pa.int64()))


def test_servers_left_as_before() -> None:
    both = pa.table(
        {
            "server_id": pa.chunked_array([[1, 2, None], [3, 1, 2, None]], pa.int64()),
            "_rank": pa.chunked_array([[0, 2, 4], [6, 8, 10, 12]], pa.int64()),
        }
    )
    t = pa.table({"server_id": both["server_id"]})
    for ranks in ([], [0], [2, 6], [4, 8], [0, 2, 4, 6, 8, 10, 12]):
        r = pa.array(ranks, pa.int64())
        # the plain way: each server of ``t`` none of whose rows is ranked, at its last row's rank
        kept = {
            s
            for s, k in zip(both["server_id"].to_pylist(), both["_rank"].to_pylist(), strict=True)
            if k in ranks
        }
        last = {s: 2 * i for i, s in enumerate(t["server_id"].to_pylist())}
        out = [last[s] for s in sorted(set(last) - kept, key=lambda s: (s is None, s))]
        assert compact._servers_left(t, both, r).to_pylist() == out
