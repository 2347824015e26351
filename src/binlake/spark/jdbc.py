"""Exactly-once apply of the change log into PostgreSQL or MariaDB/MySQL over JDBC (driver jars from
Debian's libpostgresql-jdbc-java and libmariadb-java, on Spark's classpath by ``spark_session``).

Per batch: the last change per key (as for Delta) is written by Spark's JDBC writer into one staging
table per source table and column layout; then ONE database transaction applies every staging table
and records the batch's binlog position in ``_binlake_positions``. A batch at or below the recorded
position is skipped whole, so a run killed anywhere — while staging, mid-transaction (rolled back),
after the commit — is simply run again: nothing lost, nothing doubled.

Targets: PostgreSQL ``"db"."table"`` (a schema per source database, in the URL's database);
MariaDB/MySQL ```<URL's database>`.`db.table``` (names encoded as in ``binlake.targetnames``: a
``.`` or any other character outside ``[A-Za-z0-9_]`` in a name is ``@xxxx``), with the source
columns plus ``_binlake_order_key``/``_binlake_gtid``/``_binlake_commit_ts``. Names too long for the
database are shortened with a hash and recorded in ``_binlake_tables``; identifiers are quoted by
``binlake.dialects``; every value (positions, names in catalog queries) is a bound parameter. Upserts are guarded by the order key
(``ON CONFLICT ... WHERE target order < new order``); deletes remove the row (guarded the same way).
Tables without a primary key get an append-only change table with ``_binlake_op``. A new column
(ADD COLUMN upstream) is added to the target; column types follow Spark's PostgreSQL dialect.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from binlake.dialects import mysql, postgres
from binlake.schema.renames import ColumnRename, TableRename
from binlake.spark.apply import (
    Phase,
    SyncReport,
    _Counted,
    batch_head,
    change_log,
    decoded_once,
    latest_per_key,
    table_layouts,
    table_stream,
)
from binlake.spark.renames import Journal, RenamePlan, rename_work, renamed_changes
from binlake.spark.typedrows import COMMIT_TS, DELETED, GTID, ORDER
from binlake.targetnames import NameCollisionError, path_name, replaced_name

POSITIONS = "_binlake_positions"
RENAMES = "_binlake_renames"  # how far the renames of a batch got (see rename_jdbc_targets)
NAMES = "_binlake_tables"  # target schema + table -> source db + table, for shortened names
SYSTEM_COLUMNS = frozenset({ORDER, DELETED, GTID, COMMIT_TS, "_binlake_op"})


class Dialect:
    """What differs between target databases: driver, quoting, naming, catalog queries, upsert."""

    driver = ""
    transactional_ddl = True  # may CREATE/ALTER run inside the apply transaction?

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

    def close(self) -> None:
        self.conn.close()


def committed_position(db: Jdbc, source: str) -> int | None:
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


Types = dict[tuple[str, str], dict[str, str]]  # target (schema, table) -> column -> SQL type


def rename_jdbc_targets(db: Jdbc, plan: RenamePlan, source: str, version: int, upto: bytes) -> list[str]:
    """Rename target tables and columns as the batch ``version`` (ending at order key ``upto``)
    renamed them upstream, once. Each step is a move into a free name (``RenamePlan.steps``), so the
    one a kill interrupted is told done or not by the catalog; ``_binlake_renames`` records how far
    the targets follow and the steps behind."""
    d = db.dialect
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {RENAMES} (source VARCHAR(700) PRIMARY KEY, version BIGINT NOT NULL, "
        "base VARCHAR(100) NOT NULL, upto VARCHAR(100) NOT NULL, done INT NOT NULL)"
    )
    found = db.rows(f"SELECT version, base, upto, done FROM {RENAMES} WHERE source = ?", [source])
    journal = (  # order keys as hex (OrderKey.encode() bytes)
        Journal(int(found[0][0]), bytes.fromhex(found[0][1]), bytes.fromhex(found[0][2]), int(found[0][3]))
        if found
        else None
    )
    journal, steps, renamed = rename_work(journal, plan, version, upto)

    def save() -> None:
        db.execute(f"DELETE FROM {RENAMES} WHERE source = ?", [source])
        db.execute(
            f"INSERT INTO {RENAMES} (source, version, base, upto, done) VALUES (?, ?, ?, ?, ?)",
            [source, journal.version, journal.base.hex(), journal.upto.hex(), journal.done],
        )

    if plan.keys and journal.version == version and journal.done == 0:
        save()  # the targets follow up to here (even with nothing to rename in them)
    for i in range(journal.done, len(steps)):
        step = steps[i]
        if isinstance(step, TableRename):
            (s1, t1), (s2, t2) = d.target(*step.old), d.target(*step.new)
            if d.columns(db, s1, t1):
                db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.q(s2)}")
                if d.columns(db, s2, t2):  # a table of that name dropped upstream: kept aside
                    aside = (step.new[0], replaced_name(step.new[1], version))
                    s3, t3 = d.target(*aside)
                    move_name(db, (s2, t2), (s3, t3), aside)
                    for sql in d.rename_table(s2, t2, s3, t3):
                        db.execute(sql)
                move_name(db, (s1, t1), (s2, t2), step.new)
                for sql in d.rename_table(s1, t1, s2, t2):
                    db.execute(sql)
        elif isinstance(step, ColumnRename):
            schema, table = d.target(*step.table)
            have = [c for c, _ in d.columns(db, schema, table)]
            target = f"{d.q(schema)}.{d.q(table)}"
            old, new = d.column(step.old), d.column(step.new)
            if old in have:
                if new in have:  # a column of that name dropped upstream: kept aside
                    db.execute(d.rename_column(target, new, d.column(replaced_name(step.new, version))))
                db.execute(d.rename_column(target, old, new))
        journal.done = i + 1
        save()
    return renamed


Stage = tuple[str, str, str, list[str]]  # staging table, target schema, target table, key columns


def final_types(db: Jdbc, stages: list[Stage]) -> Types:
    """Per target table, each column's type in the newest layout that has it (stages come in
    chronological order): rows of older layouts in the same batch go into the newer type."""
    d = db.dialect
    out: Types = {}
    for name, schema, table, _ in stages:
        out.setdefault((schema, table), {}).update(d.columns(db, d.stage_schema(schema), name))
    return out


def _prepare_target(
    db: Jdbc, stage: str, schema: str, table: str, keys: list[str], types: Types
) -> tuple[list[str], list[str]]:
    """Create the target like the staging table (plus its key); add the columns it lacks and give
    changed columns their newest type. Returns the staged column names and the target's source
    columns the stage lacks: dropped or renamed upstream, they stay in the target (rows written
    after that read NULL there: see ``Dialect.upsert``)."""
    d = db.dialect
    target = f"{d.q(schema)}.{d.q(table)}"
    staged = d.columns(db, d.stage_schema(schema), stage)
    have = dict(d.columns(db, schema, table))
    if not have:
        db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.q(schema)}")
        db.execute(d.create_like(target, f"{d.q(d.stage_schema(schema))}.{d.q(stage)}"))
        if keys:
            db.execute(f"ALTER TABLE {target} ADD PRIMARY KEY ({', '.join(d.q(k) for k in keys)})")
        have = dict(staged)
    newest = types.get((schema, table), {})
    for name, sqltype in staged:
        want = newest.get(name, sqltype)
        if name not in have:
            db.execute(f"ALTER TABLE {target} ADD COLUMN {d.q(name)} {want}")
        elif have[name] != want:
            db.execute(d.alter_type(target, name, want))
    names = [name for name, _ in staged]
    return names, [c for c in have if c not in names and c not in SYSTEM_COLUMNS]


def _apply_stage(db: Jdbc, stage: str, schema: str, table: str, keys: list[str], types: Types) -> None:
    d = db.dialect
    target = f"{d.q(schema)}.{d.q(table)}"
    staged = f"{d.q(d.stage_schema(schema))}.{d.q(stage)}"
    names, gone = _prepare_target(db, stage, schema, table, keys, types)
    cols = [c for c in names if c != DELETED]
    if not keys:  # a change table: append what it does not hold yet (a rerun re-reads old changes)
        listed = ", ".join(d.q(c) for c in cols)
        order = d.q(ORDER)
        db.execute(
            f"INSERT INTO {target} ({listed}) SELECT {listed} FROM {staged} AS s "
            # the newest stored key by ORDER BY: PostgreSQL has no max() of bytea
            f"WHERE s.{order} > COALESCE((SELECT m.{order} FROM {target} AS m ORDER BY m.{order} DESC LIMIT 1), '')"
        )
        return
    db.execute(d.upsert(target, staged, cols, keys, gone))
    db.execute(d.delete(target, staged, keys))


def apply_changes_jdbc(
    spark: Any,
    df: Any,
    url: str,
    *,
    source: str = "",
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
    password: str | None = None,
) -> SyncReport:
    """Apply a change-log DataFrame to PostgreSQL or MariaDB/MySQL exactly once (see the module
    docstring). ``password``: the target's, kept out of the URL."""
    with decoded_once(df) as kept:
        return _apply_changes_jdbc(
            spark, kept, url, source, chunk_rows, on_phase or (lambda _: None), password
        )


