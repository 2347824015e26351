"""Counting the rows of a rows event without decoding their values (what ``binlake stats`` needs).

A function generated once per (layout, present columns) walks the row images by their lengths
only: fixed widths are constants of the layout, strings/BLOBs/JSON are skipped by their length
prefix, and a column of any other type calls its decoder (exact by construction). Rows decoding
stays the reference: the caller falls back to it whenever the walk does not end exactly at the end
of the event (damage), so errors read as they always did. Tests hold the count equal to the
decoded rows' over the corpus and generated series.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from binlake.values import plan
from binlake.values.columns import ColumnDef, column_decoder
from binlake.values.numeric import bit_length, decimal_size
from binlake.values.temporal import frac_size
from binlake.values.types import BLOB_LENGTH_WIDTH, ColumnType, string_max_length

RowsCounter = Callable[[bytes, int, int], tuple[int, int]]

_FIXED: dict[int, int] = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 3,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
    ColumnType.FLOAT: 4,
    ColumnType.DOUBLE: 8,
    ColumnType.YEAR: 1,
    ColumnType.DATE: 3,
    ColumnType.NEWDATE: 3,
    ColumnType.TIME: 3,
    ColumnType.DATETIME: 8,
    ColumnType.TIMESTAMP: 4,
    ColumnType.NULL: 0,
}

_BLOB_WIDTH: dict[int, int] = {**BLOB_LENGTH_WIDTH, ColumnType.JSON: 0}


def fixed_width(col: ColumnDef) -> int | None:
    """The bytes a value of this column always takes, or None when it carries its own length."""
    t = col.real_type
    if t in _FIXED:
        return _FIXED[t]
    if t == ColumnType.TIME2:
        return 3 + frac_size(col.meta)
    if t == ColumnType.DATETIME2:
        return 5 + frac_size(col.meta)
    if t == ColumnType.TIMESTAMP2:
        return 4 + frac_size(col.meta)
    if t == ColumnType.NEWDECIMAL:
        precision, scale = col.meta >> 8, col.meta & 0xFF
        size = decimal_size(precision, scale) if scale <= precision else 0
        return size or None  # an invalid DECIMAL goes to its decoder, which says why
    if t == ColumnType.BIT:
        return (bit_length(col.meta) + 7) // 8
    if t in (ColumnType.ENUM, ColumnType.SET):
        return col.meta & 0xFF or None
    return None


def length_width(col: ColumnDef) -> int | None:
    """The width of the length prefix of a string, BLOB or JSON value (None: not one of those)."""
    t = col.real_type
    if t == ColumnType.VARCHAR:
        return 1 if col.meta < 256 else 2
    if t in (ColumnType.STRING, ColumnType.VAR_STRING):
        return 1 if string_max_length(col.meta) < 256 else 2
    if t in _BLOB_WIDTH:
        width = col.meta or _BLOB_WIDTH[t]
        return width if 1 <= width <= 4 else None
    return None


def _skip_lines(col: ColumnDef, env: dict[str, Any]) -> list[str]:
    """Statements that move ``p`` past one non-NULL value of ``col``."""
    width = fixed_width(col)
    if width is not None:
        return [f"p += {width}"] if width else []
    prefix = length_width(col)
    if prefix is not None:
        length = {1: "buf[p]", 2: "(buf[p] | buf[p + 1] << 8)"}.get(
            prefix, f"int.from_bytes(buf[p:p + {prefix}], 'little')"
        )
        return [f"p += {prefix} + {length}"]
    env[f"_d{col.index}"] = column_decoder(col)
    return [f"_, p = _d{col.index}(buf, p)"]


def _image_lines(columns: list[ColumnDef], present: tuple[int, ...], env: dict[str, Any]) -> list[str]:
    """Statements that move ``p`` past one row image: with no NULL, fixed widths are summed."""
    if not present:
        return []
    nb = (len(present) + 7) >> 3
    lines = [
        "nulls = buf[p]" if nb == 1 else f"nulls = int.from_bytes(buf[p:p + {nb}], 'little')",
        f"p += {nb}",
        "if not nulls:",
    ]
    pending = 0
    for i in present:
        width = fixed_width(columns[i])
        if width is not None:
            pending += width
            continue
        if pending:
            lines.append(f"    p += {pending}")
            pending = 0
        lines.extend("    " + line for line in _skip_lines(columns[i], env))
    lines.append(f"    p += {pending}")
    lines.append("else:")
    for j, i in enumerate(present):
        skip = _skip_lines(columns[i], env)
        if skip:
            lines.append(f"    if not nulls & {1 << j}:")
            lines.extend("        " + line for line in skip)
    return lines


def compile_rows_counter(
    columns: list[ColumnDef], before: tuple[int, ...] | None, after: tuple[int, ...] | None
) -> RowsCounter:
    """A function walking every row of a rows event: ``(buf, p, end) -> (rows, p)``; ``p`` past
    ``end`` (or an IndexError) means the images do not fit the event."""
    env: dict[str, Any] = {}
    body = [*_image_lines(columns, before or (), env), *_image_lines(columns, after or (), env)]
    if not body:
        body = ["break  # rows of no bytes: nothing can follow"]
    lines = [
        "def count_rows(buf, p, end):",
        "    n = 0",
        "    while p < end:",
        *("        " + line for line in body),
        "        n += 1",
        "    return n, p",
    ]
    exec(compile("\n".join(lines), f"<row count of {len(columns)} columns>", "exec"), env)  # noqa: S102
    return env["count_rows"]  # type: ignore[no-any-return]


class CounterCache:
    """Generated row counters by (layout, present columns)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._counters: dict[tuple[Any, ...], RowsCounter] = {}

    def get(
        self,
        signature: tuple[Any, ...],
        columns: list[ColumnDef],
        before: tuple[int, ...] | None,
        after: tuple[int, ...] | None,
    ) -> RowsCounter:
        compiled = plan.compile_rows_decoder is plan.compile_c_rows_decoder
        key = (signature, before, after, compiled)
        fn = self._counters.get(key)
        if fn is None:
            if len(self._counters) >= self.limit:
                self._counters.clear()
            if compiled:  # the compiled row decoder's walk: the same lengths, in C
                fn = plan.compile_c_rows_counter(columns, before, after)
            else:
                fn = compile_rows_counter(columns, before, after)
            self._counters[key] = fn
        return fn


COUNTERS = CounterCache()
