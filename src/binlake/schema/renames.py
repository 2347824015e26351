"""The renames a DDL statement makes: tables (RENAME TABLE, ALTER TABLE … RENAME TO) and columns
(RENAME COLUMN, CHANGE old new). Pipelines carry them so targets follow the source's names instead
of starting new tables and columns."""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from binlake.schema.ddl import parse_statement, rename_table_pairs

TableName = tuple[str, str]  # (database, table)

_ALTER_RENAMING = re.compile(
    r"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\b.*\b(?:RENAME|CHANGE)\b", re.I | re.S
)


@dataclass(frozen=True)
class TableRename:
    old: TableName
    new: TableName


@dataclass(frozen=True)
class ColumnRename:
    table: TableName  # the table's name when the statement ran
    old: str
    new: str


Rename = TableRename | ColumnRename


def renames_in(sql: str, default_db: str) -> list[Rename]:
    """The renames of one statement in the order they take effect (an ALTER renames its columns
    before the table). Statements that rename nothing, or that cannot be parsed, give []: the schema
    history reports what it cannot apply."""
    pairs = rename_table_pairs(sql, default_db)
    if pairs is not None:
        return [TableRename(old, new) for old, new in pairs]
    if not _ALTER_RENAMING.match(sql):
        return []  # cheap: most DDL renames nothing, and sqlglot is slow
    try:
        stmt = parse_statement(sql)
    except sqlglot.errors.SqlglotError:
        return []
    if not isinstance(stmt, exp.Alter) or not isinstance(stmt.this, exp.Table):
        return []
    table = _name(stmt.this, default_db)
    columns: list[Rename] = []
    moved: list[Rename] = []
    for action in stmt.args.get("actions") or []:
        if isinstance(action, exp.RenameColumn):
            old, new = action.this.name, action.args["to"].name
        elif isinstance(action, exp.ModifyColumn) and action.args.get("rename_from") is not None:
            old, new = action.args["rename_from"].name, action.this.name
        elif isinstance(action, exp.AlterRename):
            moved.append(TableRename(table, _name(action.this, table[0])))
            continue
        else:
            continue
        if old != new:
            columns.append(ColumnRename(table, old, new))
    return columns + moved


def _name(t: exp.Table, default_db: str) -> TableName:
    return (t.args["db"].name if t.args.get("db") else default_db, t.name)
