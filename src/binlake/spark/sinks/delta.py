"""Delta Lake tables (deltalake, no JVM jars), one per source table under a directory.

Per batch and table: one MERGE guarded by the order key — a replayed or late batch changes nothing —
committed with the batch's binlog position as the Delta app-transaction version and in the commit
metadata; a table at or past the batch's version is skipped. Tables without a primary key get an
append-only change table (``_binlake_op`` says which change), appended once per batch.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.dialects import delta as sql
from binlake.spark import trace
from binlake.spark.plan import BatchPlan, FillPlan, Phase, SyncReport, TablePlan
from binlake.spark.resume import FileRecords
from binlake.spark.sinks.delta_renames import rename_delta_targets
from binlake.spark.typed import arrow_type
from binlake.spark.typedrows import COMMIT_TS, DELETED, GTID, MASK, OP, ORDER, presence
from binlake.targetnames import NAME_BOOK, NameBook, escape_reserved, inside, path_name

APP_ID = "binlake-sync"
FILL_KEY = "_binlake_fill_key_"  # a fill's order key in the one-row source of ``_fill_held``


@dataclass(frozen=True)
class DeltaSink:
    """Delta tables under ``target``, each in a directory named injectively after ``db.table``
    (``binlake.targetnames``), exactly once by app-transaction versions."""

    target: Path
    chunk_rows: int = 50_000

    @property
    def shown(self) -> str:
        return f"delta:{self.target}"

    def state_dir(self) -> Path | None:
        return self.target

    def records(self, spark: Any) -> AbstractContextManager[FileRecords]:
        """Where batch syncs record how far they got (``binlake.spark.resume``)."""
        return nullcontext(FileRecords(self.target))

    def apply(self, plan: BatchPlan, on_phase: Phase = None) -> SyncReport:
        phase = on_phase or (lambda _: None)
        report = plan.report
        if plan.empty:
            return report
        with trace.span("delta renames"):
            report.renamed = rename_delta_targets(
                self.target, plan.renames, report.version, plan.last_order_key
            )
        fills = plan.fills
        # by (db, table): a name joined with "." is not one table (`a.b`.`c` and `a`.`b.c`)
        named = {(t.db, t.table) for t in plan.tables} | {(f.db, f.table) for f in fills}
        paths = {key: table_path(self.target, *key) for key in sorted(named)}
        # what each table had committed before this batch (a table can come twice: a key added or
        # dropped within the batch gives it keyed and keyless changes)
        with trace.span("delta versions"):
            done = {key: committed_version(self.target, path.name) for key, path in paths.items()}
        merged = set()
        for t in plan.tables:
            phase(f"merging {t.name}")
            was = done[(t.db, t.table)] if plan.positioned or t.keyless else None
            if was is not None and was >= report.version:
                report.skipped.append(t.name)
                continue
            path = paths[(t.db, t.table)]
            if t.keyless:
                n = self._append(plan, t, path)
            else:
                n = self._merge(plan, t, path)
                merged.add((t.db, t.table))
            report.tables[t.name] = report.tables.get(t.name, 0) + n
        # a table the batch adds columns to without changing a row of it: the rows it held
        held: dict[tuple[str, str], list[FillPlan]] = {}
        for f in fills:
            if (f.db, f.table) not in merged:
                held.setdefault((f.db, f.table), []).append(f)
        for key, table_fills in held.items():
            was = done[key]
            if was is not None and was >= report.version:
                continue
            phase(f"filling {table_fills[0].name}")
            if self._fill_held(plan, table_fills, paths[key], report.version):
                report.filled += [f"{f.name}: {f.column}" for f in table_fills]
        return report

    def _fill_held(self, plan: BatchPlan, fills: list[FillPlan], path: Path, version: int | None) -> bool:
        """Give the rows the table held before the batch the values of the columns the batch adds
        (``fills``, one per column): one MERGE of a one-row source over every row older than the
        last fill, each column set where the row is older than its own fill (idempotent: a rerun
        sets the same values). The batch's own rows carry theirs (``BatchPlan.rows(filled=True)``).
        ``version``: this commit records the batch's version (a table with no row change in it)."""
        from deltalake import CommitProperties, DeltaTable, Schema, Transaction

        if not fills or not (path / "_delta_log").exists():
            return False  # the target holds no row of the table
        table = DeltaTable(str(path))
        have = pa.schema(table.schema().to_arrow())
        if OP in have.names:
            return False  # a change table holds changes as they were, not rows
        typed = [plan.fill_rows(f) for f in fills]
        columns = [cs[0] for cs, _ in typed]
        # a column the table has keeps its type (a later MODIFY, or the batch's rows, may have
        # widened it: the value is cast to it, never the column to the add's type); one it lacks
        # is added in the add's type
        added = [row.schema.field(0) for _, row in typed if row.schema.names[0] not in have.names]
        if added:
            table.alter.add_columns(Schema.from_arrow(pa.schema(added)).fields)
        props = CommitProperties(
            custom_metadata={**plan.metadata, "binlake.columns": json.dumps(columns)},
            app_transactions=[Transaction(APP_ID, version)] if version is not None else None,
        )
        source: dict[str, pa.Array] = {}
        updates = {}
        for i, (f, (_, row)) in enumerate(zip(fills, typed, strict=True)):
            name, key = row.schema.names[0], f"{FILL_KEY}{i}"
            value = row.column(0)
            if name in have.names and have.field(name).type != value.type:
                value = value.cast(have.field(name).type)
            source[name], source[key] = value, pa.array([f.order_key], pa.binary())
            older = f"{sql.column('t', ORDER)} < {sql.column('s', key)}"
            updates[sql.quote_ident(name)] = (
                f"CASE WHEN {older} THEN {sql.column('s', name)} ELSE {sql.column('t', name)} END"
            )
        source[ORDER] = pa.array([max(f.order_key for f in fills)], pa.binary())
        newest = f"{sql.column('t', ORDER)} < {sql.column('s', ORDER)}"
        (
            DeltaTable(str(path))
            .merge(pa.table(source), newest, source_alias="s", target_alias="t", commit_properties=props)
            .when_matched_update(updates)
            .execute()
        )
        if version is not None and DeltaTable(str(path)).transaction_version(APP_ID) != version:
            commit_empty(path, props)
        return True

    def _merge(self, plan: BatchPlan, t: TablePlan, path: Path) -> int:
        """One MERGE per table in the columns of all its layouts of the batch (ADD COLUMN evolves
        the table), each column in its type in the newest layout (a type change widens it), its
        rows carrying the values of the columns the batch adds; the rows the table held before
        get them first (``_fill_held``). The MERGE records the batch's version."""
        fills = plan.table_fills(t)
        self._fill_held(plan, fills, path, None)
        columns, counted = plan.rows(t, chunk_rows=self.chunk_rows, filled=True)
        with trace.span(f"delta merge {t.name}"):
            widen_table(path, {c["name"]: arrow_type(c) for c in columns})
            keys = [c["name"] for c in columns if c.get("pk")]
            version = plan.report.version if plan.positioned else None
            merge_table(
                path,
                counted.stream,
                keys,
                version,
                {**plan.metadata, "binlake.columns": json.dumps(columns)},
                presence(counted.stream.schema, columns),
            )
        plan.report.filled += [f"{f.name}: {f.column}" for f in fills]
        return counted.n

    def _append(self, plan: BatchPlan, t: TablePlan, path: Path) -> int:
        """A change table: the batch's changes after the order key its last append recorded (a
        rerun over a grown directory re-reads changes already appended), in one commit per table
        and batch — appends are not idempotent, so never split."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        columns, counted = plan.rows(t, chunk_rows=self.chunk_rows, after=appended_upto(path))
        props = CommitProperties(
            custom_metadata={**plan.metadata, "binlake.columns": json.dumps(columns)},
            app_transactions=[Transaction(APP_ID, plan.report.version)],
        )
        path.mkdir(parents=True, exist_ok=True)
        write_deltalake(
            str(path), counted.stream, mode="append", schema_mode="merge", commit_properties=props
        )
        return counted.n


def committed_version(target: str | Path, table: str) -> int | None:
    """The batch version a target table (by directory name) has committed, if any."""
    from deltalake import DeltaTable

    path = inside(Path(target), table)
    if not (path / "_delta_log").exists():
        return None
    return DeltaTable(str(path)).transaction_version(APP_ID)


def table_path(target: Path, db: str, table: str) -> Path:
    """Where table ``db.table`` (sink-space names) lives under ``target``: an injective file name
    that cannot leave it, recorded in the target's name book."""
    name = path_name(db, table)
    NameBook.open(target / NAME_BOOK).claim(name, db, table)
    return inside(target, name)


