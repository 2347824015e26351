"""Sinks: where a planned batch of the change log (``binlake.spark.plan.BatchPlan``) is applied,
exactly once. One module per kind of target; adding one (Iceberg, DuckDB) is a new module that
implements ``Sink`` and a line in ``sink_for``.

Every sink keeps the same contract: a batch's rows and its position commit together (or the
position makes a replayed batch a no-op); a row is written only over an older order key; renames
upstream move the target's tables and columns; identifiers are quoted by ``binlake.dialects`` and
values go as bound parameters or typed Arrow data.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from binlake.spark.plan import BatchPlan, Phase, SyncReport
from binlake.spark.resume import Records


class Sink(Protocol):
    """A target a batch is applied to."""

    @property
    def shown(self) -> str:
        """What output may say of the target (never a password)."""
        ...

    def apply(self, plan: BatchPlan, on_phase: Phase = None) -> SyncReport:
        """Apply ``plan`` exactly once; what was done."""
        ...

    def records(self, spark: Any) -> AbstractContextManager[Records]:
        """Where batch syncs record how far they got, open while the block runs
        (``binlake.spark.resume``; a sink without it: each batch sync reads its whole input)."""
        ...

    def state_dir(self) -> Path | None:
        """The directory binlake's own state for this target lives in: a stream's default checkpoint,
        a live sync's journal and binlog copy, the Delta tables ``offsets`` reads (None: the target
        is a database — a checkpoint directory must be given)."""
        ...


KINDS = ("delta", "parquet", "jdbc")


def sink_for(url: str, *, password: str | None = None, chunk_rows: int = 50_000) -> Sink:
    """The sink a ``--to`` URL names: ``delta:PATH``, ``parquet:PATH`` or ``jdbc:postgresql://…`` /
    ``jdbc:mariadb://…`` / ``jdbc:mysql://…`` (``password`` kept out of the URL). Paths are made
    absolute: executors run in another directory, on a cluster on another host."""
    kind, _, where = url.partition(":")
    if kind not in KINDS or not where:
        raise ValueError(
            f"{url!r}: a target is delta:PATH, parquet:PATH or jdbc:postgresql://… / jdbc:mariadb://… "
            "(in Python, a pathlib.Path is a Delta directory)"
        )
    if kind == "jdbc":
        from binlake.spark.sinks.jdbc import JdbcSink

        return JdbcSink(url, password, chunk_rows=chunk_rows)
    from binlake.spark.source import absolute

    path = Path(absolute(where))
    if kind == "parquet":
        from binlake.spark.sinks.parquet import ParquetSink

        return ParquetSink(path, chunk_rows=chunk_rows)
    from binlake.spark.sinks.delta import DeltaSink

    return DeltaSink(path, chunk_rows=chunk_rows)


__all__ = ["KINDS", "Sink", "sink_for"]
