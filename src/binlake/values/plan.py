"""Row-image decoders generated once per table layout (the per-table decode plan).

A row image is a NULL bitmap followed by the values of the present, non-NULL columns. Calling one
closure per value costs more than the decoding itself in CPython, so for each (columns, present
columns) layout we generate one Python function with the common types inlined and the rest calling
their ``column_decoder`` closure. The generated code only reorders the work the closures do; every
value is the same as the closures produce (tests run both paths on the real corpus).

When the optional compiled decoder is built (``_fastrows``, from the operations ``rowops`` derives
from the same layout), it is used instead; the generated Python stays the reference it is tested
against, and ``BINLAKE_PURE=1`` (or ``use_compiled(False)``, ``binlake.native``) chooses it.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from decimal import Decimal
from types import ModuleType
from typing import Any

from binlake import native
from binlake.values.charsets import codec_for
from binlake.values.columns import ColumnDef, column_decoder
from binlake.values.json_binary import decode_json_column
from binlake.values.numeric import DECIMAL_CONTEXT, decimal_segments
from binlake.values.rowops import image_program
from binlake.values.strings import enum_table, set_table
from binlake.values.temporal import MysqlDate, MysqlDateTime
from binlake.values.types import BLOB_LENGTH_WIDTH, ColumnType, string_max_length

RowsDecoder = Callable[[bytes, int, int], tuple[list[tuple[Any, Any]], int]]

_INT_FMT: dict[int, tuple[str, str, int]] = {
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


def _text_lines(v: str, width: int, codec: str | None = "utf-8", pad_to: int | None = None) -> list[str]:
    """A length-prefixed string: bytes when binary (``codec`` None, BINARY(n) zero-padded to
    ``pad_to``), else text by the codec, the bytes when they do not decode (as ``decode_text``)."""
    length = {1: "buf[p]", 2: "(buf[p] | buf[p + 1] << 8)"}.get(
        width, f"int.from_bytes(buf[p:p + {width}], 'little')"
    )
    lines = [
        f"e = p + {width} + {length}",
        "if e > L: raise ValueError('string runs past the row image')",
    ]
    if codec is None:
        lines.append(f"{v} = buf[p + {width}:e]")
        if pad_to is not None:
            lines.append(f"if e - p - {width} < {pad_to}: {v} += bytes({pad_to} - (e - p - {width}))")
    else:
        lines += [
            "try:",
            f"    {v} = buf[p + {width}:e].decode({'utf-8' if codec == '?' else codec!r})",
            "except UnicodeDecodeError:",
            f"    {v} = buf[p + {width}:e]",
        ]
    return [*lines, "p = e"]


def _inline_varchar(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """VARCHAR / VARBINARY: the hot path of most tables."""
    return _text_lines(v, 1 if col.meta < 256 else 2, codec_for(col.collation))


def _inline_char(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """CHAR / BINARY: BINARY(n) gets back the trailing zeros the server strips."""
    max_len = string_max_length(col.meta)
    codec = codec_for(col.collation)
    return _text_lines(v, 1 if max_len < 256 else 2, codec, max_len if codec is None else None)


def _inline_text(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """TEXT / BLOB (and GEOMETRY, a binary BLOB): a 1-4 byte length from the metadata."""
    width = col.meta or BLOB_LENGTH_WIDTH[col.real_type]
    codec = None if col.real_type == ColumnType.GEOMETRY else codec_for(col.collation)
    return _text_lines(v, width, codec) if 1 <= width <= 4 else None


def _inline_json(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    if not 1 <= col.meta <= 4:
        return None
    env["_json_column"] = decode_json_column
    return [*_text_lines("x", col.meta, None), f"{v} = _json_column(x)"]


def _inline_int24(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    lines = [f"{v} = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16", "p += 3"]
    return lines if col.unsigned else [*lines, f"if {v} & 0x800000: {v} -= 0x1000000"]


def _inline_time2(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """TIME2 as ``time2_packed`` + ``time_from_packed``: the packed integer, then one timedelta."""
    env["_timedelta"] = dt.timedelta
    fsp = col.meta
    if fsp >= 5:
        read = ["x = int.from_bytes(buf[p:p + 6], 'big') - 0x800000000000", "p += 6"]
    elif fsp == 0:
        read = ["x = ((buf[p] << 16 | buf[p + 1] << 8 | buf[p + 2]) - 0x800000) << 24", "p += 3"]
    else:
        short = fsp <= 2
        frac = "buf[p + 3]" if short else "(buf[p + 3] << 8 | buf[p + 4])"
        read = [
            "x = (buf[p] << 16 | buf[p + 1] << 8 | buf[p + 2]) - 0x800000",
            f"f = {frac}",
            f"if x < 0 and f: x += 1; f -= {0x100 if short else 0x10000}",
            f"x = (x << 24) + f * {10000 if short else 100}",
            f"p += {4 if short else 5}",
        ]
    return [
        *read,
        "if x < 0:",
        "    x = -x; hms = x >> 24",
        f"    {v} = -_timedelta(0, ((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63), x & 0xFFFFFF)",
        "else:",
        "    hms = x >> 24",
        f"    {v} = _timedelta(0, ((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 63) * 60 + (hms & 63), x & 0xFFFFFF)",
    ]


def _inline_date(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    env["_date"], env["_MysqlDate"] = dt.date, MysqlDate
    return [
        "x = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16",
        "try:",
        f"    {v} = _date(x >> 9, (x >> 5) & 15, x & 31)",
        "except ValueError:",
        f"    {v} = _MysqlDate(x >> 9, (x >> 5) & 15, x & 31)",
        "p += 3",
    ]


_FRAC_FMT = {0: ("", "0"), 1: ("B", "{a} * 10000"), 2: ("H", "{a} * 100"), 3: ("HB", "({a} << 8 | {b})")}


def _temporal_read(col: ColumnDef, env: dict[str, Any], int_fmt: str, int_expr: str) -> tuple[list[str], int]:
    """One struct read of a big-endian integer part and its fraction bytes: sets ``x`` and ``us``."""
    n = (col.meta + 1) // 2
    if n not in _FRAC_FMT:
        raise ValueError(f"column {col.label}: fractional second precision {col.meta} is over 6")
    frac_fmt, frac_expr = _FRAC_FMT[n]
    st = struct.Struct(">" + int_fmt + frac_fmt)
    env[f"_t{col.index}"] = st.unpack_from
    names = ["x0", "x1"][: len(int_fmt)] + ["f0", "f1"][: len(frac_fmt)]
    lines = [
        f"{', '.join(names)}{',' if len(names) == 1 else ''} = _t{col.index}(buf, p)",
        f"x = {int_expr}",
        f"us = {frac_expr.format(a='f0', b='f1')}",
    ]
    return lines, st.size


def _inline_datetime2(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    env["_datetime"], env["_MysqlDateTime"] = dt.datetime, MysqlDateTime
    read, size = _temporal_read(col, env, "IB", "(x0 << 8 | x1) - 0x8000000000")
    return [
        *read,
        "if x < 0: x = -x",
        "ymd = x >> 17; hms = x & 0x1FFFF; y, mo = divmod(ymd >> 5, 13)",
        "try:",
        f"    {v} = _datetime(y, mo, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, us)",
        "except ValueError:",
        f"    {v} = _MysqlDateTime(y, mo, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, us)",
        f"p += {size}",
    ]


def _inline_timestamp2(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """As ``timestamp_from``: the epoch plus a timedelta (5x faster than ``fromtimestamp`` and
    ``replace`` for a fraction), the zero TIMESTAMP as a ``MysqlDateTime``."""
    env["_ZERO_TS"] = MysqlDateTime(0, 0, 0)
    env["_EPOCH"], env["_timedelta"] = dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dt.timedelta
    read, size = _temporal_read(col, env, "I", "x0")
    return [*read, f"{v} = _EPOCH + _timedelta(0, x, us) if x or us else _ZERO_TS", f"p += {size}"]


def _inline_set(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """One-byte SETs: all 256 values precomputed."""
    names = col.set_values
    if col.meta & 0xFF != 1:
        return None
    if names is None:  # no names known: the bit mask
        return [f"{v} = buf[p]", "p += 1"]
    env[f"_m{col.index}"] = set_table(names)
    return [f"{v} = _m{col.index}[buf[p]]", "p += 1"]


def _inline_decimal(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    """DECIMAL unrolled: one integer read, its base-10^9 groups combined by constant shifts."""
    precision, scale = col.meta >> 8, col.meta & 0xFF
    if scale > precision or precision == 0:
        return None
    segs = decimal_segments(precision, scale)
    size = sum(n for n, _ in segs)
    bits = size * 8
    top = 1 << (bits - 1)
    env["_Decimal"] = Decimal
    terms, shift, mult = [], 0, 1
    for nbytes, digits in reversed(segs):
        terms.append(
            f"((x >> {shift}) & {(1 << nbytes * 8) - 1}) * {mult}"
            if mult != 1
            else f"((x >> {shift}) & {(1 << nbytes * 8) - 1})"
        )
        shift += nbytes * 8
        mult *= 10**digits
    value = " + ".join(terms)
    # Decimal(f"{n}e-{scale}") is Decimal(n).scaleb(-scale, DECIMAL_CONTEXT) (same coefficient and
    # exponent; 65 digits never round at precision 100), without the scaleb call
    assert DECIMAL_CONTEXT.prec >= 65
    make = (lambda expr: f"_Decimal(f'{{{expr}}}e-{scale}')") if scale else (lambda expr: f"_Decimal({expr})")
    return [
        f"if p + {size} > L: raise ValueError('DECIMAL runs past the row image')",
        f"x = int.from_bytes(buf[p:p + {size}], 'big')",
        f"if x & {top}:",
        f"    x ^= {top}",
        f"    {v} = {make(value)}",
        "else:",
        f"    x ^= {top ^ ((1 << bits) - 1)}",
        f"    {v} = {make('-(' + value + ')')}",
        f"p += {size}",
    ]


def _inline_bit(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    n = ((col.meta >> 8) * 8 + (col.meta & 0xFF) + 7) // 8
    return [f"{v} = int.from_bytes(buf[p:p + {n}], 'big')", f"p += {n}"] if n else None


def _inline_year(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    return [f"{v} = buf[p]", f"if {v}: {v} += 1900", "p += 1"]


def _inline_enum(col: ColumnDef, v: str, env: dict[str, Any]) -> list[str] | None:
    if col.meta & 0xFF != 1:
        return None
    if col.enum_values is None:  # no names known: the index
        return [f"{v} = buf[p]", "p += 1"]
    name = f"_n{col.index}"
    env[name] = enum_table(col.enum_values)
    return [f"{v} = {name}[buf[p]]", "p += 1"]


# type -> builder of inline code (None from a builder: use the closure instead)
INLINE: dict[int, Callable[[ColumnDef, str, dict[str, Any]], list[str] | None]] = {
    ColumnType.TINY: _inline_int,
    ColumnType.SHORT: _inline_int,
    ColumnType.LONG: _inline_int,
    ColumnType.LONGLONG: _inline_int,
    ColumnType.INT24: _inline_int24,
    ColumnType.FLOAT: _inline_float,
    ColumnType.DOUBLE: _inline_float,
    ColumnType.VARCHAR: _inline_varchar,
    ColumnType.STRING: _inline_char,
    ColumnType.VAR_STRING: _inline_char,
    ColumnType.BLOB: _inline_text,
    ColumnType.TINY_BLOB: _inline_text,
    ColumnType.MEDIUM_BLOB: _inline_text,
    ColumnType.LONG_BLOB: _inline_text,
    ColumnType.GEOMETRY: _inline_text,
    ColumnType.JSON: _inline_json,
    ColumnType.TIME2: _inline_time2,
    ColumnType.YEAR: _inline_year,
    ColumnType.BIT: _inline_bit,
    ColumnType.ENUM: _inline_enum,
    ColumnType.SET: _inline_set,
    ColumnType.DATE: _inline_date,
    ColumnType.NEWDATE: _inline_date,
    ColumnType.DATETIME2: _inline_datetime2,
    ColumnType.TIMESTAMP2: _inline_timestamp2,
    ColumnType.NEWDECIMAL: _inline_decimal,
}


_FIXED_FMT: dict[int, tuple[str, str]] = {
    ColumnType.TINY: ("b", "B"),
    ColumnType.SHORT: ("h", "H"),
    ColumnType.LONG: ("i", "I"),
    ColumnType.LONGLONG: ("q", "Q"),
    ColumnType.FLOAT: ("f", "f"),
    ColumnType.DOUBLE: ("d", "d"),
}


def _fixed_code(col: ColumnDef) -> str | None:
    fmt = _FIXED_FMT.get(col.real_type)
    return None if fmt is None else fmt[1] if col.unsigned else fmt[0]


def _value_lines(col: ColumnDef, env: dict[str, Any]) -> list[str]:
    v = f"v{col.index}"
    builder = INLINE.get(col.real_type)
    body = builder(col, v, env) if builder else None
    if body is None:
        env[f"_d{col.index}"] = column_decoder(col)
        body = [f"{v}, p = _d{col.index}(buf, p)"]
    return body


def _image_lines(
    columns: list[ColumnDef], present: tuple[int, ...], env: dict[str, Any], tag: str
) -> list[str]:
    """Statements that read one image at ``p`` into ``row_{tag}`` (a list, ABSENT where not present).

    Two paths: with no NULL in the image (the common case) runs of fixed-width numbers are read by
    one ``struct`` call and no NULL bit is tested; otherwise every column tests its bit.
    """
    values = ", ".join(f"v{i}" if i in present else "ABSENT" for i in range(len(columns)))
    if not present:  # an image of no columns is no bytes at all (not even a NULL bitmap)
        return [f"row_{tag} = [{values}]"]
    nb = (len(present) + 7) >> 3
    lines = [
        f"if p + {nb} > L: raise ValueError('row image ends inside its NULL bitmap')",
        "nulls = buf[p]" if nb == 1 else f"nulls = int.from_bytes(buf[p:p + {nb}], 'little')",
        f"p += {nb}",
        "if not nulls:",
    ]
    run: list[ColumnDef] = []

    def flush() -> None:
        if not run:
            return
        st = struct.Struct("<" + "".join(_fixed_code(c) or "" for c in run))
        name = f"_r{tag}{run[0].index}"
        env[name] = st.unpack_from
        targets = ", ".join(f"v{c.index}" for c in run)
        lines.append(f"    {targets}{',' if len(run) == 1 else ''} = {name}(buf, p)")
        lines.append(f"    p += {st.size}")
        run.clear()

    for i in present:
        col = columns[i]
        if _fixed_code(col) is not None:
            run.append(col)
            continue
        flush()
        lines.extend("    " + line for line in _value_lines(col, env))
    flush()
    lines.append("else:")
    for j, i in enumerate(present):
        lines.append(f"    if nulls & {1 << j}:")
        lines.append(f"        v{i} = None")
        lines.append("    else:")
        lines.extend("        " + line for line in _value_lines(columns[i], env))
    lines.append(f"row_{tag} = [{values}]")
    return lines


def compile_pure_rows_decoder(
    columns: list[ColumnDef], before: tuple[int, ...] | None, after: tuple[int, ...] | None, absent: Any
) -> RowsDecoder:
    """A function reading every row of a rows event: ``(buf, p, end) -> ([(before, after), …], p)``,
    generated as Python (the reference path)."""
    env: dict[str, Any] = {"ABSENT": absent}
    body: list[str] = []
    if before is not None:
        body += _image_lines(columns, before, env, "b")
    if after is not None:
        body += _image_lines(columns, after, env, "a")
    if not (before or after):
        # rows of no bytes: nothing can follow (mysqlbinlog stops at a row of length 0 likewise)
        body.append("if p < end: raise ValueError(f'rows of no columns cannot hold {end - p} bytes')")
    pair = f"({'row_b' if before is not None else 'None'}, {'row_a' if after is not None else 'None'})"
    lines = [
        "def decode_rows(buf, p, end):",
        "    L = len(buf)",
        "    out = []",
        "    append = out.append",
        "    while p < end:",
        *("        " + line for line in body),
        f"        append({pair})",
        "    return out, p",
    ]
    exec(compile("\n".join(lines), f"<rows of {len(columns)} columns>", "exec"), env)  # noqa: S102
    return env["decode_rows"]  # type: ignore[no-any-return]


def compile_c_rows_decoder(
    columns: list[ColumnDef], before: tuple[int, ...] | None, after: tuple[int, ...] | None, absent: Any
) -> RowsDecoder:
    """The same decoder interpreted in C (``_fastrows``) from the layout's operations (``rowops``)."""
    return _c_decoder(columns, before, after, absent)  # type: ignore[no-any-return]


