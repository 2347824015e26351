"""What an ``ADD COLUMN`` puts into the rows a table already holds, as its DDL says it.

The binlog logs an ``ALTER TABLE … ADD COLUMN`` as a statement: the rows the table held get the
column's default without a single row event. A target that only follows row events would keep NULL
there for ever. This module reads the column definition (sqlglot) into a ``ColumnDefault``: a literal
(its text, as the server would read it), NULL, the current time of the statement, the type's
implicit default (a NOT NULL column without DEFAULT), or unknown — an expression default, an
AUTO_INCREMENT or generated column: values only the server could compute, reported rather than guessed.
``binlake.columnfill`` turns it into the decoder's typed value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlglot import exp
else:  # imported when a column definition is first read
    from binlake.schema._sqlglot import exp


class DefaultKind(Enum):
    NULL = "null"
    LITERAL = "literal"  # ``text``: the literal as the server reads it (str, or bytes for 0x/b'' literals)
    NOW = "now"  # CURRENT_TIMESTAMP / NOW(): the time the statement ran; ``text`` its precision
    IMPLICIT = "implicit"  # NOT NULL without DEFAULT: 0, '', the first ENUM value, the zero date
    UNKNOWN = "unknown"  # ``text``: why


@dataclass(frozen=True)
class ColumnDefault:
    kind: DefaultKind
    text: str | bytes | int | None = None


_NOW_NAMES = {"NOW", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"}


@functools.cache
def _opaque() -> tuple[type, ...]:
    """Constraints whose value the server computes: the default of existing rows is not known."""
    return (
        exp.AutoIncrementColumnConstraint,
        exp.ComputedColumnConstraint,
        exp.GeneratedAsIdentityColumnConstraint,
    )


def column_default(cd: exp.ColumnDef, nullable: bool) -> ColumnDefault:
    """The value an ``ADD COLUMN`` of definition ``cd`` gives the rows a table holds."""
    default: exp.Expression | None = None
    for c in cd.args.get("constraints") or []:
        kind = c.args.get("kind")
        if isinstance(kind, _opaque()):
            return ColumnDefault(
                DefaultKind.UNKNOWN, f"{type(kind).__name__.removesuffix('ColumnConstraint')}"
            )
        if isinstance(kind, exp.DefaultColumnConstraint):
            default = kind.this
    if default is None:
        return ColumnDefault(DefaultKind.NULL if nullable else DefaultKind.IMPLICIT)
    return _default_of(default)


def _default_of(e: exp.Expression) -> ColumnDefault:
    if isinstance(e, exp.Null):
        return ColumnDefault(DefaultKind.NULL)
    if isinstance(e, exp.Introducer):  # _utf8mb4'x': a charset for the literal, same text
        e = e.expression
    if isinstance(e, exp.Boolean):
        return ColumnDefault(DefaultKind.LITERAL, "1" if e.this else "0")
    if isinstance(e, exp.Literal):
        return ColumnDefault(DefaultKind.LITERAL, str(e.this))
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        return ColumnDefault(DefaultKind.LITERAL, f"-{e.this.this}")
    if isinstance(e, exp.HexString):
        digits = str(e.this)
        return ColumnDefault(
            DefaultKind.LITERAL, bytes.fromhex(digits.rjust(len(digits) + len(digits) % 2, "0"))
        )
    if isinstance(e, exp.BitString):
        return ColumnDefault(DefaultKind.LITERAL, int(str(e.this) or "0", 2))
    if isinstance(e, exp.CurrentTimestamp) or (
        isinstance(e, exp.Anonymous) and str(e.this).upper() in _NOW_NAMES and not e.expressions
    ):
        fsp = e.this if isinstance(e, exp.CurrentTimestamp) else None
        return ColumnDefault(DefaultKind.NOW, int(fsp.this) if isinstance(fsp, exp.Literal) else 0)
    return ColumnDefault(DefaultKind.UNKNOWN, f"the expression {e.sql(dialect='mysql')[:60]}")
