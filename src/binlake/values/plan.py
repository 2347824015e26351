"""Row-image decoders generated once per table layout (the per-table decode plan).

A row image is a NULL bitmap followed by the values of the present, non-NULL columns. Calling one
closure per value costs more than the decoding itself in CPython, so for each (columns, present
columns) layout we generate one Python function with the common types inlined and the rest calling
their ``column_decoder`` closure. The generated code only reorders the work the closures do; every
value is the same as the closures produce (tests run both paths on the real corpus).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from binlake.values.charsets import codec_for
from binlake.values.columns import ColumnDef, column_decoder
from binlake.values.types import ColumnType

ImageDecoder = Callable[[bytes, int], tuple[list[Any], int]]

_INT_FMT = {
    ColumnType.TINY: ("b", "B", 1),
    ColumnType.SHORT: ("<h", "<H", 2),
    ColumnType.LONG: ("<i", "<I", 4),
    ColumnType.LONGLONG: ("<q", "<Q", 8),
}


def _inline_int(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    fmt = _INT_FMT.get(col.real_type)
    if fmt is None:
        return None
    name = f"_s{col.index}"
    env[name] = struct.Struct(fmt[1] if col.unsigned else fmt[0]).unpack_from
    return [f"{v} = {name}(buf, p)[0]", f"p += {fmt[2]}"]


def _inline_float(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    name = f"_s{col.index}"
    env[name] = struct.Struct("<f" if col.real_type == ColumnType.FLOAT else "<d").unpack_from
    return [f"{v} = {name}(buf, p)[0]", f"p += {4 if col.real_type == ColumnType.FLOAT else 8}"]


def _inline_varchar(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """VARCHAR in UTF-8 (or of unknown charset, read as UTF-8 when valid): the hot path of most tables."""
    if codec_for(col.collation) not in ("utf-8", "?"):
        return None
    length = "buf[p]" if col.meta < 256 else "(buf[p] | buf[p + 1] << 8)"
    width = 1 if col.meta < 256 else 2
    return [
        f"e = p + {width} + {length}",
        "if e > L: raise ValueError('string runs past the row image')",
        "try:",
        f"    {v} = buf[p + {width}:e].decode('utf-8')",
        "except UnicodeDecodeError:",
        f"    {v} = buf[p + {width}:e]",
        "p = e",
    ]


def _inline_year(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    return [f"{v} = buf[p]", f"if {v}: {v} += 1900", "p += 1"]


def _inline_enum(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    if col.enum_values is None or col.meta & 0xFF != 1:
        return None
    name = f"_n{col.index}"
    env[name] = ["", *col.enum_values]
    return [f"{v} = buf[p]", f"{v} = {name}[{v}] if {v} < {len(col.enum_values) + 1} else {v}", "p += 1"]


# type -> builder of inline code (None from a builder: use the closure instead)
INLINE: dict[int, Callable[[ColumnDef, str, dict[str, Any]], list[str] | None]] = {
    ColumnType.TINY: _inline_int,
    ColumnType.SHORT: _inline_int,
    ColumnType.LONG: _inline_int,
    ColumnType.LONGLONG: _inline_int,
    ColumnType.FLOAT: _inline_float,
    ColumnType.DOUBLE: _inline_float,
    ColumnType.VARCHAR: _inline_varchar,
    ColumnType.YEAR: _inline_year,
    ColumnType.ENUM: _inline_enum,
}


def compile_image_decoder(columns: list[ColumnDef], present: tuple[int, ...], absent: Any) -> ImageDecoder:
    env: dict[str, Any] = {"ABSENT": absent}
    nb = (len(present) + 7) >> 3
    lines = [
        "def decode_image(buf, p):",
        "    L = len(buf)",
        f"    if p + {nb} > L: raise ValueError('row image ends inside its NULL bitmap')",
        "    nulls = buf[p]" if nb == 1 else f"    nulls = int.from_bytes(buf[p:p + {nb}], 'little')",
        f"    p += {nb}",
    ]
    for j, i in enumerate(present):
        col = columns[i]
        v = f"v{i}"
        builder = INLINE.get(col.real_type)
        body = builder(col, v, env) if builder else None
        if body is None:
            env[f"_d{i}"] = column_decoder(col)
            body = [f"{v}, p = _d{i}(buf, p)"]
        lines.append(f"    if nulls & {1 << j}:")
        lines.append(f"        {v} = None")
        lines.append("    else:")
        lines.extend("        " + line for line in body)
    values = ", ".join(f"v{i}" if i in present else "ABSENT" for i in range(len(columns)))
    lines.append(f"    return [{values}], p")
    exec(compile("\n".join(lines), f"<row image of {len(columns)} columns>", "exec"), env)  # noqa: S102
    return env["decode_image"]  # type: ignore[no-any-return]


def layout_signature(columns: list[ColumnDef]) -> tuple[Any, ...]:
    """Everything about a table's columns that changes how their values decode."""
    return tuple(
        (c.type_code, c.meta, c.unsigned, c.collation,
         tuple(c.enum_values) if c.enum_values is not None else None,
         tuple(c.set_values) if c.set_values is not None else None)
        for c in columns
    )


class PlanCache:
    """Generated image decoders by (layout, present columns): table maps repeat in every transaction."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._plans: dict[tuple[Any, ...], ImageDecoder] = {}

    def get(self, signature: tuple[Any, ...], columns: list[ColumnDef], present: tuple[int, ...], absent: Any) -> ImageDecoder:
        key = (signature, present)
        fn = self._plans.get(key)
        if fn is None:
            if len(self._plans) >= self.limit:
                self._plans.clear()
            fn = self._plans[key] = compile_image_decoder(columns, present, absent)
        return fn


PLANS = PlanCache()
