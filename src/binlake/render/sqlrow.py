"""Redo/flashback statements of row images, by formatters generated once per table layout.

The reference is ``render.sql``'s ``_insert``/``_update``/``_delete`` (one ``literal`` call per value,
quoting per character). This module compiles, for each table map (names, types, metadata, primary
key), an INSERT, an UPDATE and a DELETE function that write a whole statement in one
concatenation: identifiers, ``<=>`` conditions and separators are constants, the WHERE columns
are chosen once (the primary key, else the comparable columns), and integers, DOUBLE, DECIMAL,
strings, binary strings, temporal values and JSON documents are written inline behind a class
check, BIT, SET and FLOAT too. Everything else (GEOMETRY, VECTOR, zero dates, an unexpected value
type) calls ``literal`` for its column; an image with an ``ABSENT`` column or a partial JSON
update takes the reference as a whole. Tests hold the two equal on the corpus and generated series.
With the compiled formatter (``render._fastjoin``), the same concatenation is handed to C as data,
and the generated functions are compiled only when C first calls them (most layouts never do).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from binlake.dialects.mysql import quote_ident, quote_str
from binlake.events.rows import ABSENT, PartialJson
from binlake.events.table_map import TableMap
from binlake.render import joined
from binlake.render.joined import Slot
from binlake.render.values import FORMAT_ENV, float32_text
from binlake.values.columns import ColumnDef
from binlake.values.numeric import bit_length
from binlake.values.plan import layout_signature
from binlake.values.types import INTEGER_TYPES, ColumnType

Image = list[Any]
Literal = Callable[[Any, ColumnDef], str]

# ``quote_str`` escapes only these: text without them is quoted as is
_NEEDS_ESCAPE = re.compile("[\\\\'\x00\n\r\x1a]").search

_INTEGERS = INTEGER_TYPES
_STRINGS = joined.STRINGS
# Values that never compare equal to their own literal (as ``render.sql``): float32, JSON, geometry.
NOT_COMPARABLE = frozenset({ColumnType.FLOAT, ColumnType.JSON, ColumnType.GEOMETRY})


def quote(text: str) -> str:
    """``quote_str(text)``, without a per-character loop when nothing needs escaping."""
    return "'" + text + "'" if _NEEDS_ESCAPE(text) is None else quote_str(text)


def _quoted(v: str) -> str:
    """``quote_str(v)`` inline (``v`` names a ``str``)."""
    return f'("\'" + {v} + "\'" if ESC({v}) is None else QS({v}))'


def _string(v: str, r: str, m: int) -> str:
    return f'({_quoted(v)} if {v}.__class__ is str else "X\'" + {v}.hex() + "\'" if {v}.__class__ is bytes else {r})'


def _datetime(fsp: bool) -> Callable[[str, str, int], str]:
    # the text of a datetime has nothing to escape
    return lambda v, r, m: f'("\'" + FDT({v}, {m if fsp else 0}) + "\'" if {v}.__class__ is DT else {r})'


def _time(fsp: bool) -> Callable[[str, str, int], str]:
    return lambda v, r, m: f'("\'" + FT({v}, {m if fsp else 0}) + "\'" if {v}.__class__ is TD else {r})'


def _json(v: str, r: str, m: int) -> str:
    return f"(Q({v}.text()) if {v}.__class__ is JSON else {r})"


def _enum(v: str, r: str, m: int) -> str:
    """An ENUM's name, or its index when the names are unknown."""
    return f"({_quoted(v)} if {v}.__class__ is str else str({v}) if {v}.__class__ is int else {r})"


# inline expressions of a non-NULL value ``v`` by column type (``r``: the reference call, ``m``: meta)
_INLINE: dict[int, Callable[[str, str, int], str]] = {
    **dict.fromkeys(_INTEGERS, lambda v, r, m: f"(str({v}) if {v}.__class__ is int else {r})"),
    ColumnType.DOUBLE: lambda v, r, m: f"(repr({v}) if {v}.__class__ is float else {r})",
    ColumnType.NEWDECIMAL: lambda v, r, m: f"(format({v}, 'f') if {v}.__class__ is DEC else {r})",
    **dict.fromkeys(_STRINGS, _string),
    ColumnType.DATETIME: _datetime(False),
    ColumnType.TIMESTAMP: _datetime(False),
    ColumnType.DATETIME2: _datetime(True),
    ColumnType.TIMESTAMP2: _datetime(True),
    ColumnType.DATE: lambda v, r, m: f'("\'" + FD({v}) + "\'" if {v}.__class__ is DATE else {r})',
    ColumnType.NEWDATE: lambda v, r, m: f'("\'" + FD({v}) + "\'" if {v}.__class__ is DATE else {r})',
    ColumnType.TIME: _time(False),
    ColumnType.TIME2: _time(True),
    ColumnType.JSON: _json,
    ColumnType.ENUM: _enum,
    # SET: a tuple of its names (the bitmask when they are unknown: the reference)
    ColumnType.SET: lambda v, r, m: f"(Q(','.join({v})) if {v}.__class__ is tuple else {r})",
    ColumnType.BIT: lambda v, r, m: (
        f"(\"b'\" + format({v}, '0{max(bit_length(m), 1)}b') + \"'\" if {v}.__class__ is int else {r})"
    ),
    ColumnType.FLOAT: lambda v, r, m: f"(F32({v}) if {v}.__class__ is float else {r})",
}