def widen_table(path: Path, types: dict[str, pa.DataType]) -> None:
    """Give an existing Delta table's columns their new types (a type change upstream) by rewriting
    it once, values cast (a value that does not fit is an error, nothing is lost). Idempotent: a rerun
    finds the table already rewritten."""
    from deltalake import DeltaTable, write_deltalake

    if not (path / "_delta_log").exists():
        return
    table = DeltaTable(str(path))
    schema = pa.schema(table.schema().to_arrow())
    changed = {f.name: types[f.name] for f in schema if f.name in types and f.type != types[f.name]}
    if not changed:
        return
    data = table.to_pyarrow_table()
    data = data.cast(pa.schema([f.with_type(changed.get(f.name, f.type)) for f in data.schema]))
    write_deltalake(str(path), data, mode="overwrite", schema_mode="overwrite")


def merge_table(
    path: Path,
    batch: Any,
    keys: list[str],
    version: int | None,
    metadata: dict[str, str],
    present: dict[str, int] | None = None,
) -> None:
    """Upsert ``batch`` (a table or an Arrow stream) by key, newer order keys winning, in one commit
    that records ``version`` as the app transaction (None: an idempotent step before the last).
    ``present``: column -> its place in the batch's ``typedrows.MASK`` saying whether a row sets it
    (images lacking columns): a row that does not keeps the target's value, or NULL when inserted."""
    from deltalake import CommitProperties, DeltaTable, Schema, Transaction, write_deltalake

    present = present or {}
    names = [n for n in batch.schema.names if n != MASK]  # the mask is never a target column
    txns = [Transaction(APP_ID, version)] if version is not None else None
    props = CommitProperties(custom_metadata=metadata, app_transactions=txns)
    if not (path / "_delta_log").exists():
        path.mkdir(parents=True, exist_ok=True)
        write_deltalake(str(path), without(batch, MASK), mode="append", commit_properties=props)
        return
    predicate = sql.keys_equal(keys)
    table = DeltaTable(str(path))
    have = pa.schema(table.schema().to_arrow())
    added = [f for f in batch.schema if f.name not in have.names and f.name != MASK]
    if added:  # ADD COLUMN upstream (its own commit; a rerun finds the column there)
        table.alter.add_columns(Schema.from_arrow(pa.schema(added)).fields)
        table = DeltaTable(str(path))
    # columns dropped or renamed upstream stay in the table; a row changed after that reads NULL there
    gone = [name for name in have.names if name not in names]
    q = sql.quote_ident

    def value(c: str) -> str:
        if c not in present:
            return sql.column("s", c)
        sets = f"substr({sql.column('s', MASK)}, {int(present[c])}, 1) = '1'"
        return f"CASE WHEN {sets} THEN {sql.column('s', c)} ELSE {sql.column('t', c)} END"

    updates = {q(c): value(c) for c in names} | {q(c): "NULL" for c in gone}
    newer = f"{sql.column('s', ORDER)} > {sql.column('t', ORDER)}"
    (
        table.merge(batch, predicate, source_alias="s", target_alias="t", commit_properties=props)
        .when_matched_update(updates, predicate=newer)
        # every column named and quoted here: delta-rs's insert_all does not quote the names it makes
        .when_not_matched_insert({q(c): sql.column("s", c) for c in names})
        .execute()
    )
    if version is not None and DeltaTable(str(path)).transaction_version(APP_ID) != version:
        commit_empty(path, props)  # a MERGE that changed no row commits nothing, nor the version