def _apply_changes_jdbc(
    spark: Any,
    df: Any,
    url: str,
    source: str,
    chunk_rows: int,
    on_phase: Callable[[str], None],
    password: str | None,
) -> SyncReport:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    on_phase("reading the change log")
    report, metadata = batch_head(df, source)
    if not metadata:  # nothing at all (a batch of renames only still has renames to follow)
        return report
    last_key = bytes.fromhex(metadata["binlake.order_key"])
    db = Jdbc(spark, url, password)
    d = db.dialect
    stages: list[Stage] = []
    try:
        last_file, _, last_pos = report.position.rpartition(":")
        ids = [r[0] for r in df.select("server_id").distinct().collect()]
        refuse_own_source(db, ids, last_file.rsplit("/", 1)[-1], int(last_pos))
        done = committed_position(db, source)
        if done is not None and done >= report.version:
            report.skipped = ["(batch already applied)"]
            return report
        df, plan = renamed_changes(df)
        report.renamed = rename_jdbc_targets(db, plan, source, report.version, last_key)

        def stage(stream: pa.RecordBatchReader, db_table: tuple[str, str], keys: list[str]) -> None:
            """Write one table's rows of one layout to a staging table (Spark's JDBC writer)."""
            schema, table = d.target(*db_table)
            on_phase(f"staging {'.'.join(db_table)}")
            record_name(db, schema, table, db_table)
            arrow = d.to_stage(stream.read_all())
            name = f"_binlake_stage_{report.version}_{len(stages)}"
            where = d.stage_schema(schema)
            if where == schema:
                db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.q(where)}")  # the stage lives beside the target
            staged = f"{d.q(where)}.{d.q(name)}"
            ddl = d.stage_ddl(staged, arrow.schema, keys)
            stages.append((name, schema, table, keys))  # dropped at the end, whatever happens
            if ddl:
                db.execute(f"DROP TABLE IF EXISTS {staged}")
                db.execute(ddl)
            spark.createDataFrame(arrow).write.jdbc(
                d.spark_url(url),
                staged,
                mode="append" if ddl else "overwrite",
                properties={"driver": d.driver, **({"password": password} if password is not None else {})},
            )

        def count(db_table: tuple[str, str], counted: _Counted) -> None:
            key = ".".join(db_table)
            report.tables[key] = report.tables.get(key, 0) + counted.n

        latest = latest_per_key(df).persist(StorageLevel.DISK_ONLY)
        for db_table, layouts in table_layouts(latest).items():
            columns, counted = table_stream(
                latest, *db_table, layouts, keyless=False, name=d.column, chunk_rows=chunk_rows
            )
            stage(counted.stream, db_table, [c["name"] for c in columns if c.get("pk")])
            count(db_table, counted)
        latest.unpersist()
        keyless = df.where(F.col("pk").isNull())
        for db_table, layouts in table_layouts(keyless).items():
            _, counted = table_stream(
                keyless, *db_table, layouts, keyless=True, name=d.column, chunk_rows=chunk_rows
            )
            stage(counted.stream, db_table, [])
            count(db_table, counted)
        # one transaction: every table and the position, or nothing
        on_phase("applying every table in one transaction")
        types = final_types(db, stages)
        if not d.transactional_ddl:  # DDL would commit the transaction half-way: do it first
            for name, schema, table, keys in stages:
                _prepare_target(db, name, schema, table, keys, types)
        db.conn.setAutoCommit(False)
        try:
            for name, schema, table, keys in stages:
                _apply_stage(db, name, schema, table, keys, types)
            db.execute(d.save_position(), [source, report.version, report.position])
            db.conn.commit()
        except Exception:
            db.conn.rollback()
            raise
        finally:
            db.conn.setAutoCommit(True)
        return report
    finally:
        try:
            for name, schema, *_ in stages:  # staging tables never outlive the batch
                db.execute(f"DROP TABLE IF EXISTS {d.q(d.stage_schema(schema))}.{d.q(name)}")
        finally:
            db.close()


def sync_to_jdbc(
    spark: Any,
    source: str,
    url: str,
    *,
    options: dict[str, str] | None = None,
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
    password: str | None = None,
) -> SyncReport:
    """Apply every complete transaction of ``source`` to PostgreSQL or MariaDB/MySQL tables."""
    df = change_log(spark, source, options)
    return apply_changes_jdbc(
        spark, df, url, source=source, chunk_rows=chunk_rows, on_phase=on_phase, password=password
    )
