"""Redo SQL and flashback (undo) SQL from row changes.

Redo replays transactions in order; flashback undoes them in reverse order (INSERT <-> DELETE, UPDATE
with its images swapped). A row is found by its primary key when the binlog names it, else by every
column the image carries (NULL-safe ``<=>``; FLOAT columns are left out because a float32 never
equals its decimal text) with ``LIMIT 1``. Literals are exact for every type; the script sets
``time_zone='+00:00'`` (TIMESTAMP values are UTC) and ``NAMES utf8mb4``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from binlake.dialects.mysql import quote_ident, quote_str
from binlake.errors import BinlogError
from binlake.events.query import Query
from binlake.events.rows import ABSENT, PartialJson, Rows
from binlake.events.table_map import TableMap
from binlake.render import joined
from binlake.render.sqlrow import NOT_COMPARABLE, RowSql, RowSqlCache, compile_row_sql
from binlake.render.values import float32_text
from binlake.statements import DATABASE_DDL, classify
from binlake.txn import DDL, Transaction
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import Json, to_mysql_text
from binlake.values.numeric import bit_length
from binlake.values.temporal import MysqlDate, MysqlDateTime, format_date, format_datetime, format_time
from binlake.values.types import ColumnType

HEADER = ["SET NAMES utf8mb4;", "SET time_zone = '+00:00';", "SET SESSION sql_mode = '';"]


class SqlError(BinlogError):
    """Row changes that cannot be written as SQL (no column names known, for one)."""


def literal(value: Any, col: ColumnDef) -> str:
    """An exact SQL literal for one decoded value."""
    if value is None:
        return "NULL"
    t = col.real_type
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if t == ColumnType.BIT:
        return "b'" + format(value, f"0{max(bit_length(col.meta), 1)}b") + "'"
    if t == ColumnType.SET and isinstance(value, tuple):
        return quote_str(",".join(value))
    if t == ColumnType.GEOMETRY and isinstance(value, bytes) and len(value) >= 4:
        return f"ST_GeomFromWKB(X'{value[4:].hex()}', {int.from_bytes(value[:4], 'little')})"
    if t == ColumnType.VECTOR:
        return "STRING_TO_VECTOR('[" + ",".join(float32_text(v) for v in value) + "]')"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return float32_text(value) if t == ColumnType.FLOAT else repr(value)
    if isinstance(value, str):
        return quote_str(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, (dt.datetime, MysqlDateTime)):
        fsp = col.meta if t in (ColumnType.DATETIME2, ColumnType.TIMESTAMP2) else 0
        return quote_str(format_datetime(value, fsp))
    if isinstance(value, (dt.date, MysqlDate)):
        return quote_str(format_date(value))
    if isinstance(value, dt.timedelta):
        return quote_str(format_time(value, col.meta if t == ColumnType.TIME2 else 0))
    if isinstance(value, Json):
        return quote_str(value.text())
    raise SqlError(f"no SQL literal for {type(value).__name__} in column {col.label}")


def _partial(value: PartialJson, col: ColumnDef) -> str:
    expr = quote_ident(col.name or "")
    for d in value.diffs:
        arg = "" if d.operation == "REMOVE" else f", CAST({quote_str(to_mysql_text(d.value))} AS JSON)"
        expr = f"JSON_{d.operation}({expr}, {quote_str(d.path)}{arg})"
    return expr


def _names(tm: TableMap) -> list[str]:
    if any(c.name is None for c in tm.columns):
        raise SqlError(
            f"column names of `{tm.database}`.`{tm.table}` are not in the binlog (binlog_row_metadata=MINIMAL "
            "or MySQL 5.x): SQL needs them; give the table definitions with --schema FILE (a DDL script "
            "such as mysqldump --no-data, or a history saved with --save-schema)",
        )
    return [c.name or "" for c in tm.columns]


def _where(tm: TableMap, image: list[Any]) -> str:
    cols = tm.columns
    keys = [i for i in tm.primary_key if image[i] is not ABSENT]
    if not keys or len(keys) < len(tm.primary_key):
        usable = [i for i, v in enumerate(image) if v is not ABSENT and not isinstance(v, PartialJson)]
        keys = [i for i in usable if cols[i].real_type not in NOT_COMPARABLE] or usable
    parts = [f"{quote_ident(cols[i].name or '')} <=> {literal(image[i], cols[i])}" for i in keys]
    return " AND ".join(parts) or "FALSE"


def _insert(tm: TableMap, image: list[Any]) -> str:
    cols = [c for c, v in zip(tm.columns, image, strict=True) if v is not ABSENT]
    names = ", ".join(quote_ident(c.name or "") for c in cols)
    values = ", ".join(literal(image[c.index], c) for c in cols)
    return f"INSERT INTO {quote_ident(tm.database)}.{quote_ident(tm.table)} ({names}) VALUES ({values});"


def _update(tm: TableMap, before: list[Any], after: list[Any]) -> str:
    sets = []
    for c in tm.columns:
        v = after[c.index]
        if v is ABSENT:
            continue
        rhs = _partial(v, c) if isinstance(v, PartialJson) else literal(v, c)
        sets.append(f"{quote_ident(c.name or '')} = {rhs}")
    return f"UPDATE {quote_ident(tm.database)}.{quote_ident(tm.table)} SET {', '.join(sets)} WHERE {_where(tm, before)} LIMIT 1;"


def _delete(tm: TableMap, image: list[Any]) -> str:
    return (
        f"DELETE FROM {quote_ident(tm.database)}.{quote_ident(tm.table)} WHERE {_where(tm, image)} LIMIT 1;"
    )


def _named_row_sql(tm: TableMap, compiled: bool) -> RowSql:
    _names(tm)
    return compile_row_sql(tm, _insert, _delete, _update, literal, compiled)


_ROW_SQL = RowSqlCache(_named_row_sql)


def reference_redo_statements(t: Transaction) -> list[str]:
    """The per-value path (one ``literal`` call per value): what ``redo_statements`` equals."""
    return _statements(t, reversed_=False, generated=False)


def reference_flashback_statements(t: Transaction) -> list[str]:
    """The per-value path of ``flashback_statements``."""
    return _statements(t, reversed_=True, generated=False)


def redo_statements(t: Transaction) -> list[str]:
    return _statements(t, reversed_=False, generated=True)


def flashback_statements(t: Transaction) -> list[str]:
    return _statements(t, reversed_=True, generated=True)


def _reference_row_sql(tm: TableMap) -> RowSql:
    _names(tm)
    return RowSql(lambda a: _insert(tm, a), lambda b: _delete(tm, b), lambda w, s: _update(tm, w, s))


def _statements(t: Transaction, reversed_: bool, generated: bool) -> list[str]:
    """Redo (in order) or flashback (reversed: INSERT <-> DELETE, UPDATE images swapped)."""
    out: list[str] = []
    for ev in reversed(t.events) if reversed_ else t.events:
        b = ev.body
        if isinstance(b, Query) and t.kind == DDL:
            if reversed_:
                first = b.query.splitlines()[:1] or [""]  # a damaged event may carry no statement at all
                out.append(f"-- cannot undo DDL at {ev.source}:{ev.offset}: {first[0][:200]}")
                continue
            # CREATE/DROP DATABASE carry the database as their default: USE would fail (or touch the
            # wrong one)
            if b.database and classify(b.query, b.database).ddl not in DATABASE_DDL:
                out.append(f"USE {quote_ident(b.database)};")
            out.append(b.query.rstrip().rstrip(";") + ";")
        elif isinstance(b, Rows) and b.table is not None and not b.undecoded_reason:
            fns = _ROW_SQL.get(b.table) if generated else _reference_row_sql(b.table)
            op, images = b.operation, reversed(b.rows) if reversed_ else b.rows
            if op == "insert":
                make = fns.delete if reversed_ else fns.insert
                out += [make(after) for _, after in images]  # type: ignore[arg-type]
            elif op == "delete":
                make = fns.insert if reversed_ else fns.delete
                out += [make(before) for before, _ in images]  # type: ignore[arg-type]
            elif reversed_:  # a partial-JSON edit is undone too: the before image holds the whole document
                update = fns.update
                out += [update(after, before) for before, after in images]  # type: ignore[arg-type]
            else:
                update = fns.update
                out += [update(before, after) for before, after in images]  # type: ignore[arg-type]
    return out


def render_sql(transactions: Iterable[Transaction], flashback: bool = False) -> Iterator[str]:
    """SQL lines for the transactions (given in binlog order)."""
    yield from HEADER
    if not flashback:
        for t in transactions:
            yield from _block(t, redo_statements(t))
        return
    # undo runs newest first: keep each transaction's SQL text (not its events) until the end
    blocks = [list(_block(t, flashback_statements(t))) for t in transactions]
    for block in reversed(blocks):
        yield from block


def render_sql_blocks(transactions: Iterable[Transaction], flashback: bool = False) -> Iterator[str]:
    """``render_sql``'s lines, a transaction's lines joined in one item (the same text written with
    a newline after each item, without an item per statement)."""
    yield from HEADER
    if not flashback:
        for t in transactions:
            stmts = redo_statements(t)
            if stmts:
                yield "\n".join(_block(t, stmts))
        return
    blocks = []
    for t in transactions:
        stmts = flashback_statements(t)
        if stmts:
            blocks.append("\n".join(_block(t, stmts)))
    yield from reversed(blocks)


def _pure_block(t: Transaction, flashback: bool) -> str | None:
    """``render_sql_blocks``' item of one transaction (None: it has no statement)."""
    stmts = flashback_statements(t) if flashback else redo_statements(t)
    return "\n".join(_block(t, stmts)) if stmts else None


