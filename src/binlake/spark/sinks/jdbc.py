"""PostgreSQL or MariaDB/MySQL over JDBC (driver jars from Debian's libpostgresql-jdbc-java and
libmariadb-java, on Spark's classpath by ``spark_session``).

Per batch: each table's typed rows (the last change per key; every change of a keyless table) are
written by Spark's JDBC writer into a staging table; then ONE database transaction applies every
staging table and records the batch's binlog position in ``_binlake_positions``. A batch at or below
the recorded position is skipped whole, so a run killed anywhere — while staging, mid-transaction
(rolled back), after the commit — is simply run again: nothing lost, nothing doubled. (A snapshot's
chunks, ``positioned=False``, record no position: the order-key guard alone keeps them right.)

Targets: PostgreSQL ``"db"."table"`` (a schema per source database, in the URL's database);
MariaDB/MySQL ```<URL's database>`.`db.table``` (names encoded as in ``binlake.targetnames``: a
``.`` or any other character outside ``[A-Za-z0-9_]`` in a name is ``@xxxx``), with the source
columns plus ``_binlake_order_key``/``_binlake_gtid``/``_binlake_commit_ts``. Names too long for the
database are shortened with a hash and recorded in ``_binlake_tables``; identifiers are quoted by
``binlake.dialects``; every value (positions, names in catalog queries) is a bound parameter.
Upserts are guarded by the order key (``ON CONFLICT ... WHERE target order < new order``); deletes
remove the row (guarded the same way). Tables without a primary key get an append-only change table
with ``_binlake_op``. A new column (ADD COLUMN upstream) is added to the target. Column types:
PostgreSQL's from Spark's dialect, MariaDB's from ``jdbc_dialects.mariadb_type`` (exact).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.spark.plan import BatchPlan, Phase, SyncReport
from binlake.spark.sinks.jdbc_connection import (
    Jdbc,
    committed_position,
    record_name,
    refuse_own_source,
    source_key,
)
from binlake.spark.sinks.jdbc_dialects import SYSTEM_COLUMNS, dialect_for
from binlake.spark.sinks.jdbc_records import JdbcRecords, jdbc_records
from binlake.spark.sinks.jdbc_renames import rename_jdbc_targets
from binlake.spark.typedrows import DELETED, MASK, OP, ORDER, presence


@dataclass(frozen=True)
class JdbcSink:
    """PostgreSQL or MariaDB/MySQL at JDBC ``url`` (``password`` kept out of it); the connection and
    staging writes run in the driver's JVM (the Spark session of the batch)."""

    url: str
    password: str | None = None
    chunk_rows: int = 50_000

    def __post_init__(self) -> None:
        dialect_for(self.url)  # a URL no dialect takes is refused at once, before any Spark work

    @property
    def shown(self) -> str:
        from binlake.credentials import redacted_url

        return redacted_url(self.url)

    def state_dir(self) -> Path | None:
        return None

    def connect(self, spark: Any) -> Jdbc:
        return Jdbc(spark, self.url, self.password)

    def records(self, spark: Any) -> AbstractContextManager[JdbcRecords]:
        """Where batch syncs record how far they got (``binlake.spark.resume``)."""
        return jdbc_records(spark, self.url, self.password)

    def apply(self, plan: BatchPlan, on_phase: Phase = None) -> SyncReport:
        report = plan.report
        if plan.empty:
            return report
        spark = plan.changes.sparkSession
        db = self.connect(spark)
        stages: list[Stage] = []
        source = source_key(plan.source)  # the key of binlake's tables in the target
        try:
            last_file, _, last_pos = report.position.rpartition(":")
            refuse_own_source(db, report.server_ids, last_file.rsplit("/", 1)[-1], int(last_pos))
            if plan.positioned:
                done = committed_position(db, source)
                if done is not None and done >= report.version:
                    report.skipped = ["(batch already applied)"]
                    return report
            report.renamed = rename_jdbc_targets(
                db, plan.renames, source, report.version, plan.last_order_key
            )
            for t in plan.tables:
                columns, counted = plan.rows(t, name=db.dialect.column, chunk_rows=self.chunk_rows)
                if on_phase is not None:
                    on_phase(f"staging {t.name}")
                keys = [] if t.keyless else [c["name"] for c in columns if c.get("pk")]
                schema, table = db.dialect.target(t.db, t.table)
                stage: Stage = (
                    f"_binlake_stage_{report.version}_{len(stages)}",
                    schema,
                    table,
                    keys,
                    presence(counted.stream.schema, columns),
                )
                stages.append(stage)  # dropped at the end, whatever happens: before it exists
                self._stage(spark, db, counted.stream, (t.db, t.table), stage)
                report.tables[t.name] = report.tables.get(t.name, 0) + counted.n
            fills: list[Stage] = []
            for f in plan.fills:
                _, row = plan.fill_rows(f, name=db.dialect.column)
                schema, table = db.dialect.target(f.db, f.table)
                fill: Stage = (f"_binlake_stage_{report.version}_{len(stages)}", schema, table, [], {})
                stages.append(fill)
                fills.append(fill)
                self._stage(
                    spark,
                    db,
                    pa.RecordBatchReader.from_batches(row.schema, row.to_batches()),
                    (f.db, f.table),
                    fill,
                )
                report.filled.append(f"{f.name}: {row.schema.names[0]}")
            if on_phase is not None:
                on_phase("applying every table in one transaction")
            self._commit(db, stages, plan, source, fills)
            return report
        finally:
            d = db.dialect
            try:
                for name, schema, *_ in stages:  # staging tables never outlive the batch
                    db.execute(f"DROP TABLE IF EXISTS {d.q(d.stage_schema(schema))}.{d.q(name)}")
            finally:
                db.close()

    def _stage(
        self, spark: Any, db: Jdbc, stream: pa.RecordBatchReader, db_table: tuple[str, str], stage: Stage
    ) -> None:
        """Write one table's rows to its staging table beside its target (Spark's JDBC writer)."""
        d = db.dialect
        name, schema, table, keys, _ = stage
        record_name(db, schema, table, db_table)
        arrow = d.to_stage(stream.read_all())
        where = d.stage_schema(schema)
        if where == schema:
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.q(where)}")  # the stage lives beside the target
        staged = f"{d.q(where)}.{d.q(name)}"
        ddl = d.stage_ddl(staged, arrow.schema, keys)
        if ddl:
            db.execute(f"DROP TABLE IF EXISTS {staged}")
            db.execute(ddl)
        spark.createDataFrame(arrow).write.jdbc(
            d.spark_url(self.url),
            staged,
            mode="append" if ddl else "overwrite",
            properties={
                "driver": d.driver,
                **({"password": self.password} if self.password is not None else {}),
            },
        )

    @staticmethod
    def _commit(db: Jdbc, stages: list[Stage], plan: BatchPlan, source: str, fills: list[Stage]) -> None:
        """Every staged table (rows, then the values ADD COLUMN gave the rows held: ``fills``) and
        the batch position (of ``source``, a ``source_key``) in ONE transaction, or nothing."""
        d = db.dialect
        types = final_types(db, stages)
        if not d.transactional_ddl:  # DDL would commit the transaction half-way: do it first
            for stage in stages:
                if stage not in fills or _holds_rows(db, *stage[1:3]):
                    _prepare_target(db, stage, types)
        with db.transaction():
            for stage in stages:
                if stage in fills:
                    _apply_fill(db, stage, types)
                else:
                    _apply_stage(db, stage, types)
            if plan.positioned:
                db.execute(d.save_position(), [source, plan.report.version, plan.report.position])


