"""SQL that differs between JDBC target databases: PostgreSQL and MariaDB/MySQL (driver class,
identifier quoting through ``binlake.dialects``, naming, catalog queries, upsert and delete with the
order-key guard, staging types). Values never enter this SQL: they go as bound parameters."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from binlake.dialects import mysql, postgres
from binlake.spark.typedrows import COMMIT_TS, DELETED, GTID, MASK, ORDER
from binlake.targetnames import path_name

if TYPE_CHECKING:
    from binlake.spark.sinks.jdbc_connection import Jdbc

POSITIONS = "_binlake_positions"
RENAMES = "_binlake_renames"  # how far the renames of a batch got (see rename_jdbc_targets)
NAMES = "_binlake_tables"  # target schema + table -> source db + table, for shortened names
SYSTEM_COLUMNS = frozenset({ORDER, DELETED, GTID, COMMIT_TS, "_binlake_op"})


class Dialect:
    """What differs between target databases: driver, quoting, naming, catalog queries, upsert."""

    driver = ""
    transactional_ddl = True  # may CREATE/ALTER run inside the apply transaction?
    assigned = ""  # what names the target's column an UPDATE sets (``update_present``)

    def q(self, name: str) -> str:
        raise NotImplementedError

    def target(self, db: str, table: str) -> tuple[str, str]:
        """The (schema, table) holding source table ``db.table`` (sink-space names)."""
        raise NotImplementedError

    def column(self, name: str) -> str:
        """The target column for a (sink-space) source column."""
        raise NotImplementedError

    def stage_schema(self, schema: str) -> str:
        return schema

    def system_schema(self) -> str | None:
        """Where binlake's own tables live (None: the connection's default)."""
        return None

    def spark_url(self, url: str) -> str:
        """The URL Spark's JDBC writer gets (Spark picks its SQL dialect by the URL's prefix)."""
        return url

    def positions_ddl(self) -> str:
        raise NotImplementedError

    def columns(self, db: Jdbc, schema: str, table: str) -> list[tuple[str, str]]:
        raise NotImplementedError

    def create_like(self, target: str, stage: str) -> str:
        raise NotImplementedError

    def alter_type(self, target: str, column: str, sqltype: str) -> str:
        raise NotImplementedError

    def rename_table(self, schema: str, table: str, new_schema: str, new_table: str) -> list[str]:
        raise NotImplementedError

    def rename_column(self, target: str, column: str, new: str) -> str:
        return f"ALTER TABLE {target} RENAME COLUMN {self.q(column)} TO {self.q(new)}"

    def upsert(self, target: str, stage: str, names: list[str], keys: list[str], cleared: list[str]) -> str:
        """Insert or (when newer) update staged rows; ``cleared``: target columns the staged layout
        lacks (dropped or renamed upstream), set to NULL on update as on insert."""
        raise NotImplementedError

    def delete(self, target: str, stage: str, keys: list[str]) -> str:
        raise NotImplementedError

    def update_present(
        self,
        target: str,
        stage: str,
        names: list[str],
        keys: list[str],
        present: dict[str, int],
        cleared: list[str],
    ) -> str:
        """Update the rows the target holds from newer staged rows, each column of ``present``
        (column -> its place in the staged ``typedrows.MASK``) only where the row sets it, else
        kept (images that lack columns); an ``upsert`` after it inserts the other rows."""
        q, to = self.q, self.assigned
        sets = self._assignments(names, keys, present) + [f"{to}{q(c)} = NULL" for c in cleared]
        newer = f"NOT s.{q(DELETED)} AND t.{q(ORDER)} < s.{q(ORDER)}"
        return self.update_joined(target, stage, ", ".join(sets), keys, newer)

    def update_joined(self, target: str, stage: str, sets: str, keys: list[str], where: str) -> str:
        """UPDATE target ``t`` from staged rows ``s`` of the same key: ``sets`` where ``where``."""
        raise NotImplementedError

    def _assignments(self, names: list[str], keys: list[str], present: dict[str, int]) -> list[str]:
        """``column = value`` of an ``update_present`` (the order key last)."""
        q, to = self.q, self.assigned

        def value(c: str) -> str:
            if c not in present:
                return f"s.{q(c)}"
            sets = f"SUBSTR(s.{q(MASK)}, {int(present[c])}, 1) = '1'"
            return f"CASE WHEN {sets} THEN s.{q(c)} ELSE t.{q(c)} END"

        return [f"{to}{q(c)} = {value(c)}" for c in names if c not in keys and c != ORDER] + [
            f"{to}{q(ORDER)} = s.{q(ORDER)}"
        ]

    def save_position(self) -> str:
        """Upsert (source, version, position), bound as parameters."""
        raise NotImplementedError

    def key_match(self, keys: list[str]) -> str:
        """Target row t and staged row s have the same key."""
        return " AND ".join(f"t.{self.q(k)} = s.{self.q(k)}" for k in keys)

    def stage_ddl(self, stage: str, schema: pa.Schema, keys: list[str]) -> str | None:
        """CREATE TABLE for the staging table, or None to let Spark's JDBC writer create it."""
        return None

    def to_stage(self, table: pa.Table) -> pa.Table:
        """The rows as this database's driver should receive them."""
        return table