def compile_c_rows_counter(
    columns: list[ColumnDef], before: tuple[int, ...] | None, after: tuple[int, ...] | None
) -> Callable[[bytes, int, int], tuple[int, int]]:
    """Its walk by lengths alone, no value made: ``(buf, p, end) -> (rows, p)`` (``rowcount``'s)."""
    return _c_decoder(columns, before, after, None).count  # type: ignore[no-any-return]


def _c_decoder(
    columns: list[ColumnDef], before: tuple[int, ...] | None, after: tuple[int, ...] | None, absent: Any
) -> Any:
    if ROWS.built is None:
        raise RuntimeError("the compiled row decoder is not built (binlake.values._fastrows)")
    program = (image_program(columns, before), image_program(columns, after))
    return ROWS.built.RowsDecoder(*program, len(columns), absent)


def compiled_available() -> bool:
    """Whether the compiled row decoder was built (the pure path is used either way when not)."""
    return ROWS.built is not None


def layout_signature(columns: list[ColumnDef]) -> tuple[Any, ...]:
    """Everything about a table's columns that changes how their values decode."""
    return tuple(
        (
            c.type_code,
            c.meta,
            c.unsigned,
            c.collation,
            tuple(c.enum_values) if c.enum_values is not None else None,
            tuple(c.set_values) if c.set_values is not None else None,
        )
        for c in columns
    )


