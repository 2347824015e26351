"""Keeps a schema history in step with a decoder: DDL events update it, and TABLE_MAPs without
metadata get their column names, signedness, charsets, ENUM/SET values and primary key from it.

Installed as a decoder observer (the sans-I/O core only calls it), so DDL is applied before the
next TABLE_MAP is completed and before any row of that table is decoded.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar

from binlake.errors import BinlogError
from binlake.events import SCHEMA_KINDS
from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.schema.ddl import is_ddl
from binlake.schema.history import NotUnderstood, Position, SchemaHistory, position_order
from binlake.schema.model import BINLOG_TYPES, TableDef
from binlake.statements import took_whole_effect
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
    """Replays DDL into ``history`` and names the columns of TABLE_MAPs that carry no names.

    Decoded table maps are shared (the decoder reuses one map for every transaction that maps the
    table with the same bytes), so they are never changed here: a map the history completes is
    replaced in its event by a named copy, made once per map and schema state and reused after.
    """

    history: SchemaHistory
    on_mismatch: str = "error"  # "error" | "positional" (leave @N names, keep going)
    mismatches: list[Mismatch] = field(default_factory=list)
    completed: int = 0
    # table id -> (map as decoded, schema generation, table definition, named copy or problem)
    _views: dict[int, tuple[TableMap, int, TableDef | None, TableMap | str | None]] = field(
        default_factory=dict, repr=False
    )
    _generation: int = field(default=0, repr=False)  # bumped by every DDL applied
    # Tables whose layout the history does not know before a position: a live server's catalog
    # seeds the history as of its binlog end, and these tables had DDL between where a read starts
    # and there — (database, table) -> the position of the last of it. A map of one without names
    # before that position keeps its @N names (and a Mismatch says so) rather than today's names.
    unknown_before: dict[tuple[str, str], Position] = field(default_factory=dict)
    # the events it is given by a decoder (``DecodeState.observers_of``): statements and table maps
    event_kinds: ClassVar[frozenset[int]] = SCHEMA_KINDS

    @property
    def generation(self) -> int:
        """How many DDL statements it applied: a TABLE_MAP named before names the same while it holds."""
        return self._generation

    def __call__(self, ev: Event) -> None:
        body = ev.body
        if body.__class__ is TableMap and not self.unknown_before:
            # most calls: a map named before under the same schema, without ``_complete``
            cached = self._current(body)
            if cached is not None:
                outcome = cached[3]
                if outcome is None:
                    return
                if outcome.__class__ is TableMap:
                    self.completed += 1
                    ev.body = outcome
                    return
        if isinstance(body, Query) and ev.inner_index is None and is_ddl(body.query):
            position = (os.path.basename(ev.source), ev.offset)
            # logged with 1051 (5.7's ``DROP TABLE t1, missing``) it did all it could, as the change
            # log reads it too; with another error code a part of it took effect, unknown which
            if not took_whole_effect(body.error_code):
                reason = f"logged with error {body.error_code}: it took part of its effect, unknown which"
                self.history.not_understood.append(NotUnderstood(position, body.query, reason))
                return
            self.history.apply(body.query, body.database, position, body.status.get("charset_database"))
            self._generation += 1
        elif isinstance(body, TableMap):
            ev.body = self._complete(ev, body)

    def name_events(self, events: list[Event]) -> None:
        """The same for events decoded without this tracker attached (a merged global transaction):
        each TABLE_MAP is replaced by its named view, and the rows events after it point at that
        view — the decoder does this itself when the tracker observes it. A DDL statement among
        them is replayed into the history, so the maps after it are named by the new schema."""
        named: dict[int, TableMap] = {}
        for e in events:
            b = e.body
            if isinstance(b, Query):
                self(e)
            elif isinstance(b, TableMap):
                self(e)
                named[id(b)] = e.body
            elif isinstance(b, Rows) and b.table is not None and id(b.table) in named:
                b.table = named[id(b.table)]

    def _mismatch(self, ev: Event, tm: TableMap, detail: str) -> None:
        m = Mismatch(ev.source, ev.offset, f"{tm.database}.{tm.table}", detail)
        self.mismatches.append(m)
        if self.on_mismatch == "error":
            raise SchemaMismatchError(
                f"table `{tm.database}`.`{tm.table}`: {detail} (to read on with its columns as @N:"
                " --schema-mismatch positional, or the binlog source's schemaMismatch=positional)",
                source=ev.source,
                offset=ev.offset,
            )

    def _current(self, tm: TableMap) -> tuple[TableMap, int, TableDef | None, TableMap | str | None] | None:
        """``_view``'s cached entry for ``tm`` while it holds: the same map, the same schema."""
        cached = self._views.get(tm.table_id)
        return cached if cached is not None and cached[0] is tm and cached[1] == self._generation else None

    def _view(self, tm: TableMap) -> tuple[TableDef | None, TableMap | str | None]:
        """The history's table and what it makes of ``tm``: a named copy, a problem, or None."""
        cached = self._current(tm)
        if cached is not None:
            return cached[2], cached[3]
        t = self.history.table(tm.database, tm.table)
        outcome: TableMap | str | None = None
        if t is not None:
            problem = _compare(t, tm)
            if any(c.name is not None for c in tm.columns):  # the binlog's own metadata wins; check it
                names = [c.name for c in tm.columns]
                if problem or [c.name.lower() for c in t.columns] != [n.lower() for n in names if n]:
                    outcome = problem or f"binlog names {names}, history {[c.name for c in t.columns]}"
            else:
                outcome = problem or named_view(tm, t)
        if len(self._views) >= 4096:
            self._views.clear()
        self._views[tm.table_id] = (tm, self._generation, t, outcome)
        return t, outcome

    def _complete(self, ev: Event, tm: TableMap) -> TableMap:
        until = self.unknown_before.get((tm.database, tm.table)) if self.unknown_before else None
        if until is not None and all(c.name is None for c in tm.columns):
            if position_order((os.path.basename(ev.source), ev.offset)) < position_order(until):
                detail = (
                    f"its DDL at {until[0]}:{until[1]} is after this map; the layout before it is not known"
                )
                if not any(
                    m.table == f"{tm.database}.{tm.table}" and m.detail == detail for m in self.mismatches
                ):
                    self.mismatches.append(
                        Mismatch(ev.source, ev.offset, f"{tm.database}.{tm.table}", detail)
                    )
                return tm
        t, outcome = self._view(tm)
        if t is None or outcome is None:
            return tm
        if isinstance(outcome, TableMap):
            self.completed += 1
            return outcome
        if any(c.name is not None for c in tm.columns):
            self.mismatches.append(Mismatch(ev.source, ev.offset, f"{tm.database}.{tm.table}", outcome))
        else:
            self._mismatch(ev, tm, outcome)
        return tm


def named_view(tm: TableMap, t: TableDef) -> TableMap:
    """A copy of ``tm`` with what the history knows and the binlog did not say (``tm`` untouched)."""
    columns = []
    for col, spec in zip(tm.columns, t.columns, strict=True):
        rt = col.real_type
        columns.append(
            dataclasses.replace(
                col,
                name=spec.name,
                unsigned=spec.unsigned if col.unsigned is None and rt in _NUMERIC else col.unsigned,
                collation=spec.collation if col.collation is None else col.collation,
                enum_values=spec.enum_values
                if rt == ColumnType.ENUM and col.enum_values is None
                else col.enum_values,
                set_values=spec.set_values
                if rt == ColumnType.SET and col.set_values is None
                else col.set_values,
            )
        )
    primary_key = list(tm.primary_key)
    if not primary_key and t.primary_key:
        primary_key = [t.index(k) for k in t.primary_key]
        for i in primary_key:
            columns[i].in_primary_key = True
    return tm.replaced(columns=columns, primary_key=primary_key)


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