_ENV: dict[str, Any] = {
    **FORMAT_ENV,
    "ABSENT": ABSENT,
    "PJ": PartialJson,
    "ESC": _NEEDS_ESCAPE,
    "QS": quote_str,
    "Q": quote,
    "F32": float32_text,
}


@dataclass(frozen=True, slots=True)
class RowSql:
    """The statements of one table layout: ``insert(after)``, ``delete(before)``,
    ``update(where_image, set_image)``."""

    insert: Callable[[Image], str]
    delete: Callable[[Image], str]
    update: Callable[[Image, Image], str]


def where_columns(tm: TableMap) -> list[int]:
    """The WHERE columns of an image that carries every column (``render.sql._where``'s choice)."""
    if tm.primary_key:
        return list(tm.primary_key)
    comparable = [c.index for c in tm.columns if c.real_type not in NOT_COMPARABLE]
    return comparable or [c.index for c in tm.columns]


def _op(col: ColumnDef) -> tuple[str, int, Any]:
    """How the compiled formatter (``render._fastjoin``) writes a value of this column (SQL's SET:
    its names joined and quoted)."""
    if col.real_type == ColumnType.SET:
        return ("set", 0, None)
    return joined.column_op(col.real_type, col.meta, _INTEGERS, 0)


def compile_row_sql(
    tm: TableMap,
    insert: Callable[[TableMap, Image], str],
    delete: Callable[[TableMap, Image], str],
    update: Callable[[TableMap, Image, Image], str],
    literal: Literal,
    compiled: bool = False,
) -> RowSql:
    """Generated statements of ``tm``'s layout; ``insert``/``delete``/``update``/``literal`` are the
    reference (``render.sql``), called for what the generated code does not write itself. With
    ``compiled``, the C formatters of the same concatenations (``render.joined``), which call the
    generated functions for what they do not take."""
    cols = tm.columns
    n = len(cols)
    keys = where_columns(tm)
    if (
        n == 0 or any(not 0 <= i < n for i in keys) or any(c.index != i for i, c in enumerate(cols))
    ):  # nothing to generate: the reference says what it says
        return RowSql(lambda a: insert(tm, a), lambda b: delete(tm, b), lambda w, s: update(tm, w, s))
    env: dict[str, Any] = dict(_ENV, TM=tm, REF_I=insert, REF_D=delete, REF_U=update)
    table = f"{quote_ident(tm.database)}.{quote_ident(tm.table)}"
    names = [quote_ident(c.name or "") for c in cols]
    json_cols = [c.index for c in cols if c.real_type == ColumnType.JSON]

    def lit(i: int, var: str) -> str:
        """The literal of column ``i`` held in variable ``var``."""
        col = cols[i]
        env[f"L{i}"] = lambda v, col=col: literal(v, col)
        ref = f"L{i}({var})"
        build = _INLINE.get(col.real_type)
        return f"('NULL' if {var} is None else {build(var, ref, col.meta) if build else ref})"

    def unpack(prefix: str, image: str) -> str:
        return f"    {', '.join(f'{prefix}{i}' for i in range(n))}{',' if n == 1 else ''} = {image}"

    def absent(prefix: str, partial: bool) -> str:
        tests = [f"{prefix}{i} is ABSENT" for i in range(n)]
        if partial:
            tests += [f"{prefix}{i}.__class__ is PJ" for i in json_cols]
        return " or ".join(tests)

    def where(prefix: str) -> list[str]:
        parts: list[str] = []
        for k, i in enumerate(keys):
            env[f"W{k}"] = (" AND " if k else "") + f"{names[i]} <=> "
            parts += [f"W{k}", lit(i, f"{prefix}{i}")]
        return parts

    env["HI"] = f"INSERT INTO {table} ({', '.join(names)}) VALUES ("
    env["HU"] = f"UPDATE {table} SET "
    env["HD"] = f"DELETE FROM {table} WHERE "
    for i in range(n):
        env[f"S{i}"] = (", " if i else "") + f"{names[i]} = "
    insert_parts = [x for i in range(n) for x in ((["', '"] if i else []) + [lit(i, f"a{i}")])]
    set_parts = [x for i in range(n) for x in (f"S{i}", lit(i, f"s{i}"))]
    code = "\n".join(
        [
            "def insert(a):",
            unpack("a", "a"),
            f"    if {absent('a', False)}: return REF_I(TM, a)",
            f"    return ''.join((HI, {', '.join(insert_parts)}, ');'))",
            "def delete(b):",
            unpack("w", "b"),
            f"    if {absent('w', True)}: return REF_D(TM, b)",
            f"    return ''.join((HD, {', '.join(where('w'))}, ' LIMIT 1;'))",
            "def update(w, s):",
            unpack("w", "w"),
            unpack("s", "s"),
            f"    if {absent('w', True)} or {absent('s', True)}: return REF_U(TM, w, s)",
            f"    return ''.join((HU, {', '.join(set_parts)}, ' WHERE ', {', '.join(where('w'))}, ' LIMIT 1;'))",
        ]
    )
    slow = [x for i in range(n) for x in (f"def slow{i}(v):", f"    return {lit(i, 'v')}")]
    generated = _Generated("\n".join([code, *slow]), f"<row sql of {n} columns>", env)
    if not compiled or joined.FORMATTER.built is None:
        generated.run()
        return RowSql(env["insert"], env["delete"], env["update"])

    def slot(before: str, image: int, i: int) -> Slot:
        return Slot(before, image, i, *_op(cols[i]), generated.function(f"slow{i}"))

    wheres = [((" AND " if k else "") + f"{names[i]} <=> ", i) for k, i in enumerate(keys)]
    inserts = [slot((env["HI"] if i == 0 else ", "), 0, i) for i in range(n)]
    deletes = [slot((env["HD"] if k == 0 else "") + w, 0, i) for k, (w, i) in enumerate(wheres)]
    sets = [slot((env["HU"] if i == 0 else "") + env[f"S{i}"], 1, i) for i in range(n)]
    sets += [slot((" WHERE " if k == 0 else "") + w, 0, i) for k, (w, i) in enumerate(wheres)]
    return RowSql(
        joined.joined(inserts, ");", n, 1, "sql", generated.function("insert")),
        # a partial JSON update in DELETE's or UPDATE's images: the reference as a whole
        joined.joined(deletes, " LIMIT 1;", n, 1, "sql", generated.function("delete"), PartialJson, json_cols),
        joined.joined(sets, " LIMIT 1;", n, 2, "sql", generated.function("update"), PartialJson, json_cols),
    )


