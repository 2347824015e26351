"""Renames followed in JDBC targets (see ``binlake.spark.renames`` for the plan): each step a move
into a free name, told done or not by the catalog; ``_binlake_renames`` records how far."""

from __future__ import annotations

from collections.abc import Callable

from binlake.schema.renames import ColumnRename, TableRename
from binlake.spark.renames import Journal, RenamePlan, Step, rename_work
from binlake.spark.sinks.jdbc_connection import Jdbc, move_name
from binlake.spark.sinks.jdbc_dialects import RENAMES
from binlake.targetnames import replaced_name


def rename_jdbc_targets(db: Jdbc, plan: RenamePlan, source: str, version: int, upto: bytes) -> list[str]:
    """Rename target tables and columns as the batch ``version`` (ending at order key ``upto``)
    renamed them upstream, once. Each step is a move into a free name (``RenamePlan.steps``), so the
    one a kill interrupted is told done or not by the catalog; ``_binlake_renames`` records how far
    the targets follow and the steps behind."""
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
    phases, renamed = rename_work(journal, plan, version, upto)

    def save(journal: Journal) -> None:
        db.execute(f"DELETE FROM {RENAMES} WHERE source = ?", [source])
        db.execute(
            f"INSERT INTO {RENAMES} (source, version, base, upto, done) VALUES (?, ?, ?, ?, ?)",
            [source, journal.version, journal.base.hex(), journal.upto.hex(), journal.done],
        )

    for journal, steps in phases:  # an unfinished journal's steps first, then this batch's
        if plan.keys and journal.version == version and journal.done == 0:
            save(journal)  # the targets follow up to here (even with nothing to rename in them)
        run_steps(db, steps, journal, save)
    return renamed


def run_steps(db: Jdbc, steps: list[Step], journal: Journal, save: Callable[[Journal], None]) -> None:
    """``steps`` from ``journal.done`` on, each told done or not by the catalog, the journal saved
    after each (``version``: the journal's, in the names of what a step moves aside)."""
    d, version = db.dialect, journal.version
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
        save(journal)