def _encoded(text: str) -> bytes:
    return (text + "\n").encode("utf-8", "surrogateescape")


def render_sql_bytes(
    transactions: Iterable[Transaction], flashback: bool = False, batch_bytes: int = 1 << 20
) -> Iterator[bytes | bytearray]:
    """``render_sql_blocks``' items with their newlines, encoded (UTF-8, surrogate escapes), in
    blocks of about ``batch_bytes``; what came before an error is given too, as ``write_lines``
    writes it. With the compiled formatter (``joined.sql_blocks``), C writes each transaction's
    block into the output; a DDL transaction, or one C does not write (odd fields, an error), is
    the pure block, so the bytes and the error are the pure path's."""
    writer = joined.sql_blocks(Rows, _ROW_SQL.get, DDL)
    if writer is None:
        for item in render_sql_blocks(transactions, flashback):
            yield _encoded(item)
        return
    write = writer.write

    def block(t: Transaction) -> bytearray | str | None:
        """A transaction's block as C writes it, else the pure text (None: no statement)."""
        written = bytearray()
        try:
            if write(t, written, flashback):
                return written or None
        except Exception:  # noqa: BLE001 (the pure block says what happens)
            pass
        return _pure_block(t, flashback)

    yield _encoded("\n".join(HEADER))
    if flashback:  # undo runs newest first: every block is kept to the end
        yield from _batched(reversed([b for t in transactions if (b := block(t)) is not None]), batch_bytes)
    else:
        yield from _batched((block(t) for t in transactions), batch_bytes)


def _batched(blocks: Iterable[bytearray | str | None], batch_bytes: int) -> Iterator[bytes | bytearray]:
    """Blocks (encoded, or text to encode) joined into items of about ``batch_bytes``; what came
    before an error is given before it is raised."""
    out = bytearray()
    try:
        for b in blocks:
            if b is not None:
                out += b if not isinstance(b, str) else _encoded(b)
            if len(out) >= batch_bytes:
                yield out
                out = bytearray()
    except Exception:
        if out:
            yield out
        raise
    if out:
        yield out


def _block(t: Transaction, stmts: list[str]) -> Iterator[str]:
    if not stmts:
        return
    yield f"-- {t.gtid or 'anonymous'} at {t.source}:{t.start}"
    if t.kind == DDL:
        yield from stmts
    else:
        yield "BEGIN;"
        yield from stmts
        yield "COMMIT;"
