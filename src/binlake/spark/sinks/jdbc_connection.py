"""A JDBC connection through the driver JVM, and binlake's own records in a JDBC target: the
batch position per source (``_binlake_positions``) and which source table a target table holds
(``_binlake_tables``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from binlake.spark.sinks.jdbc_dialects import NAMES, POSITIONS, MariaDB, dialect_for
from binlake.targetnames import NameCollisionError


class Jdbc:
    """A JDBC connection through the driver JVM (Spark's classloader holds the driver jar)."""

    def __init__(self, spark: Any, url: str, password: str | None = None) -> None:
        self.dialect = dialect_for(url)
        jvm = spark.sparkContext._jvm
        driver_class = jvm
        for part in self.dialect.driver.split("."):  # py4j resolves through Spark's classloader
            driver_class = getattr(driver_class, part)
        driver = driver_class()
        props = jvm.java.util.Properties()
        if password is not None:  # from the environment or a file, never in the URL (ps, logs)
            props.setProperty("password", password)
        self.conn = driver.connect(url, props)
        if self.conn is None:
            raise ValueError(f"the {self.dialect.driver} driver does not accept this URL")

    def _prepared(self, sql: str, params: Sequence[str | int]) -> Any:
        """A prepared statement with ``params`` bound (values never enter SQL text)."""
        st = self.conn.prepareStatement(sql)
        for i, p in enumerate(params, start=1):
            if isinstance(p, int):
                st.setLong(i, p)
            else:
                st.setString(i, p)
        return st

    def execute(self, sql: str, params: Sequence[str | int] = ()) -> None:
        st = self._prepared(sql, params)
        try:
            st.execute()
        finally:
            st.close()

    def rows(self, sql: str, params: Sequence[str | int] = ()) -> list[list[Any]]:
        st = self._prepared(sql, params)
        try:
            rs = st.executeQuery()
            n = rs.getMetaData().getColumnCount()
            out = []
            while rs.next():
                out.append([rs.getString(i + 1) for i in range(n)])
            return out
        finally:
            st.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Statements in one database transaction: committed together, or rolled back together."""
        self.conn.setAutoCommit(False)
        try:
            yield
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        finally:
            self.conn.setAutoCommit(True)

    def close(self) -> None:
        self.conn.close()


SOURCE_WIDTH = 700  # the ``source`` key column of _binlake_positions / _binlake_renames (VARCHAR)


def source_key(source: str) -> str:
    """A source as the key of binlake's JDBC tables: itself when it fits, else its start and a hash
    of the whole (a merged read names every node directory: it can be longer than the column)."""
    if len(source) <= SOURCE_WIDTH:
        return source
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{source[: SOURCE_WIDTH - len(digest) - 2]}…#{digest}"[:SOURCE_WIDTH]


def tables_with(db: Jdbc, column: str) -> list[tuple[str, str]]:
    """The target's tables (schema, table) that have ``column`` (binlake's own: ``_binlake_op`` for
    change tables, ``_binlake_order_key`` for every synced table), staging tables left out."""
    schema = db.dialect.system_schema()
    found = db.rows(
        "SELECT table_schema, table_name FROM information_schema.columns WHERE column_name = ?"
        + (" AND table_schema = ?" if schema else " AND table_catalog = current_database()"),
        [column, *([schema] if schema else [])],
    )
    return [(str(s), str(t)) for s, t in found if not str(t).startswith("_binlake_stage_")]


def committed_position(db: Jdbc, source: str) -> int | None:
    """The batch version recorded for ``source`` (a ``source_key``), if any."""
    db.execute(db.dialect.positions_ddl())
    found = db.rows(f"SELECT version FROM {POSITIONS} WHERE source = ?", [source])
    return int(found[0][0]) if found else None


def _names_table(db: Jdbc) -> None:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {NAMES} (target_schema VARCHAR(255) NOT NULL, "
        "target_table VARCHAR(255) NOT NULL, source_db VARCHAR(255) NOT NULL, "
        "source_table VARCHAR(255) NOT NULL, PRIMARY KEY (target_schema, target_table))"
    )


def record_name(db: Jdbc, schema: str, table: str, source: tuple[str, str]) -> None:
    """Record which source table a target table holds; refuse a second source on one target (a
    shortened name's hash collision, or a name crafted to look like one)."""
    _names_table(db)
    where = "WHERE target_schema = ? AND target_table = ?"
    held = db.rows(f"SELECT source_db, source_table FROM {NAMES} {where}", [schema, table])
    if held and tuple(held[0]) != source:
        raise NameCollisionError(
            f"target {schema}.{table} holds `{held[0][0]}`.`{held[0][1]}` already; "
            f"`{source[0]}`.`{source[1]}` cannot go there too"
        )
    if not held:
        db.execute(f"INSERT INTO {NAMES} VALUES (?, ?, ?, ?)", [schema, table, *source])


def move_name(db: Jdbc, old: tuple[str, str], new: tuple[str, str], source: tuple[str, str]) -> None:
    """The name record follows a table renamed in the target."""
    _names_table(db)
    db.execute(f"DELETE FROM {NAMES} WHERE target_schema = ? AND target_table = ?", list(new))
    db.execute(
        f"UPDATE {NAMES} SET target_schema = ?, target_table = ?, source_db = ?, source_table = ? "
        "WHERE target_schema = ? AND target_table = ?",
        [*new, *source, *old],
    )


def refuse_own_source(db: Jdbc, server_ids: list[int], file: str, position: int) -> None:
    """Never write into the server the binlogs come from: it would change the source's data and
    write binlog events binlake then reads again. The target is that server when its server_id
    wrote the batch and its own binlog holds the batch's last file at least that far. (A server
    that does not show its binary logs to the sink's user cannot be told apart: it is written.)"""
    if not isinstance(db.dialect, MariaDB) or not server_ids:
        return
    (own,) = db.rows("SELECT @@server_id")[0]
    if int(own) not in server_ids:
        return
    try:
        logs = db.rows("SHOW BINARY LOGS")
    except Exception:  # binary logging off, or not allowed to see them: not the source as far as known
        return
    if any(name == file and int(size) >= position for name, size, *_ in logs):
        raise ValueError(
            f"the target server (server_id {own}) wrote these binlogs ({file}): binlake does not "
            "write into the server it reads from; name another server in the URL"
        )
