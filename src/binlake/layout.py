"""A table's columns as row changes carry them: the layout every consumer of a change types its
values by (the binlog's metadata, the schema history, a server's catalog or a DDL statement give it).
Kept apart from ``binlake.changes`` so what builds layouts (snapshots, DDL) needs nothing else."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Column:
    """A column as the binlog's metadata or the schema history gave it. ``values``: the names of an
    ENUM or SET column when known."""

    name: str
    type: int  # ColumnType, the real type (ENUM/SET as themselves, not STRING)
    meta: int
    unsigned: bool | None
    collation: int | None
    pk: bool
    values: tuple[str, ...] | None = None

    @property
    def real_type(self) -> int:
        """``type`` under ``ColumnDef``'s name, so value formatters take either."""
        return self.type


Layout = tuple[Column, ...]