class Postgres(Dialect):
    driver = "org.postgresql.Driver"

    def q(self, name: str) -> str:
        return postgres.quote_ident(name)

    def target(self, db: str, table: str) -> tuple[str, str]:
        return postgres.schema_name(db), postgres.ident(table)

    def column(self, name: str) -> str:
        return postgres.ident(name)

    def positions_ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {POSITIONS} (source TEXT PRIMARY KEY, version BIGINT NOT NULL, "
            "position TEXT NOT NULL, updated TIMESTAMPTZ NOT NULL DEFAULT now())"
        )

    def columns(self, db: Jdbc, schema: str, table: str) -> list[tuple[str, str]]:
        sql = (
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum"
        )
        return [(r[0], r[1]) for r in db.rows(sql, [schema, table])]

    def create_like(self, target: str, stage: str) -> str:
        return f"CREATE TABLE {target} (LIKE {stage})"

    def alter_type(self, target: str, column: str, sqltype: str) -> str:
        return f"ALTER TABLE {target} ALTER COLUMN {self.q(column)} TYPE {sqltype} USING {self.q(column)}::{sqltype}"

    def rename_table(self, schema: str, table: str, new_schema: str, new_table: str) -> list[str]:
        q = self.q
        moves = (
            [] if schema == new_schema else [f"ALTER TABLE {q(schema)}.{q(table)} SET SCHEMA {q(new_schema)}"]
        )
        return [*moves, f"ALTER TABLE {q(new_schema)}.{q(table)} RENAME TO {q(new_table)}"]

    def upsert(self, target: str, stage: str, names: list[str], keys: list[str], cleared: list[str]) -> str:
        q = self.q
        cols = ", ".join(q(c) for c in names)
        sets = ", ".join(
            [f"{q(c)} = EXCLUDED.{q(c)}" for c in names if c not in keys]
            + [f"{q(c)} = NULL" for c in cleared]
        )
        return (
            f"INSERT INTO {target} AS t ({cols}) SELECT {cols} FROM {stage} WHERE NOT {q(DELETED)} "
            f"ON CONFLICT ({', '.join(q(k) for k in keys)}) DO UPDATE SET {sets} "
            f"WHERE t.{q(ORDER)} < EXCLUDED.{q(ORDER)}"
        )

    def update_joined(self, target: str, stage: str, sets: str, keys: list[str], where: str) -> str:
        return f"UPDATE {target} AS t SET {sets} FROM {stage} AS s WHERE {self.key_match(keys)} AND {where}"

    def delete(self, target: str, stage: str, keys: list[str]) -> str:
        q = self.q
        return (
            f"DELETE FROM {target} AS t USING {stage} AS s "
            f"WHERE s.{q(DELETED)} AND {self.key_match(keys)} AND t.{q(ORDER)} < s.{q(ORDER)}"
        )

    def save_position(self) -> str:
        return (
            f"INSERT INTO {POSITIONS} (source, version, position) VALUES (?, ?, ?) "
            "ON CONFLICT (source) DO UPDATE SET version = EXCLUDED.version, "
            "position = EXCLUDED.position, updated = now()"
        )

    def stage_schema(self, schema: str) -> str:
        return "public"


