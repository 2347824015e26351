"""Exactly-once apply of the change log into PostgreSQL over JDBC (driver jar from Debian's
libpostgresql-jdbc-java, on Spark's classpath by ``spark_session``).

Per batch: the last change per key (as for Delta) is written by Spark's JDBC writer into one staging
table per source table and column layout; then ONE database transaction applies every staging table
and records the batch's binlog position in ``_binlake_positions``. A batch at or below the recorded
position is skipped whole, so a run killed anywhere — while staging, mid-transaction (rolled back),
after the commit — is simply run again: nothing lost, nothing doubled.

Targets are ``"db"."table"`` (a schema per source database) with the source columns plus
``_binlake_order_key``/``_binlake_gtid``/``_binlake_commit_ts``. Upserts are guarded by the order key
(``ON CONFLICT ... WHERE target order < new order``); deletes remove the row (guarded the same way).
Tables without a primary key get an append-only change table with ``_binlake_op``. A new column
(ADD COLUMN upstream) is added to the target; column types follow Spark's PostgreSQL dialect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from binlake.spark.apply import (
    DELETED,
    ORDER,
    Phase,
    SyncReport,
    _batch_stream,
    _Counted,
    batch_head,
    decoded_once,
    latest_per_key,
)

POSITIONS = "_binlake_positions"


def q(name: str) -> str:
    """A PostgreSQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Jdbc:
    """A JDBC connection through the driver JVM (Spark's classloader holds the driver jar)."""

    def __init__(self, spark: Any, url: str) -> None:
        jvm = spark.sparkContext._jvm
        driver = jvm.org.postgresql.Driver() if url.startswith("jdbc:postgresql:") else None
        if driver is None:
            raise ValueError(f"unsupported JDBC URL {url!r}: jdbc:postgresql://... is supported")
        self.conn = driver.connect(url, jvm.java.util.Properties())
        if self.conn is None:
            raise ValueError(f"the PostgreSQL driver does not accept {url!r}")

    def execute(self, sql: str) -> None:
        st = self.conn.createStatement()
        try:
            st.execute(sql)
        finally:
            st.close()

    def rows(self, sql: str) -> list[list[Any]]:
        st = self.conn.createStatement()
        try:
            rs = st.executeQuery(sql)
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
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {POSITIONS} (source TEXT PRIMARY KEY, version BIGINT NOT NULL, "
        "position TEXT NOT NULL, order_key TEXT NOT NULL, updated TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    found = db.rows(f"SELECT version FROM {POSITIONS} WHERE source = {lit(source)}")
    return int(found[0][0]) if found else None


def _columns(db: Jdbc, schema: str, table: str) -> list[tuple[str, str]]:
    return [
        (r[0], r[1])
        for r in db.rows(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            f"WHERE a.attrelid = to_regclass({lit(q(schema) + '.' + q(table))}) AND a.attnum > 0 "
            "AND NOT a.attisdropped ORDER BY a.attnum"
        )
    ]


def _prepare_target(db: Jdbc, stage: str, schema: str, table: str, keys: list[str]) -> list[str]:
    """Create the target like the staging table (plus its key), add columns it lacks; the staged
    column names."""
    target = f"{q(schema)}.{q(table)}"
    db.execute(f"CREATE SCHEMA IF NOT EXISTS {q(schema)}")
    staged = _columns(db, "public", stage)
    have = {name for name, _ in _columns(db, schema, table)}
    if not have:
        db.execute(f"CREATE TABLE {target} (LIKE public.{q(stage)})")
        if keys:
            db.execute(f"ALTER TABLE {target} ADD PRIMARY KEY ({', '.join(q(k) for k in keys)})")
    else:
        for name, sqltype in staged:
            if name not in have:
                db.execute(f"ALTER TABLE {target} ADD COLUMN {q(name)} {sqltype}")
    return [name for name, _ in staged]


def _apply_stage(db: Jdbc, stage: str, schema: str, table: str, keys: list[str]) -> None:
    target = f"{q(schema)}.{q(table)}"
    cols = _prepare_target(db, stage, schema, table, keys)
    names = ", ".join(q(c) for c in cols if c != DELETED)
    if not keys:
        db.execute(f"INSERT INTO {target} ({names}) SELECT {names} FROM public.{q(stage)}")
        return
    sets = ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in cols if c not in keys and c != DELETED)
    db.execute(
        f"INSERT INTO {target} AS t ({names}) SELECT {names} FROM public.{q(stage)} WHERE NOT {q(DELETED)} "
        f"ON CONFLICT ({', '.join(q(k) for k in keys)}) DO UPDATE SET {sets} "
        f"WHERE t.{q(ORDER)} < EXCLUDED.{q(ORDER)}"
    )
    match = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
    db.execute(
        f"DELETE FROM {target} AS t USING public.{q(stage)} AS s "
        f"WHERE s.{q(DELETED)} AND {match} AND t.{q(ORDER)} < s.{q(ORDER)}"
    )


