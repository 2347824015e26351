"""What a DDL statement does to the tables and rows a target already holds: the renames of tables
(RENAME TABLE, ALTER TABLE … RENAME TO) and columns (RENAME COLUMN, CHANGE old new), the names
DROP TABLE and TRUNCATE free, and the columns ADD COLUMN gives every existing row (with the value
``schema.defaults`` reads). Pipelines carry them so targets follow the source's names instead of
starting new tables and columns, and hold the source's values in rows no row event touched. Which
statement does what is ``statements.classify``'s answer; only column changes need sqlglot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlglot
    from sqlglot import exp
else:  # imported when a column change is first parsed
    from binlake.schema._sqlglot import exp, sqlglot

from binlake.schema.ddl import column_spec, parse_statement
from binlake.schema.defaults import ColumnDefault, DefaultKind, column_default
from binlake.schema.model import ColumnSpec
from binlake.statements import Ddl, Statement, TableName, classify


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


@dataclass(frozen=True)
class ColumnAdd:
    table: TableName  # the table's name when the statement runs
    column: ColumnSpec  # without the table's charset (the statement does not say it)
    default: ColumnDefault  # what every row the table held gets


Rename = TableRename | ColumnRename | TableDrop | ColumnAdd


def renames_in(sql: str, default_db: str) -> list[Rename]:
    """The renames of one statement in the order they take effect (an ALTER renames its columns
    before the table). Statements that rename nothing give []; column renames sqlglot cannot parse
    are left out (the schema history reports what it cannot apply)."""
    return renames_of(classify(sql, default_db), sql)


def renames_of(st: Statement, sql: str) -> list[Rename]:
    """``renames_in`` for a statement already classified."""
    if st.ddl is Ddl.RENAME_TABLE:
        return [TableRename(old, new) for old, new in st.renames]
    if st.ddl is Ddl.TRUNCATE_TABLE:  # rows gone without row events: like a drop and a new empty table
        return [TableDrop(t) for t in st.tables]
    if st.ddl is Ddl.DROP_TABLE and not st.temporary:  # temporary tables have no row changes to follow
        return [TableDrop(t) for t in st.tables]
    if st.ddl is not Ddl.ALTER_TABLE:
        return []
    moved: list[Rename] = [TableRename(old, new) for old, new in st.renames]
    return _column_changes(st.tables[0], sql) + moved


def _column_changes(table: TableName, sql: str) -> list[Rename]:
    """An ALTER's column renames and additions, in the statement's order."""
    try:
        stmt = parse_statement(sql)
    except sqlglot.errors.SqlglotError:
        return []
    columns: list[Rename] = []
    for action in stmt.args.get("actions") or [] if isinstance(stmt, exp.Alter) else []:
        if isinstance(action, exp.ColumnDef):  # ADD [COLUMN]
            spec = column_spec(action, None)
            default = column_default(action, spec.nullable)
            if action.args.get("exists"):  # the column may have been there, its values kept
                default = ColumnDefault(DefaultKind.UNKNOWN, "IF NOT EXISTS (the column may have been there)")
            columns.append(ColumnAdd(table, spec, default))
            continue
        if isinstance(action, exp.RenameColumn):
            old, new = action.this.name, action.args["to"].name
        elif isinstance(action, exp.ModifyColumn) and action.args.get("rename_from") is not None:
            old, new = action.args["rename_from"].name, action.this.name
        else:
            continue
        if old != new:
            columns.append(ColumnRename(table, old, new))
    return columns