# the generated decoders and, when built and chosen, their compiled twin (``use_compiled``)
compile_rows_decoder: Callable[..., RowsDecoder] = compile_pure_rows_decoder
# a rows event's header read in C (``events.rows`` falls back to its own reader when None)
rows_header: Callable[..., tuple[int, int, bytes, int, int, int, int]] | None = None


class PlanCache:
    """Generated rows decoders by (layout, present columns): table maps repeat in every transaction."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._plans: dict[tuple[Any, ...], RowsDecoder] = {}

    def get(
        self,
        signature: tuple[Any, ...],
        columns: list[ColumnDef],
        before: tuple[int, ...] | None,
        after: tuple[int, ...] | None,
        absent: Any,
    ) -> RowsDecoder:
        key = (signature, before, after)
        fn = self._plans.get(key)
        if fn is None:
            if len(self._plans) >= self.limit:
                self._plans.clear()
            fn = self._plans[key] = compile_rows_decoder(columns, before, after, absent)
        return fn

    def clear(self) -> None:
        self._plans.clear()


PLANS = PlanCache()


def _choose(module: ModuleType | None) -> None:
    global compile_rows_decoder, rows_header
    compile_rows_decoder = compile_pure_rows_decoder if module is None else compile_c_rows_decoder
    rows_header = None if module is None else module.rows_header
    PLANS.clear()


ROWS = native.OptionalModule("binlake.values._fastrows", 4, _choose)