def without(batch: Any, name: str) -> Any:
    """A table or Arrow stream without column ``name`` (if it has one)."""
    if name not in batch.schema.names:
        return batch
    if isinstance(batch, pa.Table):
        return batch.drop_columns([name])
    schema = pa.schema([f for f in batch.schema if f.name != name])
    return pa.RecordBatchReader.from_batches(schema, (b.select(schema.names) for b in batch))


def commit_empty(path: Path, props: Any, *, overwrite: bool = False) -> None:
    """A commit of no rows carrying ``props`` (the app-transaction version, metadata): the position
    alone, or with ``overwrite`` every row removed (the rows stay in the table history)."""
    from deltalake import DeltaTable, write_deltalake

    nothing = pa.schema(DeltaTable(str(path)).schema().to_arrow()).empty_table()
    write_deltalake(str(path), nothing, mode="overwrite" if overwrite else "append", commit_properties=props)


def appended_upto(path: Path) -> bytes | None:
    """The order key up to which a change table holds its source's changes (its last batch's)."""
    from deltalake import DeltaTable

    if not (path / "_delta_log").exists():
        return None
    for commit in DeltaTable(str(path)).history():
        if "binlake.order_key" in commit:
            return bytes.fromhex(str(commit["binlake.order_key"]))
    return None


def read_delta(target: str | Path, table: str) -> pa.Table:
    """A synced table (by directory name) as it reads: tombstones and system columns removed."""
    from deltalake import DeltaTable

    t = DeltaTable(str(inside(Path(target), table))).to_pyarrow_table()
    t = t.filter(pa.compute.invert(t[DELETED]))
    return t.drop_columns([ORDER, DELETED, GTID, COMMIT_TS])


def read_table(target: str | Path, db: str, table: str) -> pa.Table:
    """Source table ``db.table`` as synced (see ``read_delta``)."""
    return read_delta(target, path_name(db, escape_reserved(table)))


def delta_tables(target: str | Path) -> list[str]:
    """The synced tables' directory names under ``target``."""
    return (
        sorted(p.name for p in Path(target).iterdir() if (p / "_delta_log").exists())
        if os.path.isdir(target)
        else []
    )
