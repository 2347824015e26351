"""Row images as JSON objects, by a formatter generated once per table layout.

The reference is ``json.dumps({label: json_value(v, col)})`` (``render.values.json_value``: the
change log's encoding), one Python call per value and a dict per image. This module compiles, for
each layout (labels, types, metadata), one function that writes the whole object in one
concatenation: the quoted labels are constants, integers, DOUBLE, DECIMAL, strings, binary strings,
temporal values and JSON documents are encoded inline, behind a class check of the value, and
everything else (FLOAT's float32 text, ENUM/SET, BIT, VECTOR, partial JSON, zero dates, an
unexpected value type) goes through the reference for its column. An image with a column it does
not carry (``ABSENT``: MINIMAL/NOBLOB row images) and a layout with two equal labels take the
reference as a whole. Tests hold the two equal on the corpus and generated series.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

from binlake.events.rows import ABSENT
from binlake.render import joined
from binlake.render.joined import Slot
from binlake.render.values import FORMAT_ENV, TypedColumn, float32_text, json_value
from binlake.values.types import INTEGER_TYPES, ColumnType

ImageJson = Callable[[Sequence[Any]], str]
"""The JSON object of one row image (list or tuple, one slot per column)."""

ENCODER = json.JSONEncoder(ensure_ascii=False)  # json.dumps(…, ensure_ascii=False), built once
encode = ENCODER.encode
quote = json.encoder.encode_basestring  # type: ignore[attr-defined]  # what the encoder quotes str with

_STRINGS = joined.STRINGS
_INTEGERS = INTEGER_TYPES | {ColumnType.BIT}

# inline expressions of a non-NULL value ``v`` by column type (``r`` names the reference for the
# column, ``m`` is the column's metadata). Each checks the value's class first: a column's values are
# not all of one Python type (zero dates, ENUM indexes, undecodable strings); the reference knows
# the others.
Inline = Callable[[str, str, int], str]


def _string(v: str, r: str, m: int) -> str:
    b64 = f"'{{\"base64\": \"' + B64({v}).decode() + '\"}}'"
    return f"(Q({v}) if {v}.__class__ is str else {b64} if {v}.__class__ is bytes else {r}({v}))"


_ISO_SPECS = {0: "seconds", 3: "milliseconds", 6: "microseconds"}  # isoformat truncates as format_datetime


def _datetime(fsp: bool) -> Inline:
    """A naive datetime by ``isoformat`` when its fractional digits are one of its specs (its year
    is always 4 digits, as ``format_datetime`` writes it); the rest by ``format_datetime``."""

    def expr(v: str, r: str, m: int) -> str:
        digits = m if fsp else 0
        spec = _ISO_SPECS.get(digits)
        if spec is None:
            return f"('\"' + FDT({v}, {digits}) + '\"' if {v}.__class__ is DT else {r}({v}))"
        return (
            f"('\"' + {v}.isoformat(' ', {spec!r}) + '\"' if {v}.__class__ is DT and {v}.tzinfo is None "
            f"else '\"' + FDT({v}, {digits}) + '\"' if {v}.__class__ is DT else {r}({v}))"
        )

    return expr


def _time(fsp: bool) -> Inline:
    return lambda v, r, m: f"('\"' + FT({v}, {m if fsp else 0}) + '\"' if {v}.__class__ is TD else {r}({v}))"


def _date(v: str, r: str, m: int) -> str:
    return f"('\"' + FD({v}) + '\"' if {v}.__class__ is DATE else {r}({v}))"


_INLINE: dict[int, Inline] = {
    **dict.fromkeys(_INTEGERS, lambda v, r, m: f"(str({v}) if {v}.__class__ is int else {r}({v}))"),
    # float32 as the shortest text that reads back as the same float32 (values.float32_text), as a number
    ColumnType.FLOAT: lambda v, r, m: (
        f"(repr(float(F32({v}))) if {v}.__class__ is float and {v} - {v} == 0.0 else {r}({v}))"
    ),
    # a finite float prints as its repr (v - v is 0.0 for finite values only)
    ColumnType.DOUBLE: lambda v, r, m: (
        f"(repr({v}) if {v}.__class__ is float and {v} - {v} == 0.0 else {r}({v}))"
    ),
    ColumnType.NEWDECIMAL: lambda v, r, m: (
        f"('\"' + format({v}, 'f') + '\"' if {v}.__class__ is DEC else {r}({v}))"
    ),
    **dict.fromkeys(_STRINGS, _string),
    ColumnType.JSON: lambda v, r, m: f"(Q({v}.text()) if {v}.__class__ is JSON else {r}({v}))",
    ColumnType.ENUM: lambda v, r, m: f"(Q({v}) if {v}.__class__ is str else {r}({v}))",
    # a SET of known names is a tuple of them (unknown names: the bitmask, an int)
    ColumnType.SET: lambda v, r, m: (
        f"('[' + ', '.join(map(Q, {v})) + ']' if {v}.__class__ is tuple else {r}({v}))"
    ),
    ColumnType.DATETIME: _datetime(False),
    ColumnType.TIMESTAMP: _datetime(False),
    ColumnType.DATETIME2: _datetime(True),
    ColumnType.TIMESTAMP2: _datetime(True),
    ColumnType.DATE: _date,
    ColumnType.NEWDATE: _date,
    ColumnType.TIME: _time(False),
    ColumnType.TIME2: _time(True),
}

_ENV: dict[str, Any] = {
    **FORMAT_ENV,
    "ABSENT": ABSENT,
    "Q": quote,
    "B64": base64.b64encode,
    "F32": float32_text,
}


def reference_image_json(labels: Sequence[str], columns: Sequence[TypedColumn]) -> ImageJson:
    """The per-value path: a dict of ``json_value``s, encoded (what the generated code equals)."""

    def image_json(image: Sequence[Any]) -> str:
        return encode(
            {k: json_value(v, c) for k, c, v in zip(labels, columns, image, strict=True) if v is not ABSENT}
        )

    return image_json


def value_expr(i: int, col: TypedColumn) -> str:
    """The expression of value ``v{i}`` (NULL included) in the generated code."""
    v, r = f"v{i}", f"R{i}"
    build = _INLINE.get(col.real_type)
    return f"('null' if {v} is None else {build(v, r, col.meta) if build else f'{r}({v})'})"


def _op(col: TypedColumn) -> tuple[str, int, Any]:
    """How the compiled formatter (``render._fastjoin``) writes a value of this column."""
    return joined.column_op(col.real_type, col.meta, _INTEGERS, 1)


def compile_image_json(
    labels: Sequence[str], columns: Sequence[TypedColumn], compiled: bool = False
) -> ImageJson:
    """One function writing the JSON object of an image of these columns; with ``compiled``, the
    C formatter of the same concatenation (``render.joined``), which calls it for what it does
    not take."""
    reference = reference_image_json(labels, columns)
    n = len(columns)
    if len(set(labels)) != n or n == 0:  # a dict keeps one of two equal labels: the reference knows where
        return reference
    env = dict(_ENV, REF=reference)
    parts = []
    slow: list[str] = []  # per column, the expression of a non-NULL value (the compiled one's ``slow``)
    for i, (label, col) in enumerate(zip(labels, columns, strict=True)):
        env[f"R{i}"] = lambda v, col=col: encode(json_value(v, col))
        env[f"K{i}"] = ("{" if i == 0 else ", ") + quote(label) + ": "
        parts += [f"K{i}", value_expr(i, col)]
        build = _INLINE.get(col.real_type)
        slow += [
            f"def slow{i}(v{i}):",
            f"    return {build(f'v{i}', f'R{i}', col.meta) if build else f'R{i}(v{i})'}",
        ]
    names = ", ".join(f"v{i}" for i in range(n))
    absent = " or ".join(f"v{i} is ABSENT" for i in range(n))
    code = "\n".join(
        [
            "def image_json(image):",
            f"    {names}{',' if n == 1 else ''} = image",
            f"    if {absent}:",
            "        return REF(image)",
            f"    return ''.join(({', '.join(parts)}, '}}'))",  # flat: no nesting however wide
            *slow,
        ]
    )
    exec(compile(code, f"<row json of {n} columns>", "exec"), env)  # noqa: S102
    fn: ImageJson = env["image_json"]
    if not compiled:
        return fn
    slots = [Slot(env[f"K{i}"], 0, i, *_op(col), env[f"slow{i}"]) for i, col in enumerate(columns)]
    return joined.joined(slots, "}", n, 1, "json", fn)


def _layout_key(labels: Sequence[str], columns: Sequence[TypedColumn]) -> tuple[Any, ...]:
    """What the JSON of a value depends on: its label, the column's type and metadata."""
    return tuple(labels), tuple((c.real_type, c.meta) for c in columns)


class ImageJsonCache:
    """Formatters by layout object (a decoder's table map, a change's layout tuple: both reused
    while the table does not change), then by layout (equal layouts share one formatter)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._by_object: dict[tuple[int, bool], tuple[Any, ImageJson]] = {}
        self._by_layout: dict[tuple[Any, ...], ImageJson] = {}

    def get(
        self, owner: Any, labels: Callable[[], Sequence[str]], columns: Sequence[TypedColumn]
    ) -> ImageJson:
        """The formatter of ``owner`` (kept alive with it, so its id is not reused meanwhile)."""
        compiled = joined.FORMATTER.chosen
        hit = self._by_object.get((id(owner), compiled))
        if hit is not None and hit[0] is owner:
            return hit[1]
        names = labels()
        key = (_layout_key(names, columns), compiled)
        fn = self._by_layout.get(key)
        if fn is None:
            if len(self._by_layout) >= self.limit:
                self._by_layout.clear()
            fn = self._by_layout[key] = compile_image_json(names, columns, compiled)
        if len(self._by_object) >= self.limit:
            self._by_object.clear()
        self._by_object[(id(owner), compiled)] = (owner, fn)
        return fn
