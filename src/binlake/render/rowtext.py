"""Row images as ``mysqlbinlog -vv`` text, by a formatter generated once per table layout.

The per-value path (``render.values.text_value`` / ``type_comment``) is the reference; this module
compiles, for each (columns, verbosity, labels) layout, one function that formats every column of
a row in one step: labels and type comments are constants of the layout, the common types are
formatted inline, the rest call the reference for their column. Tests hold the two equal.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from binlake import native
from binlake.dialects.mysql import comment_text
from binlake.events.rows import ABSENT
from binlake.render.values import text_value, type_comment
from binlake.values.charsets import codec_for
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json
from binlake.values.numeric import bit_length
from binlake.values.plan import layout_signature
from binlake.values.temporal import format_time
from binlake.values.types import BLOB_TYPES, ColumnType

ImageText = Callable[[list[Any], list[str]], None]
"""Appends the lines of one row image to a list."""

_STRING_TYPES = frozenset({ColumnType.VARCHAR, ColumnType.STRING, ColumnType.VAR_STRING, *BLOB_TYPES})
_INT_BYTES: dict[int, int] = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 3,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}


def _int_expr(col: ColumnDef) -> str:
    """Unsigned as is; signed non-negative as is; the rest (negative: ``-1 (255)``) by the reference."""
    if col.unsigned:
        return "str(v)"
    return f"(str(v) if 0 <= v < {1 << (8 * _INT_BYTES[col.real_type] - 1)} else R(v))"


def _timestamp_expr(col: ColumnDef) -> str:
    """Seconds since the epoch (``.fraction`` cut to the column's digits) of an aware UTC datetime,
    as ``render.values._epoch``; a zero TIMESTAMP (a ``MysqlDateTime``) by the reference."""
    fsp = min(col.meta, 6) if col.real_type == ColumnType.TIMESTAMP2 else 0
    text = (
        "str((d := v - EPOCH).days * 86400 + d.seconds)"
        if not fsp
        else f"'%d.%s' % ((d := v - EPOCH).days * 86400 + d.seconds, ('%06d' % d.microseconds)[:{fsp}])"
    )
    return f"({text} if v.__class__ is DT and v.tzinfo is UTC else R(v))"


def _datetime_expr(col: ColumnDef) -> str:
    """``'YYYY-MM-DD hh:mm:ss[.f]'`` of a naive datetime by ``isoformat`` (as ``format_datetime``)."""
    fsp = min(col.meta, 6) if col.real_type == ColumnType.DATETIME2 else 0
    iso = "v.isoformat(' ', 'seconds')" if not fsp else f"v.isoformat(' ', 'microseconds')[:{20 + fsp}]"
    return f'("\'" + {iso} + "\'" if v.__class__ is DT and v.tzinfo is None else R(v))'


def _time_expr(col: ColumnDef) -> str:
    fsp = col.meta if col.real_type == ColumnType.TIME2 else 0
    return f'("\'" + FT(v, {fsp}) + "\'" if v.__class__ is TD else R(v))'


def _bit_expr(col: ColumnDef) -> str:
    spec = f"0{bit_length(col.meta)}b"
    return f'("b\'" + format(v, {spec!r}) + "\'" if v.__class__ is int else R(v))'


def _enum_expr(col: ColumnDef) -> str:
    """The index of an ENUM's name (its first occurrence; 0 if unknown), or the index itself."""
    return "(E.get(v, '0') if v.__class__ is str else str(v) if v.__class__ is int else R(v))"


def _set_expr(col: ColumnDef) -> str:
    """The bitmask of a SET's tuple of names, looked up among the sets of up to 10 names."""
    return "(SM.get(v) or R(v) if v.__class__ is tuple else R(v))"


# inline expressions of a non-NULL value ``v`` by column type (``R(v)`` is the reference for the column)
_INLINE: dict[int, Callable[[ColumnDef], str]] = {
    ColumnType.FLOAT: lambda c: '"%-20g" % v',
    ColumnType.DOUBLE: lambda c: '"%-.20g" % v',
    ColumnType.NEWDECIMAL: lambda c: 'format(v, "f")',
    **dict.fromkeys(_INT_BYTES, _int_expr),
    ColumnType.TIMESTAMP: _timestamp_expr,
    ColumnType.TIMESTAMP2: _timestamp_expr,
    ColumnType.DATETIME: _datetime_expr,
    ColumnType.DATETIME2: _datetime_expr,
    ColumnType.DATE: lambda c: (
        "(\"'\" + v.isoformat().replace('-', ':') + \"'\" if v.__class__ is DATE else R(v))"
    ),
    ColumnType.NEWDATE: lambda c: (
        "(\"'\" + v.isoformat().replace('-', ':') + \"'\" if v.__class__ is DATE else R(v))"
    ),
    ColumnType.TIME: _time_expr,
    ColumnType.TIME2: _time_expr,
    ColumnType.YEAR: lambda c: "('%04d' % v if v.__class__ is int else R(v))",
    ColumnType.BIT: _bit_expr,
    ColumnType.ENUM: _enum_expr,
    ColumnType.SET: _set_expr,
    ColumnType.JSON: lambda c: '("\'" + v.text() + "\'" if v.__class__ is JSON else R(v))',
}


def _column_env(col: ColumnDef) -> dict[str, Any]:
    """Tables an inline expression of this column looks up: ENUM names, SET masks."""
    if col.real_type == ColumnType.ENUM:
        index: dict[str, str] = {}
        for k, name in enumerate(col.enum_values or []):
            index.setdefault(name, str(k + 1))
        return {"E": index}
    if col.real_type == ColumnType.SET:
        names = col.set_values or []
        masks: dict[tuple[str, ...], str] = {}
        if len(names) <= 10:
            for m in range(1 << len(names)):
                chosen = tuple(n for k, n in enumerate(names) if m >> k & 1)
                masks.setdefault(chosen, text_value(chosen, col))
        return {"SM": masks}
    return {}


_CTRL_STR = re.compile("[\x00-\x1f]").search
_CTRL_BYTES = re.compile(b"[\x00-\x1f]").search
_ENV: dict[str, Any] = {
    "ABSENT": ABSENT,
    "CS": _CTRL_STR,
    "CB": _CTRL_BYTES,
    "DT": dt.datetime,
    "DATE": dt.date,
    "TD": dt.timedelta,
    "UTC": dt.UTC,
    "EPOCH": dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    "FT": format_time,
    "JSON": Json,
}


def _string_expr(col: ColumnDef) -> str:
    """Quoted text without a per-byte loop when no control byte needs escaping (the reference
    encodes to the stored bytes and decodes them as UTF-8: the identity for UTF-8 text)."""
    if codec_for(col.collation) in ("utf-8", "?"):
        return '("\'" + v + "\'" if v.__class__ is str and CS(v) is None else R(v))'
    return "(\"'\" + v.decode('utf-8', 'surrogateescape') + \"'\" if v.__class__ is bytes and CB(v) is None else R(v))"


def _value_expr(col: ColumnDef) -> str:
    t = col.real_type
    if t in _STRING_TYPES:
        return _string_expr(col)
    build = _INLINE.get(t)
    return build(col) if build else "R(v)"


def _label(col: ColumnDef, positional: bool) -> str:
    return f"@{col.index + 1}" if positional or col.name is None else f"`{comment_text(col.name)}`"


def _text_op(col: ColumnDef) -> tuple[str, int, Any]:
    """The compiled formatter's operation of a column (``render._fastrender``): the value classes it
    formats itself, as ``_value_expr`` writes them; ``slow`` (the expression) for the rest."""
    t = col.real_type
    if t in _STRING_TYPES:
        codec = codec_for(col.collation)  # as ``values.stored_bytes`` stores text back
        return ("str", 0, None) if codec in ("utf-8", "?") else ("bytes", 0, codec)
    if t in _INT_BYTES:
        return ("uint", 0, None) if col.unsigned else ("sint", 1 << (8 * _INT_BYTES[t] - 1), None)
    if t == ColumnType.FLOAT:
        return ("pct", 0, "%-20g")
    if t == ColumnType.DOUBLE:
        return ("pct", 0, "%-.20g")
    if t == ColumnType.NEWDECIMAL:
        return ("format", 0, "f")
    if t in (ColumnType.DATETIME, ColumnType.DATETIME2):
        return ("datetime", min(col.meta, 6) if t == ColumnType.DATETIME2 else 0, None)
    if t in (ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2):
        return ("timestamp", min(col.meta, 6) if t == ColumnType.TIMESTAMP2 else 0, None)
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return ("date", 0, None)
    if t == ColumnType.YEAR:
        return ("year", 0, None)
    if t == ColumnType.ENUM:
        return ("enum", 0, _column_env(col)["E"])
    if t == ColumnType.SET:
        return ("set", 0, _column_env(col)["SM"])
    if t == ColumnType.BIT:
        return ("bit", 0, f"0{bit_length(col.meta)}b")
    if t == ColumnType.JSON:
        return ("json", 0, Json)
    if t in (ColumnType.TIME, ColumnType.TIME2):
        return ("time", col.meta if t == ColumnType.TIME2 else 0, None)
    return ("slow", 0, None)


def compile_image_text(
    columns: list[ColumnDef], verbosity: int, positional: bool, compiled: bool = False
) -> ImageText:
    """One function appending the ``###   label=value /* type */`` lines of an image; with
    ``compiled``, the C formatter (``render._fastrender``) of the same plan, which calls the
    generated function for what it does not take."""
    env: dict[str, Any] = dict(_ENV)
    n = len(columns)
    names = ", ".join(f"v{i}" for i in range(n))
    lines = [
        "def image_text(image, out):",
        f"    ({names}{',' if n == 1 else ''}) = image" if columns else "    () = image",
    ]
    # an image of every column (the common case): one tuple of lines; else line by line
    whole: list[str] = []
    if n:
        lines.append(f"    if not ({' or '.join(f'v{i} is ABSENT' for i in range(n))}):")
        lines.append("        out += (")
        lines.append("        )")  # the lines of ``whole`` go in between
        lines.append("        return")
    lines.append("    append = out.append")
    slow: list[str] = []  # per column, the text of one value (the compiled formatter's ``slow``)
    for i, col in enumerate(columns):
        env[f"R{i}"] = lambda v, col=col: text_value(v, col)
        prefix = f"###   {_label(col, positional)}="
        if verbosity >= 2:
            tail = f" /* {type_comment(col)} meta={col.meta} nullable={int(col.nullable)} is_null="
            null_text, value_tail = f"{prefix}NULL{tail}1 */", f"{tail}0 */"
        else:
            null_text, value_tail = f"{prefix}NULL", ""
        env[f"N{i}"], env[f"P{i}"], env[f"T{i}"] = null_text, prefix, value_tail
        expr = _value_expr(col).replace("R(v)", f"R{i}(v{i})")
        for name, table in _column_env(col).items():
            env[f"{name}{i}"] = table
            expr = re.sub(rf"\b{name}\.get\(", f"{name}{i}.get(", expr)
        expr = re.sub(r"\bv\b", f"v{i}", expr)
        slow += [f"def slow{i}(v{i}):", f"    return {expr}"]
        whole.append(f"            N{i} if v{i} is None else P{i} + {expr} + T{i},")
        lines += [
            f"    if v{i} is None: append(N{i})",
            f"    elif v{i} is not ABSENT: append(P{i} + {expr} + T{i})",
        ]
    if n:
        lines[4:4] = whole
    exec(compile("\n".join(lines + slow), f"<row text of {len(columns)} columns>", "exec"), env)  # noqa: S102
    fn: ImageText = env["image_text"]
    fast = FORMATTER.built
    if not compiled or fast is None:
        return fn
    ops = []
    for i, col in enumerate(columns):
        op, arg, aux = _text_op(col)
        ops.append((fast.OPS[op], arg, aux, env[f"slow{i}"]))
    return fast.ImageText(  # type: ignore[no-any-return]
        ops,
        [env[f"P{i}"] for i in range(n)],
        [env[f"T{i}"] for i in range(n)],
        [env[f"N{i}"] for i in range(n)],
        ABSENT,
        fn,
    )


def _layout_key(columns: list[ColumnDef]) -> tuple[Any, ...]:
    """The decoding layout plus what only the text shows: positions, names, nullability."""
    return (layout_signature(columns), tuple((c.index, c.name, c.nullable) for c in columns))


class ImageTextCache:
    """Formatters by table map object (the decoder reuses maps), then by layout (equal maps from
    another transaction or another view of names share one)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._by_map: dict[tuple[int, bool, bool], tuple[Any, ImageText]] = {}
        self._by_layout: dict[tuple[Any, ...], ImageText] = {}

    def get(self, table: Any, verbosity: int, positional: bool) -> ImageText:
        compiled = FORMATTER.chosen
        key = (id(table), verbosity >= 2, positional, compiled)
        hit = self._by_map.get(key)
        if hit is not None and hit[0] is table:
            return hit[1]
        layout = (_layout_key(table.columns), verbosity >= 2, positional, compiled)
        fn = self._by_layout.get(layout)
        if fn is None:
            if len(self._by_layout) >= self.limit:
                self._by_layout.clear()
            fn = self._by_layout[layout] = compile_image_text(table.columns, verbosity, positional, compiled)
        if len(self._by_map) >= self.limit:
            self._by_map.clear()
        self._by_map[key] = (table, fn)
        return fn


# the formatter in C (optional: without a compiler at install time, the generated one is the path)
FORMATTER = native.OptionalModule("binlake.render._fastrender", 2)
