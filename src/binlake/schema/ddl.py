"""DDL statements (sqlglot's MySQL dialect) applied to a catalog of table definitions."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlglot
    from sqlglot import exp
else:  # imported when a DDL statement is first parsed
    from binlake.schema._sqlglot import exp, sqlglot

from binlake.schema.model import ColumnSpec, TableDef
from binlake.statements import Ddl, Kind, TableName, classify

Catalog = dict[tuple[str, str], TableDef]

_RENAME_AS = re.compile(r"\bRENAME\s+AS\b", re.I)  # MySQL's synonym of RENAME TO, which sqlglot does not read
# ALTER ONLINE / IGNORE TABLE (MariaDB, MySQL 5): how, not what; sqlglot reads ALTER TABLE only
_ALTER_HOW = re.compile(r"^(\s*ALTER)(?:\s+(?:ONLINE|IGNORE))+(?=\s+TABLE\b)", re.I)
_CONVERT = re.compile(r"\bCONVERT\s+TO\s+(?:CHARACTER\s+SET|CHARSET)\s+(\w+)", re.I)


_PARTITIONING = re.compile(r"\bPARTITION\s+BY\b[\s\S]*$", re.I)
_TABLESPACE_OPTION = re.compile(r"\bTABLESPACE\s*=?\s*`?[\w$]+`?", re.I)
_DIRECTORY_OPTION = re.compile(r"\b(?:DATA|INDEX)\s+DIRECTORY\s*=?\s*'(?:[^'\\]|\\.|'')*'", re.I)
_VERSIONED = re.compile(r"/\*!\d*\s(.*?)\*/", re.S)


class DdlNotUnderstood(ValueError):
    """A DDL statement that changes tables but that we cannot apply (reported, never guessed)."""


@dataclass
class Applied:
    kind: str  # "changed" | "ignored" (not about table layout)
    tables: list[tuple[str, str]]


def is_ddl(sql: str) -> bool:
    """Whether a statement is DDL (anything the schema history should see)."""
    return classify(sql).kind is Kind.DDL


def table_key(t: exp.Table, default_db: str) -> tuple[str, str]:
    db = t.args.get("db")
    return (db.name if db is not None else default_db, t.name)


def column_spec(cd: exp.ColumnDef, table_charset: str | None) -> ColumnSpec:
    kind = cd.args.get("kind")
    if kind is None:
        raise DdlNotUnderstood(f"column {cd.name} has no type")
    type_name = kind.this.name if hasattr(kind.this, "name") else str(kind.this)
    charset: str | None = table_charset
    nullable = True
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind")
        if isinstance(k, exp.CharacterSetColumnConstraint):
            charset = k.this.name
        elif isinstance(k, exp.CollateColumnConstraint):
            charset = k.this.name.split("_")[0]
        elif isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            nullable = False
    values = [e.name for e in kind.expressions] if type_name in ("ENUM", "SET") else None
    params = [] if values is not None else [p.sql(dialect="mysql") for p in kind.expressions]
    return ColumnSpec(
        cd.name,
        type_name,
        charset,
        nullable,
        values if type_name == "ENUM" else None,
        values if type_name == "SET" else None,
        params,
    )


def _table_charset(create: exp.Create, default: str | None) -> str | None:
    props = create.args.get("properties")
    for p in props.expressions if props else []:
        if isinstance(p, exp.CharacterSetProperty):
            return p.this.name
        if isinstance(p, exp.CollateProperty):
            return p.this.name.split("_")[0]
    return default


def _primary_key(schema: exp.Schema, columns: list[ColumnSpec]) -> list[str]:
    keys = []
    for e in schema.expressions:
        if isinstance(e, exp.PrimaryKey):
            keys = [x.name for x in e.expressions]
        elif isinstance(e, exp.ColumnDef):
            for c in e.args.get("constraints") or []:
                if isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint):
                    keys = [e.name]
    return keys


def _place(cols: list[ColumnSpec], col: ColumnSpec, position: exp.ColumnPosition | None) -> None:
    if position is None:
        cols.append(col)
    elif position.args.get("position") == "FIRST":
        cols.insert(0, col)
    else:
        after = position.this.name
        idx = next(i for i, c in enumerate(cols) if c.name.lower() == after.lower())
        cols.insert(idx + 1, col)


def parse_statement(sql: str) -> Any:
    """One MySQL statement as sqlglot reads it (raises sqlglot's errors)."""
    return sqlglot.parse_one(_ALTER_HOW.sub(r"\1", _RENAME_AS.sub("RENAME TO", sql)), read="mysql")


# DDL that can change the tables of a catalog; the rest (views, routines, accounts, indexes,
# maintenance, TRUNCATE) leaves every row layout as it is
_CATALOG_DDL = frozenset(
    {
        Ddl.CREATE_TABLE,
        Ddl.ALTER_TABLE,
        Ddl.DROP_TABLE,
        Ddl.RENAME_TABLE,
        Ddl.CREATE_DATABASE,
        Ddl.DROP_DATABASE,
    }
)
_TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET"})


def _rename(catalog: Catalog, pairs: tuple[tuple[TableName, TableName], ...]) -> Applied:
    moved = []
    for src_key, dst_key in pairs:
        if src_key in catalog:
            t = catalog.pop(src_key)
            t.database, t.name = dst_key
            catalog[dst_key] = t
        moved += [src_key, dst_key]
    if not moved:
        raise DdlNotUnderstood("RENAME TABLE without pairs")
    return Applied("changed", moved)


def apply_ddl(
    catalog: Catalog, sql: str, default_db: str, database_charsets: dict[str, str], server_charset: str
) -> Applied:
    """Apply one statement to the catalog. Raises ``DdlNotUnderstood`` for table DDL we cannot apply."""
    st = classify(sql, default_db)
    if st.ddl not in _CATALOG_DDL or (st.ddl is Ddl.ALTER_TABLE and st.layout_neutral):
        return Applied("ignored", [])
    if st.ddl in (Ddl.CREATE_TABLE, Ddl.ALTER_TABLE) and not st.tables:
        raise DdlNotUnderstood("no table name where one was expected")
    if st.ddl is Ddl.RENAME_TABLE:
        return _rename(catalog, st.renames)
    if st.ddl is Ddl.DROP_TABLE:
        for k in st.tables:
            catalog.pop(k, None)
        return Applied("changed", list(st.tables))
    if st.ddl is Ddl.DROP_DATABASE:
        gone = [k for k in catalog if k[0] in st.databases]
        for k in gone:
            del catalog[k]
        return Applied("changed", gone)
    if st.ddl is Ddl.CREATE_TABLE:
        # partitioning, tablespaces and data directories do not change the row layout (and sqlglot
        # does not read them); a versioned comment's body is what the server ran
        sql = _VERSIONED.sub(r"\1", sql)
        sql = _DIRECTORY_OPTION.sub("", _TABLESPACE_OPTION.sub("", _PARTITIONING.sub("", sql)))
    m = _CONVERT.search(sql) if st.actions[:1] == ("CONVERT TO",) and st.tables else None
    if m:
        key = st.tables[0]
        found = catalog.get(key)
        if found is not None:
            found.charset = m.group(1)
            for col in found.columns:
                if col.charset is not None or col.type_name in _TEXT_TYPES:
                    col.charset = m.group(1)
        return Applied("changed", [key])
    try:
        stmt = parse_statement(sql)
    except sqlglot.errors.SqlglotError as e:
        raise DdlNotUnderstood(f"sqlglot cannot parse it: {str(e).splitlines()[0]}") from None
    if isinstance(stmt, exp.Create):
        kind = (stmt.args.get("kind") or "").upper()
        if kind in ("DATABASE", "SCHEMA"):
            cs = _table_charset(stmt, None)
            if cs:
                database_charsets[stmt.this.name] = cs
            return Applied("ignored", [])
        if kind != "TABLE":
            return Applied("ignored", [])
        schema = stmt.this
        key = st.tables[0]
        props = stmt.args.get("properties")
        like = next(
            (p for p in (props.expressions if props else []) if isinstance(p, exp.LikeProperty)), None
        )
        if like is not None:
            src = catalog.get(table_key(like.this, default_db))
            if src is None:
                raise DdlNotUnderstood(f"CREATE TABLE … LIKE an unknown table {like.this.sql()}")
            catalog[key] = TableDef(
                key[0],
                key[1],
                [ColumnSpec(**vars(c)) for c in src.columns],
                list(src.primary_key),
                src.charset,
            )
            return Applied("changed", [key])
        if not isinstance(schema, exp.Schema):
            raise DdlNotUnderstood("CREATE TABLE … SELECT without a column list")
        charset = _table_charset(stmt, database_charsets.get(key[0], server_charset))
        cols = [column_spec(cd, charset) for cd in schema.expressions if isinstance(cd, exp.ColumnDef)]
        catalog[key] = TableDef(key[0], key[1], cols, _primary_key(schema, cols), charset)
        return Applied("changed", [key])
    if isinstance(stmt, exp.Alter):
        if (stmt.args.get("kind") or "").upper() != "TABLE":
            return Applied("ignored", [])
        key = st.tables[0]
        known = catalog.get(key)
        if known is None:
            raise DdlNotUnderstood(f"ALTER of a table the history does not know: {key[0]}.{key[1]}")
        t = known
        for action in stmt.args.get("actions") or []:
            _alter(catalog, t, key, action, st.renames)
        return Applied("changed", [key, (t.database, t.name)])
    if isinstance(stmt, exp.Command):
        raise DdlNotUnderstood(f"unsupported syntax: {sql.strip()[:80]}")
    return Applied("ignored", [])


def _alter(
    catalog: Catalog,
    t: TableDef,
    key: TableName,
    action: exp.Expression,
    renames: tuple[tuple[TableName, TableName], ...],
) -> None:
    cols = t.columns
    if isinstance(action, exp.ColumnDef):  # ADD COLUMN
        _place(cols, column_spec(action, t.charset), action.args.get("position"))
    elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
        for c in action.args.get("tables") or []:
            del cols[t.index(c.name)]
            t.primary_key = [k for k in t.primary_key if k.lower() != c.name.lower()]
    elif isinstance(action, exp.RenameColumn):
        old, new = action.this.name, action.args["to"].name
        cols[t.index(old)].name = new
        t.primary_key = [new if k.lower() == old.lower() else k for k in t.primary_key]
    elif isinstance(action, exp.ModifyColumn):  # MODIFY / CHANGE [COLUMN]
        cd = action.this
        old = action.args.get("rename_from")
        old_name = old.name if old is not None else cd.name
        i = t.index(old_name)
        spec = column_spec(cd, t.charset)
        position = cd.args.get("position")
        if position is None:
            cols[i] = spec
        else:
            del cols[i]
            _place(cols, spec, position)
        t.primary_key = [spec.name if k.lower() == old_name.lower() else k for k in t.primary_key]
    elif isinstance(action, exp.AlterRename):
        if not renames:
            raise DdlNotUnderstood("ALTER TABLE … RENAME to a name not understood")
        new_key = renames[-1][1]  # an unqualified new name is in the default database, as the server reads it
        catalog.pop(key, None)
        t.database, t.name = new_key
        catalog[new_key] = t
    elif isinstance(action, exp.AddConstraint):
        for e in action.expressions:
            if isinstance(e, exp.PrimaryKey):
                t.primary_key = [x.name for x in e.expressions]
    elif isinstance(action, _layout_neutral()) or (
        isinstance(action, exp.Drop)
        and (action.args.get("kind") or "").upper() in ("INDEX", "KEY", "CONSTRAINT", "FOREIGN KEY")
    ):
        return  # defaults, indexes, partitions: the row layout does not change
    else:
        raise DdlNotUnderstood(f"ALTER action {type(action).__name__} is not understood")


@functools.cache
def _layout_neutral() -> tuple[type, ...]:
    """ALTER actions that leave the row layout as it is (those this sqlglot version has)."""
    return tuple(
        getattr(exp, name)
        for name in ("AlterColumn", "DropPartition", "AlterIndex", "AlterSet")
        if hasattr(exp, name)
    )


def split_script(text: str) -> list[str]:
    """Statements of a mysqldump / SHOW CREATE TABLE script (comments and client commands dropped)."""
    text = re.sub(r"/\*!\d+\s(.*?)\*/", r"\1", text, flags=re.S)  # versioned comments: their body counts
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("--", "#"))]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip()]
