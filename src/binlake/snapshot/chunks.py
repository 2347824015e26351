"""Chunks of a table's snapshot: planned as primary-key ranges, each read in one consistent
snapshot together with the binlog position it corresponds to, and turned into row changes whose
order key sits just before the first transaction that starts at that position."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlake.changes import NO_NODE, TOMBSTONE, Op, OrderKey, Origin, RowChange, file_number
from binlake.dialects.mysql import quote_ident
from binlake.errors import BinlogError
from binlake.snapshot.catalog import CatalogTable, table_layout
from binlake.snapshot.textvalues import row_parser
from binlake.values.types import ColumnType as T

Bound = tuple[Any, ...]  # primary-key values as query parameters
_NUMERIC = {T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR, T.NEWDECIMAL, T.FLOAT, T.DOUBLE}


class SnapshotError(BinlogError):
    """The server cannot give a snapshot binlake can place in its binlog (no binlog, no position)."""


@dataclass(frozen=True, slots=True)
class KeyRange:
    """Rows with ``low < key <= high`` (None: unbounded), in key order."""

    low: Bound | None
    high: Bound | None


@dataclass(frozen=True, slots=True)
class SnapshotPoint:
    """The binlog position a consistent snapshot corresponds to: the first transaction after it
    starts at ``file``:``position``."""

    file: str
    position: int
    server_id: int

    def order_key(self) -> OrderKey:
        """Below every change of a transaction starting here, above every change before it."""
        return OrderKey(file_number(self.file), self.position, 0, NO_NODE, 0, 0, TOMBSTONE)


@dataclass(frozen=True, slots=True)
class Chunk:
    table: CatalogTable
    range: KeyRange
    point: SnapshotPoint
    rows: list[tuple[Any, ...]]  # decoder-equal values, in key order


def raw_conversions() -> dict[Any, Any]:
    """PyMySQL's ``conv`` for snapshot connections: its encoders (parameters) but no decoders, so
    with ``use_unicode=False`` every value arrives as the server's bytes."""
    from pymysql.converters import conversions

    return {k: v for k, v in conversions.items() if not isinstance(k, int)}


def _bound_value(c_type: int, raw: bytes, codec_text: bool) -> Any:
    """A key value as a parameter the server compares the way it orders the key: numbers as
    numbers, text as text (its collation), binary as bytes."""
    if c_type in _NUMERIC:
        return Decimal(raw.decode("ascii"))
    return raw.decode("utf-8") if codec_text else bytes(raw)


def _key_columns(t: CatalogTable) -> list[str]:
    return [quote_ident(t.layout[i].name) for i in t.key]


def _where(t: CatalogTable, r: KeyRange) -> tuple[str, list[Any]]:
    cols = _key_columns(t)
    row = f"({', '.join(cols)})" if len(cols) > 1 else cols[0]
    marks = "(" + ", ".join(["%s"] * len(cols)) + ")" if len(cols) > 1 else "%s"
    parts, params = [], []
    if r.low is not None:
        parts.append(f"{row} > {marks}")
        params += list(r.low)
    if r.high is not None:
        parts.append(f"{row} <= {marks}")
        params += list(r.high)
    return (" WHERE " + " AND ".join(parts) if parts else ""), params


def _table_sql(t: CatalogTable) -> str:
    return f"{quote_ident(t.db)}.{quote_ident(t.table)}"