Types = dict[tuple[str, str], dict[str, str]]  # target (schema, table) -> column -> SQL type
# staging table, target schema, target table, key columns, and column -> its place in the staged
# ``typedrows.MASK`` saying which rows set it (images lacking columns; never a target column)
Stage = tuple[str, str, str, list[str], dict[str, int]]


def final_types(db: Jdbc, stages: list[Stage]) -> Types:
    """Per target table, each column's type in the newest layout that has it (stages come in
    chronological order): rows of older layouts in the same batch go into the newer type."""
    d = db.dialect
    out: Types = {}
    for name, schema, table, *_ in stages:
        out.setdefault((schema, table), {}).update(d.columns(db, d.stage_schema(schema), name))
    return out


def _prepare_target(db: Jdbc, stage: Stage, types: Types) -> tuple[list[str], list[str]]:
    """Create the target like the staging table (plus its key, without its mask); add the columns
    it lacks and give changed columns their newest type. Returns the staged column names and the
    target's source columns the stage lacks: dropped or renamed upstream, they stay in the target
    (rows written after that read NULL there: see ``Dialect.upsert``)."""
    d = db.dialect
    name, schema, table, keys, _ = stage
    target = f"{d.q(schema)}.{d.q(table)}"
    every = d.columns(db, d.stage_schema(schema), name)
    staged = [c for c in every if c[0] != MASK]  # the mask is never a target column
    have = dict(d.columns(db, schema, table))
    if not have:
        db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.q(schema)}")
        db.execute(d.create_like(target, f"{d.q(d.stage_schema(schema))}.{d.q(name)}"))
        if len(staged) < len(every):
            db.execute(f"ALTER TABLE {target} DROP COLUMN {d.q(MASK)}")
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


def _holds_rows(db: Jdbc, schema: str, table: str) -> bool:
    """Whether the target is a table of rows (not absent, not an append-only change table)."""
    have = dict(db.dialect.columns(db, schema, table))
    return bool(have) and OP not in have


def _apply_fill(db: Jdbc, stage: Stage, types: Types) -> None:
    """The value of an ADD COLUMN (the stage's one row) in every row the target held before it
    (an older order key): the column added first where it is missing. Idempotent."""
    name, schema, table, *_ = stage
    if not _holds_rows(db, schema, table):
        return
    d = db.dialect
    names, _ = _prepare_target(db, stage, types)
    column = next(c for c in names if c not in SYSTEM_COLUMNS)
    target = f"{d.q(schema)}.{d.q(table)}"
    staged = f"{d.q(d.stage_schema(schema))}.{d.q(name)}"
    order = d.q(ORDER)
    db.execute(
        f"UPDATE {target} SET {d.q(column)} = (SELECT s.{d.q(column)} FROM {staged} AS s) "
        f"WHERE {order} < (SELECT s.{order} FROM {staged} AS s)"
    )


def _apply_stage(db: Jdbc, stage: Stage, types: Types) -> None:
    d = db.dialect
    name, schema, table, keys, present = stage
    target = f"{d.q(schema)}.{d.q(table)}"
    staged = f"{d.q(d.stage_schema(schema))}.{d.q(name)}"
    names, gone = _prepare_target(db, stage, types)
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
    if present:  # rows held: only the columns each row sets; then the rest inserted
        db.execute(d.update_present(target, staged, cols, keys, present, gone))
    db.execute(d.upsert(target, staged, cols, keys, gone))
    db.execute(d.delete(target, staged, keys))