class _Generated:
    """A layout's generated functions, compiled when first called. The compiled formatter calls
    them only for what it does not write itself (a value class or an image it does not take), so
    most layouts never compile them: ``compile`` was about 1.3 ms per layout, 5 % of ``sql`` on the
    benchmark series."""

    def __init__(self, source: str, filename: str, env: dict[str, Any]) -> None:
        self.source, self.filename, self.env = source, filename, env
        self.ready = False

    def run(self) -> None:
        if not self.ready:
            exec(compile(self.source, self.filename, "exec"), self.env)  # noqa: S102
            self.ready = True

    def function(self, name: str) -> Callable[..., str]:
        """``name`` of the generated code, compiled on the first call."""
        env = self.env

        def call(*args: Any) -> str:
            if not self.ready:
                self.run()
            return env[name](*args)  # type: ignore[no-any-return]

        return call


def _layout_key(tm: TableMap) -> tuple[Any, ...]:
    """What the statements depend on: the table's names, the columns' names, types and metadata,
    the primary key."""
    return (
        tm.database,
        tm.table,
        layout_signature(tm.columns),
        tuple(c.name for c in tm.columns),
        tuple(tm.primary_key),
    )


class RowSqlCache:
    """Formatters by table map object (the decoder reuses maps), then by layout; compiled ones
    apart (``render.joined``: chosen per formatter made)."""

    def __init__(self, build: Callable[[TableMap, bool], RowSql], limit: int = 4096) -> None:
        self.build = build
        self.limit = limit
        self._by_map: dict[tuple[int, bool], tuple[TableMap, RowSql]] = {}
        self._by_layout: dict[tuple[Any, ...], RowSql] = {}

    def get(self, tm: TableMap) -> RowSql:
        compiled = joined.FORMATTER.chosen
        hit = self._by_map.get((id(tm), compiled))
        if hit is not None and hit[0] is tm:
            return hit[1]
        key = (_layout_key(tm), compiled)
        fns = self._by_layout.get(key)
        if fns is None:
            if len(self._by_layout) >= self.limit:
                self._by_layout.clear()
            fns = self._by_layout[key] = self.build(tm, compiled)
        if len(self._by_map) >= self.limit:
            self._by_map.clear()
        self._by_map[(id(tm), compiled)] = (tm, fns)
        return fns