def plan_chunks(conn: Any, t: CatalogTable, rows_per_chunk: int) -> list[KeyRange]:
    """Key ranges of about ``rows_per_chunk`` rows each, from one streamed pass over the key (as
    the server orders it; text keys read as utf8mb4 so they go back as the same text). A table
    without a primary key is one chunk."""
    if not t.key or rows_per_chunk <= 0:
        return [KeyRange(None, None)]
    from pymysql.cursors import SSCursor

    cols = _key_columns(t)
    kinds = [(t.layout[i].type, t.text_bounds[i]) for i in t.key]
    bounds: list[Bound] = []
    with conn.cursor(SSCursor) as cur:
        cur.execute("SET SESSION character_set_results = utf8mb4")
        cur.execute(f"SELECT {', '.join(cols)} FROM {_table_sql(t)} ORDER BY {', '.join(cols)}")
        for n, row in enumerate(cur, start=1):
            if n % rows_per_chunk == 0:
                bounds.append(
                    tuple(_bound_value(k, v, text) for (k, text), v in zip(kinds, row, strict=True))
                )
    edges: list[Bound | None] = [None, *bounds, None]
    return [KeyRange(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]


TABLE_DEF_CHANGED = 1412  # ER_TABLE_DEF_CHANGED: the table was rebuilt after the snapshot began
READ_ATTEMPTS = 5


def read_chunk(conn: Any, t: CatalogTable, r: KeyRange, *, locked: bool = False) -> Chunk:
    """One chunk in one consistent snapshot, with the binlog position of that snapshot. ``conn``:
    a PyMySQL connection opened with ``conv={}`` (values as the server's bytes).

    The position: MariaDB (and Percona Server) tell it with the snapshot (``binlog_snapshot_file``
    and ``_position``), lock-free. MySQL does not: there the snapshot begins under a global read
    lock held only while the snapshot starts and the binlog position is read (as ``mysqldump
    --single-transaction --source-data`` does; it needs the RELOAD privilege): writes pause once per
    chunk while the lock waits for running statements (other chunks' SELECTs too; at most
    ``LOCK_WAIT_SECONDS``; then the read fails, and a rerun continues from the snapshot journal).
    ``locked``: take that way on any server (tests run it on MariaDB).

    The columns are the table's as the catalog says inside that transaction, not as ``t`` (planned
    earlier) says: an ALTER may land between the plan and the read. The catalog is read before the
    SELECT and again after it (when the transaction's metadata lock holds the table still); a DDL
    in between, or a rebuilt table the snapshot cannot read, means reading the chunk again."""
    import pymysql

    for _ in range(READ_ATTEMPTS):
        try:
            chunk = _read_once(conn, t, r, locked)
        except pymysql.err.OperationalError as e:
            if e.args[0] != TABLE_DEF_CHANGED:
                raise
            continue
        if chunk is not None:
            return chunk
    raise SnapshotError(
        f"table {t.db}.{t.table}: its definition changed during each of {READ_ATTEMPTS} reads of a chunk"
    )


def _read_once(conn: Any, planned: CatalogTable, r: KeyRange, locked: bool) -> Chunk | None:
    """``read_chunk``'s one attempt; None when the table's definition changed during it."""
    where, params = _where(planned, r)
    order = f" ORDER BY {', '.join(_key_columns(planned))}" if planned.key else ""
    with conn.cursor() as cur:
        # strings in their column's charset as the binlog holds them; TIMESTAMP in UTC
        cur.execute("SET SESSION character_set_results = NULL, time_zone = '+00:00'")
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        try:
            file, pos = _begin_snapshot(conn, cur, planned, locked)
            cur.execute("SELECT @@server_id")
            server_id = int(_s(cur.fetchone()[0]))
            t = table_layout(conn, planned.db, planned.table)
            if _key_columns(t) != _key_columns(planned):
                raise SnapshotError(
                    f"table {t.db}.{t.table}: its primary key changed since the snapshot was planned "
                    "(remove the snapshot journal to plan it again)"
                )
            cur.execute(f"SELECT {', '.join(t.selects)} FROM {_table_sql(t)}{where}{order}", params)
            raw = cur.fetchall()
            if table_layout(conn, planned.db, planned.table) != t:
                return None
        finally:
            cur.execute("COMMIT")
    parse = row_parser(t.layout)
    return Chunk(t, r, SnapshotPoint(file, int(pos), server_id), [parse(row) for row in raw])


def _s(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)


LOCK_WAIT_SECONDS = 10  # the global read lock of a MySQL chunk waits no longer for running statements


def _begin_snapshot(conn: Any, cur: Any, t: CatalogTable, locked: bool) -> tuple[str, int]:
    """Start the chunk's consistent snapshot; the binlog position it sits at (``read_chunk``)."""
    if not locked:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {_s(k).lower(): _s(v) for k, v in cur.fetchall()}
        if "binlog_snapshot_file" in status:  # MariaDB, Percona Server
            file, pos = status["binlog_snapshot_file"], status.get("binlog_snapshot_position")
            if not file or not pos:
                raise SnapshotError(
                    f"table {t.db}.{t.table}: the server gives no binlog position for a consistent "
                    "snapshot (binlog_snapshot_file is empty: is log_bin on?)"
                )
            return file, int(pos)
        cur.execute("COMMIT")  # MySQL: no such status
    from binlake.replication.client import current_position

    # the lock waits for running statements while it blocks writes: never for long
    cur.execute("SELECT @@SESSION.lock_wait_timeout")
    timeout = int(_s(cur.fetchone()[0]))
    cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS}")
    try:
        cur.execute("FLUSH TABLES WITH READ LOCK")
    except Exception as e:
        raise SnapshotError(
            f"table {t.db}.{t.table}: this server tells no binlog position with a snapshot, and the "
            f"brief global read lock that finds it failed (it needs the RELOAD privilege): {e}"
        ) from e
    finally:
        cur.execute(f"SET SESSION lock_wait_timeout = {timeout}")
    try:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            p = current_position(conn)
        except BinlogError as e:
            raise SnapshotError(f"table {t.db}.{t.table}: the server gives no binlog position: {e}") from None
    finally:
        cur.execute("UNLOCK TABLES")  # (FTWRL's, not LOCK TABLES: the snapshot transaction goes on)
    return p.file, p.position


def chunk_changes(chunk: Chunk, source: str = "") -> Iterator[RowChange]:
    """A chunk's rows as inserts at its snapshot point."""
    t, p = chunk.table, chunk.point
    key = p.order_key()
    origin = Origin(source, key.major, p.position, None, None, None, None)
    pk: Sequence[int] = sorted(t.key)  # a RowChange's key is in column order
    for row in chunk.rows:
        k = tuple(row[i] for i in pk) if pk else None
        yield RowChange(
            Op.INSERT,
            t.db,
            t.table,
            None,
            row,
            k,
            None,
            t.layout,
            origin,
            p.file,
            p.position,
            p.server_id,
            key,
        )