class MariaDB(Dialect):
    """MariaDB and MySQL. DDL commits implicitly there, so targets are created/altered before the
    apply transaction (idempotent steps); the data and the position still commit together."""

    driver = "org.mariadb.jdbc.Driver"
    transactional_ddl = False
    assigned = "t."  # a multi-table UPDATE names the table of each column it sets

    def __init__(self, database: str) -> None:
        self.database = database  # every target, stage and binlake table lives in the URL's database

    def q(self, name: str) -> str:
        return mysql.quote_ident(name)

    def target(self, db: str, table: str) -> tuple[str, str]:
        return self.database, path_name(db, table, mysql.MAX_IDENT)

    def column(self, name: str) -> str:
        return mysql.ident(name)

    def stage_schema(self, schema: str) -> str:
        return self.database

    def system_schema(self) -> str | None:
        return self.database

    def spark_url(self, url: str) -> str:
        # Spark's MySQL dialect (TINYINT, DATETIME, backquotes) is chosen by jdbc:mysql:, which the
        # MariaDB driver accepts as well
        return "jdbc:mysql:" + url[len("jdbc:mariadb:") :] if url.startswith("jdbc:mariadb:") else url

    def positions_ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {POSITIONS} (source VARCHAR(700) PRIMARY KEY, "
            "version BIGINT NOT NULL, position TEXT NOT NULL, "
            "updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)"
        )

    def columns(self, db: Jdbc, schema: str, table: str) -> list[tuple[str, str]]:
        sql = (
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION"
        )
        return [(r[0], r[1]) for r in db.rows(sql, [schema, table])]

    def create_like(self, target: str, stage: str) -> str:
        return f"CREATE TABLE {target} LIKE {stage}"

    def alter_type(self, target: str, column: str, sqltype: str) -> str:
        return f"ALTER TABLE {target} MODIFY COLUMN {self.q(column)} {sqltype}"

    def rename_table(self, schema: str, table: str, new_schema: str, new_table: str) -> list[str]:
        q = self.q
        return [f"RENAME TABLE {q(schema)}.{q(table)} TO {q(new_schema)}.{q(new_table)}"]

    def upsert(self, target: str, stage: str, names: list[str], keys: list[str], cleared: list[str]) -> str:
        q = self.q
        cols = ", ".join(q(c) for c in names)

        def now(c: str) -> str:  # the stored value (a bare name would be ambiguous with the SELECT's)
            return f"{target}.{q(c)}"

        newer = f"VALUES({q(ORDER)}) > {now(ORDER)}"
        # assignments run left to right on the updated row: the order key goes last
        sets = ", ".join(
            [f"{q(c)} = IF({newer}, VALUES({q(c)}), {now(c)})" for c in names if c not in keys and c != ORDER]
            + [f"{q(c)} = IF({newer}, NULL, {now(c)})" for c in cleared]
        )
        sets += f", {q(ORDER)} = IF({newer}, VALUES({q(ORDER)}), {now(ORDER)})"
        return (
            f"INSERT INTO {target} ({cols}) SELECT {', '.join('s.' + q(c) for c in names)} FROM {stage} AS s "
            f"WHERE NOT s.{q(DELETED)} "
            f"ON DUPLICATE KEY UPDATE {sets}"
        )

    def update_joined(self, target: str, stage: str, sets: str, keys: list[str], where: str) -> str:
        return f"UPDATE {target} AS t JOIN {stage} AS s ON {self.key_match(keys)} SET {sets} WHERE {where}"

    def delete(self, target: str, stage: str, keys: list[str]) -> str:
        q = self.q
        return (
            f"DELETE t FROM {target} AS t JOIN {stage} AS s ON {self.key_match(keys)} "
            f"WHERE s.{q(DELETED)} AND t.{q(ORDER)} < s.{q(ORDER)}"
        )

    def save_position(self) -> str:
        return (
            f"INSERT INTO {POSITIONS} (source, version, position) VALUES (?, ?, ?) "
            "ON DUPLICATE KEY UPDATE version = VALUES(version), position = VALUES(position)"
        )

    def to_stage(self, table: pa.Table) -> pa.Table:
        # the driver sends a float as its shortest decimal text, which a DOUBLE column then holds
        # as a different number: widen to float64 first (exact), stored in DOUBLE
        return table.cast(
            pa.schema([f.with_type(pa.float64()) if pa.types.is_float32(f.type) else f for f in table.schema])
        )

    def stage_ddl(self, stage: str, schema: pa.Schema, keys: list[str]) -> str:
        """The staging table, typed here rather than by Spark's MySQL dialect, which drops
        fractional seconds (DATETIME) and makes key strings unindexable TEXT."""
        cols = ", ".join(f"{self.q(f.name)} {mariadb_type(f.type, f.name in keys)}" for f in schema)
        return f"CREATE TABLE {stage} ({cols})"


def mariadb_type(t: pa.DataType, key: bool) -> str:
    """Arrow type of a typed table -> MariaDB column type (exact: microseconds, decimals, unsigned
    BIGINT as DECIMAL(20,0) as in the Delta tables)."""
    for test, sql in _MARIADB_TYPES:
        if test(t):
            return sql(t, key) if callable(sql) else sql
    return "LONGTEXT"


_MARIADB_TYPES: list[tuple[Any, Any]] = [
    (pa.types.is_boolean, "BOOLEAN"),
    (pa.types.is_int8, "TINYINT"),
    (pa.types.is_int16, "SMALLINT"),
    (pa.types.is_int32, "INT"),
    (pa.types.is_int64, "BIGINT"),
    (pa.types.is_float32, "DOUBLE"),  # holds every float exactly; FLOAT reads back rounded to 6 digits
    (pa.types.is_float64, "DOUBLE"),
    (pa.types.is_decimal, lambda t, key: f"DECIMAL({t.precision},{t.scale})"),
    (pa.types.is_date32, "DATE"),
    (pa.types.is_timestamp, "DATETIME(6)"),
    (pa.types.is_string, lambda t, key: "VARCHAR(768)" if key else "LONGTEXT"),
    (pa.types.is_binary, lambda t, key: "VARBINARY(3072)" if key else "LONGBLOB"),
]


def dialect_for(url: str) -> Dialect:
    if url.startswith("jdbc:postgresql:"):
        return Postgres()
    if url.startswith(("jdbc:mariadb:", "jdbc:mysql:")):
        found = re.match(r"jdbc:(?:mariadb|mysql):(?:loadbalance:|replication:)?//[^/?]*/([^?;]+)", url)
        if not found:
            raise ValueError(
                "a MariaDB/MySQL target URL names the database the tables go to: "
                "jdbc:mariadb://HOST:PORT/DATABASE?user=…"
            )
        return MariaDB(found.group(1))
    raise ValueError("unsupported JDBC URL: jdbc:postgresql://, jdbc:mariadb:// or jdbc:mysql://")
