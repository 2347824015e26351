"""Keeps a schema history in step with a decoder: DDL events update it, and TABLE_MAPs without
metadata get their column names, signedness, charsets, ENUM/SET values and primary key from it.

Installed as a decoder observer (the sans-I/O core only calls it), so DDL is applied before the
next TABLE_MAP is completed and before any row of that table is decoded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.table_map import TableMap
from binlake.schema.ddl import is_ddl
from binlake.schema.history import SchemaHistory
from binlake.schema.model import BINLOG_TYPES, TableDef
from binlake.values.types import ColumnType


class SchemaMismatchError(BinlogError):
    """A row's table layout disagrees with the schema history (column count or types)."""


@dataclass
class Mismatch:
    file: str
    offset: int
    table: str
    detail: str


@dataclass
class SchemaTracker:
    history: SchemaHistory
    on_mismatch: str = "error"  # "error" | "positional" (leave @N names, keep going)
    mismatches: list[Mismatch] = field(default_factory=list)
    completed: int = 0

    def __call__(self, ev: Event) -> None:
        body = ev.body
        if isinstance(body, Query) and ev.inner_index is None and is_ddl(body.query) and not body.error_code:
            self.history.apply(
                body.query,
                body.database,
                (os.path.basename(ev.source), ev.offset),
                body.status.get("charset_database"),
            )
        elif isinstance(body, TableMap):
            self._complete(ev, body)

    def _mismatch(self, ev: Event, tm: TableMap, detail: str) -> None:
        m = Mismatch(ev.source, ev.offset, f"{tm.database}.{tm.table}", detail)
        self.mismatches.append(m)
        if self.on_mismatch == "error":
            raise SchemaMismatchError(
                f"table `{tm.database}`.`{tm.table}`: {detail} (use positional names to read on)",
                source=ev.source,
                offset=ev.offset,
            )

    def _complete(self, ev: Event, tm: TableMap) -> None:
        t = self.history.table(tm.database, tm.table)
        if t is None:
            return
        problem = _compare(t, tm)
        if any(c.name is not None for c in tm.columns):  # the binlog's own metadata wins; check it
            names = [c.name for c in tm.columns]
            if problem or [c.name.lower() for c in t.columns] != [n.lower() for n in names if n]:
                self.mismatches.append(
                    Mismatch(
                        ev.source,
                        ev.offset,
                        f"{tm.database}.{tm.table}",
                        problem or f"binlog names {names}, history {[c.name for c in t.columns]}",
                    )
                )
            return
        if problem:
            self._mismatch(ev, tm, problem)
            return
        for col, spec in zip(tm.columns, t.columns, strict=True):
            col.name = spec.name
            if col.unsigned is None and col.real_type in _NUMERIC:
                col.unsigned = spec.unsigned
            if col.collation is None:
                col.collation = spec.collation
            if col.real_type == ColumnType.ENUM and col.enum_values is None:
                col.enum_values = spec.enum_values
            if col.real_type == ColumnType.SET and col.set_values is None:
                col.set_values = spec.set_values
        if not tm.primary_key and t.primary_key:
            tm.primary_key = [t.index(k) for k in t.primary_key]
            for i in tm.primary_key:
                tm.columns[i].in_primary_key = True
        self.completed += 1


_NUMERIC = {
    ColumnType.TINY,
    ColumnType.SHORT,
    ColumnType.INT24,
    ColumnType.LONG,
    ColumnType.LONGLONG,
    ColumnType.YEAR,
    ColumnType.FLOAT,
    ColumnType.DOUBLE,
    ColumnType.NEWDECIMAL,
}


def _compare(t: TableDef, tm: TableMap) -> str | None:
    if len(t.columns) != len(tm.columns):
        return f"the binlog has {len(tm.columns)} columns, the schema history {len(t.columns)}"
    for col, spec in zip(tm.columns, t.columns, strict=True):
        allowed = BINLOG_TYPES.get(spec.type_name.replace("TEXT", "TEXT"), None)
        if allowed is not None and col.type_code not in allowed:
            return f"column {col.index + 1} is type {col.type_code} in the binlog, {spec.type_name} ({spec.name}) in the history"
    return None
