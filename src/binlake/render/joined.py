"""The compiled JSON and SQL row formatters (``render._fastjoin``): whether they are used, and the
slot of one value in their plan.

``jsonrow`` and ``sqlrow`` generate one Python function per layout writing a concatenation of
constants and value expressions; with the compiled module built, current and chosen
(``native.use_compiled``; ``BINLAKE_PURE=1`` chooses the generated functions), they hand the same
concatenation to C as data (``Slot``s), with each column's generated expression as its ``slow``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from binlake import native
from binlake.events.rows import ABSENT
from binlake.values.json_binary import Json
from binlake.values.numeric import bit_length
from binlake.values.types import BLOB_TYPES, ColumnType

STRINGS = frozenset({ColumnType.VARCHAR, ColumnType.STRING, ColumnType.VAR_STRING, *BLOB_TYPES})
_FIXED: dict[int, tuple[str, int, Any]] = {
    **dict.fromkeys(STRINGS, ("str", 1, None)),  # bytes too: base64 (JSON), X'hex' (SQL)
    ColumnType.ENUM: ("str", 0, None),
    ColumnType.JSON: ("json", 0, Json),
    ColumnType.DATE: ("date", 0, None),
    ColumnType.NEWDATE: ("date", 0, None),
}
_DATETIMES = {ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.DATETIME2, ColumnType.TIMESTAMP2}
_TIMES = {ColumnType.TIME, ColumnType.TIME2}
_NO_FSP = {ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME}  # the old types: meta is no fsp


def column_op(t: int, m: int, integers: frozenset[int], quoted: int) -> tuple[str, int, Any]:
    """How ``render._fastjoin`` writes a value of real type ``t`` (meta ``m``): the operation
    name, its integer, its object, as the generated formatters' inline expressions do for the
    classes C takes; ``slow`` for the rest. ``integers``: the types written as integers;
    ``quoted``: DOUBLE and DECIMAL are quoted (JSON) or not (SQL)."""
    if t in integers:
        return ("int", 0, None)
    if t == ColumnType.BIT:  # SQL's b'...' (JSON writes BIT as an integer)
        return ("bit", max(bit_length(m), 1), None)
    if t == ColumnType.DOUBLE:
        return ("float", quoted, None)  # finite ones
    if t == ColumnType.FLOAT:
        return ("float32", quoted, None)  # JSON: finite ones, as numbers
    if t == ColumnType.NEWDECIMAL:
        return ("decimal", quoted, Decimal)
    if t in _FIXED:
        return _FIXED[t]
    fsp = 0 if t in _NO_FSP else m
    if t in _DATETIMES and fsp <= 6:
        return ("datetime", fsp, None)
    if t in _TIMES and fsp <= 6:
        return ("time", fsp, None)
    return ("slow", 0, None)


class Slot(NamedTuple):
    """One value of the text: the constant before it, where it is (image, column), how C writes it
    (operation name, integer, object) and the generated expression of its column (``slow``)."""

    before: str
    image: int
    column: int
    op: str
    arg: int
    aux: Any
    slow: Callable[[Any], str]


def joined(
    slots: Sequence[Slot],
    tail: str,
    width: int,
    nimages: int,
    dialect: str,
    fallback: Callable[..., str],
    reject: type | None = None,
    reject_columns: Sequence[int] = (),
) -> Callable[..., str]:
    """The compiled formatter of this plan, which calls ``fallback`` (the generated function, same
    arguments) for the images it does not take; ``fallback`` itself when it is not built. The
    caller asked for it (``FORMATTER.chosen``, or a test holding the two equal)."""
    fast = FORMATTER.built
    if fast is None:
        return fallback
    ops = fast.OPS
    return fast.Joined(  # type: ignore[no-any-return]
        [(s.before, s.image, s.column, ops[s.op], s.arg, s.aux, s.slow) for s in slots],
        tail,
        width,
        nimages,
        dialect,
        ABSENT,
        reject,
        tuple(reject_columns),
        fallback,
    )


def event_json(*parts: Any) -> Any:
    """The compiled writer of whole JSON event lines (``render._fastjoin.EventJson``, built from
    ``jsonl.render_jsonl_bytes``' pure ``parts``), or None when not compiled."""
    fast = FORMATTER.module
    return None if fast is None else fast.EventJson(*parts)


def sql_blocks(*parts: Any) -> Any:
    """The compiled writer of whole redo/flashback SQL blocks (``render._fastjoin.SqlBlocks``,
    built from ``sql.render_sql_bytes``' pure parts), or None when not compiled."""
    fast = FORMATTER.module
    return None if fast is None else fast.SqlBlocks(*parts)


# optional: without a compiler at install time, the generated functions are the path
FORMATTER = native.OptionalModule("binlake.render._fastjoin", 4)
