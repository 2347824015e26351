"""Parquet snapshots, one file per table, refreshed every batch.

Parquet cannot MERGE, so the exactly-once state is a Delta target beside the snapshots
(``_binlake_state``); after each batch every table's snapshot is rewritten from it whole and
replaced atomically (readers see the old file or the new one).
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.spark.plan import BatchPlan, Phase, SyncReport
from binlake.spark.resume import FileRecords
from binlake.spark.sinks.delta import DeltaSink, delta_tables, read_delta
from binlake.targetnames import NAME_BOOK, NameBook, inside

STATE = "_binlake_state"
SNAPSHOT_BOOK = "_binlake_snapshots.json"  # the Parquet snapshot files binlake wrote


@dataclass(frozen=True)
class ParquetSink:
    """Snapshots in ``target``; the state in ``target/_binlake_state``."""

    target: Path
    chunk_rows: int = 50_000

    @property
    def shown(self) -> str:
        return f"parquet:{self.target}"

    @property
    def state(self) -> DeltaSink:
        return DeltaSink(self.target / STATE, self.chunk_rows)

    def state_dir(self) -> Path | None:
        return self.state.target

    def records(self, spark: Any) -> AbstractContextManager[FileRecords]:
        """Where batch syncs record how far they got (``binlake.spark.resume``)."""
        return self.state.records(spark)

    def apply(self, plan: BatchPlan, on_phase: Phase = None) -> SyncReport:
        report = self.state.apply(plan, on_phase)
        if on_phase is not None:
            on_phase("writing Parquet snapshots")
        report.snapshots = export_parquet(self.state.target, self.target)
        return report


def export_parquet(source: str | Path, target: str | Path) -> dict[str, int]:
    """A Parquet snapshot ``<table dir>.parquet`` of every synced table (tombstones and system
    columns removed), each file replaced whole; snapshots binlake wrote of tables no longer there
    (renamed upstream) go — no other file is ever removed. The source's name book is copied, so
    ``db.table`` is found again (see ``binlake.targetnames``)."""
    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    where = Path(target)
    where.mkdir(parents=True, exist_ok=True)
    book = where / SNAPSHOT_BOOK
    written: list[str] = json.loads(book.read_text()) if book.exists() else []
    tables = delta_tables(source)
    for name in tables:
        table = read_delta(source, name)
        file = inside(where, f"{name}.parquet")
        tmp = file.with_name(f".{file.name}.tmp")
        pq.write_table(table, str(tmp))
        if file.name not in written:  # recorded before it exists: a kill leaves nothing unlisted
            written.append(file.name)
            _save_json(book, written)
        os.replace(tmp, file)  # readers see the old snapshot or the new one
        out[name] = table.num_rows
    keep = {f"{name}.parquet" for name in tables}
    for stale in [n for n in written if n not in keep]:
        inside(where, stale).unlink(missing_ok=True)
        written.remove(stale)
    _save_json(book, written)
    names = NameBook.open(Path(source) / NAME_BOOK)
    _save_json(where / NAME_BOOK, {f"{n}.parquet": names.source(n) for n in tables})
    return out


def _save_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False, sort_keys=True))
    os.replace(tmp, path)