def apply_changes_jdbc(
    spark: Any, df: Any, url: str, *, source: str = "", chunk_rows: int = 50_000, on_phase: Phase = None
) -> SyncReport:
    """Apply a change-log DataFrame to PostgreSQL exactly once (see the module docstring)."""
    with decoded_once(df) as kept:
        return _apply_changes_jdbc(spark, kept, url, source, chunk_rows, on_phase or (lambda _: None))


def _apply_changes_jdbc(
    spark: Any, df: Any, url: str, source: str, chunk_rows: int, on_phase: Callable[[str], None]
) -> SyncReport:
    from pyspark.sql import functions as F

    on_phase("reading the change log")
    report, _ = batch_head(df, source)
    if not report.changes:
        return report
    db = Jdbc(spark, url)
    try:
        done = committed_position(db, source)
        if done is not None and done >= report.version:
            report.skipped = ["(batch already applied)"]
            return report
        stages: list[tuple[str, str, str, list[str]]] = []

        def stage(
            rows: Any, g: Any, keys: list[str], extra: Any = None, deleted_values: bool = False
        ) -> None:
            """Write one table's rows of one layout to a staging table (Spark's JDBC writer)."""
            on_phase(f"staging {g['db']}.{g['table']}")
            counted = _Counted(rows)
            columns = json.loads(g["columns"])
            arrow = _batch_stream(counted, columns, chunk_rows, extra, deleted_values).read_all()
            name = f"_binlake_stage_{report.version}_{len(stages)}"
            spark.createDataFrame(arrow).write.jdbc(
                url, f"public.{q(name)}", mode="overwrite", properties={"driver": "org.postgresql.Driver"}
            )
            stages.append((name, g["db"], g["table"], keys))
            key = f"{g['db']}.{g['table']}"
            report.tables[key] = report.tables.get(key, 0) + counted.n

        latest = latest_per_key(df)
        groups = latest.select("db", "table", "columns").distinct().collect()
        for g in sorted(
            groups, key=lambda g: (g["db"], g["table"], len(json.loads(g["columns"])), g["columns"])
        ):
            columns = json.loads(g["columns"])
            part = latest.where(
                (F.col("db") == g["db"]) & (F.col("table") == g["table"]) & (F.col("columns") == g["columns"])
            )
            stage(part.orderBy("order_key").toLocalIterator(), g, [c["name"] for c in columns if c.get("pk")])
        keyless = df.where(F.col("pk").isNull())
        for g in keyless.select("db", "table", "columns").dropDuplicates(["db", "table"]).collect():
            rows = keyless.where((F.col("db") == g["db"]) & (F.col("table") == g["table"])).orderBy(
                "order_key"
            )
            stage(
                rows.toLocalIterator(),
                g,
                [],
                extra=lambda chunk, t: t.append_column(
                    "_binlake_op", pa.array([r["op"] for r in chunk], pa.string())
                ),
                deleted_values=True,
            )
        # one transaction: every table and the position, or nothing
        on_phase("applying every table in one transaction")
        db.conn.setAutoCommit(False)
        try:
            for name, schema, table, keys in stages:
                _apply_stage(db, name, schema, table, keys)
            db.execute(
                f"INSERT INTO {POSITIONS} (source, version, position, order_key) VALUES ({lit(source)}, "
                f"{report.version}, {lit(report.position)}, '') ON CONFLICT (source) DO UPDATE SET "
                "version = EXCLUDED.version, position = EXCLUDED.position, updated = now()"
            )
            db.conn.commit()
        except Exception:
            db.conn.rollback()
            raise
        finally:
            db.conn.setAutoCommit(True)
        for name, *_ in stages:
            db.execute(f"DROP TABLE IF EXISTS public.{q(name)}")
        return report
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
) -> SyncReport:
    """Apply every complete transaction of ``source`` to PostgreSQL tables ``"db"."table"``."""
    df = spark.read.format("binlog").options(**(options or {})).load(source)
    return apply_changes_jdbc(spark, df, url, source=source, chunk_rows=chunk_rows, on_phase=on_phase)


def stream_to_jdbc(
    spark: Any,
    source: str,
    url: str,
    checkpoint: str,
    *,
    available_now: bool = True,
    interval: str = "2 seconds",
    options: dict[str, str] | None = None,
) -> Any:
    """``stream_changes`` into PostgreSQL."""
    from binlake.spark.apply import stream_changes

    return stream_changes(
        spark,
        source,
        checkpoint,
        lambda batch: apply_changes_jdbc(spark, batch, url, source=source),
        available_now=available_now,
        interval=interval,
        options=options,
    )
