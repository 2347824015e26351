"""The renames a DDL statement makes: tables (RENAME TABLE, ALTER TABLE … RENAME TO) and columns
(RENAME COLUMN, CHANGE old new), and the names DROP TABLE frees. Pipelines carry them so targets
follow the source's names instead of starting new tables and columns."""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from binlake.schema.ddl import parse_statement, rename_table_pairs, table_key, truncated_table

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
    table: TableName  # the table's name when the rename applies (the statement runs; a sink's step runs)
    old: str
    new: str


@dataclass(frozen=True)
class TableDrop:
    table: TableName  # a name free from here on: a later table of this name is another table


Rename = TableRename | ColumnRename | TableDrop
_DROP_TABLE = re.compile(r"^\s*DROP\s+TABLES?\b", re.I)


def renames_in(sql: str, default_db: str) -> list[Rename]:
    """The renames of one statement in the order they take effect (an ALTER renames its columns
    before the table). Statements that rename nothing, or that cannot be parsed, give []: the schema
    history reports what it cannot apply."""
    pairs = rename_table_pairs(sql, default_db)
    if pairs is not None:
        return [TableRename(old, new) for old, new in pairs]
    truncated = truncated_table(sql, default_db)
    if truncated is not None:  # rows gone without row events: like a drop and a new empty table
        return [TableDrop(truncated)]
    if _DROP_TABLE.match(sql):  # not DROP TEMPORARY TABLE: temporary tables have no row changes
        try:
            stmt = parse_statement(sql)
        except sqlglot.errors.SqlglotError:
            return []
        return [TableDrop(table_key(t, default_db)) for t in stmt.args.get("tables") or [stmt.this]]
    if not _ALTER_RENAMING.match(sql):
        return []  # cheap: most DDL renames nothing, and sqlglot is slow
    try:
        stmt = parse_statement(sql)
    except sqlglot.errors.SqlglotError:
        return []
    if not isinstance(stmt, exp.Alter) or not isinstance(stmt.this, exp.Table):
        return []
    table = table_key(stmt.this, default_db)
    columns: list[Rename] = []
    moved: list[Rename] = []
    for action in stmt.args.get("actions") or []:
        if isinstance(action, exp.RenameColumn):
            old, new = action.this.name, action.args["to"].name
        elif isinstance(action, exp.ModifyColumn) and action.args.get("rename_from") is not None:
            old, new = action.args["rename_from"].name, action.this.name
        elif isinstance(action, exp.AlterRename):
            moved.append(TableRename(table, table_key(action.this, table[0])))
            continue
        else:
            continue
        if old != new:
            columns.append(ColumnRename(table, old, new))
    return columns + moved
