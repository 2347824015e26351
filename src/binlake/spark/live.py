"""A live server into a sink in one run: a snapshot of its tables, then its binlog from before the
snapshot on (issue #16).

1. **Plan** (once; kept in the state directory's journal): the binlog file the server writes now —
   the replica starts at its beginning, before every chunk's position — each selected table's key
   ranges (``binlake.snapshot``), and the tables' definitions at a binlog position (the schema
   history's seed, ``schema.json``: a binlog without column metadata is read by it, and by the
   DDL after that position).
2. **Snapshot**: the chunks not yet applied, a wave at a time, read by Spark tasks and applied by
   the sink under its order-key guard alone: a chunk is a point in the binlog, not a stretch of
   it, so it records no batch position, nor compares one (``positioned=False``, every sink: two
   waves read while the server wrote nothing share one position, and a sink comparing positions
   skipped the second as "already applied" — the test matrix lost rows in PostgreSQL that way).
   The journal records a wave after the sink's commit, so a kill costs at most one wave,
   re-applied harmlessly.
3. **Binlog**: ``binlake mirror``'s replica copies the server's files from that start into the
   state directory (first up to the server's end, then following it), and the sync applies the
   copy as any binlog directory. A change before a chunk's position loses to the chunk's row, a
   change after it wins (their order keys), so nothing is missed or applied twice whatever the
   server did during the snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.replication.client import (
    FilePosition,
    Reconnected,
    ReplicaClient,
    ServerAddress,
    current_position,
)
from binlake.replication.mirror import Mirror
from binlake.snapshot.catalog import server_tables, table_layout
from binlake.snapshot.chunks import plan_chunks, raw_conversions
from binlake.snapshot.journal import ChunkId, SnapshotJournal
from binlake.snapshot.schema import seed_at_position
from binlake.spark.snapshot import ChunkTask, snapshot_changelog

Keep = Callable[[str, str], bool]
JOURNAL, MIRROR, SCHEMA = "snapshot.json", "binlog", "schema.json"


@dataclass
class LiveSync:
    """The state of one server -> sink run: ``state`` holds the journal and the mirrored binlog
    (read by the driver only; a sink's data lives in the sink)."""

    server: ServerAddress
    state: Path
    keep: Keep | None = None
    rows_per_chunk: int = 50_000
    chunks_per_wave: int = 8
    journal: SnapshotJournal = field(init=False)

    def __post_init__(self) -> None:
        self.state = Path(self.state)
        found = SnapshotJournal.load(self.state / JOURNAL)
        self.journal = found if found is not None else self._plan()

    @property
    def mirror_dir(self) -> Path:
        return self.state / MIRROR

    @property
    def schema_path(self) -> Path | None:
        """The schema history's seed: the tables as the server defined them at the plan (the
        binlog's DDL after that keeps it in step), or None for a journal planned without one."""
        p = self.state / SCHEMA
        return p if p.exists() else None

    def _plan(self) -> SnapshotJournal:
        status = self.server.connect()
        try:  # before any chunk is read: the binlog from the start of this file covers them all
            start = current_position(status).file
        finally:
            status.close()
        conn = self.server.connect(conv=raw_conversions(), use_unicode=False)
        try:
            plan = {}
            for db, name in server_tables(conn, self.keep):
                plan[(db, name)] = plan_chunks(conn, table_layout(conn, db, name), self.rows_per_chunk)
        finally:
            conn.close()
        self.state.mkdir(parents=True, exist_ok=True)
        conn = self.server.connect()
        try:  # the tables' definitions at a position after the start: the binlog's column names
            seed_at_position(conn, list(plan)).save(self.state / SCHEMA)  # (MINIMAL metadata has none)
        finally:
            conn.close()
        journal = SnapshotJournal(self.state / JOURNAL, (start, 4), plan)
        journal.save()
        return journal

    def waves(self) -> Iterator[list[ChunkId]]:
        todo = self.journal.remaining
        for i in range(0, len(todo), self.chunks_per_wave):
            yield todo[i : i + self.chunks_per_wave]

    def tasks(self, ids: list[ChunkId]) -> list[ChunkTask]:
        """The chunks to read, each table's layout read from the catalog now."""
        conn = self.server.connect(conv=raw_conversions(), use_unicode=False)
        try:
            tables = {(db, t): table_layout(conn, db, t) for db, t in {(db, t) for db, t, _ in ids}}
        finally:
            conn.close()
        return [ChunkTask(tables[(db, t)], self.journal.plan[(db, t)][i], i) for db, t, i in ids]

    def snapshot(
        self,
        spark: Any,
        apply: Callable[[Any], Any],
        on_wave: Callable[[int, int], None] | None = None,
    ) -> int:
        """Read and apply every chunk not yet applied, wave by wave (``apply`` must neither record
        nor compare a batch position: module docstring); the rows applied."""
        rows = 0
        source = f"snapshot:{self.server.label}"
        for ids in self.waves():
            report = apply(snapshot_changelog(spark, self.server, self.tasks(ids), source=source))
            rows += int(getattr(report, "changes", 0) or 0)
            self.journal.mark_done(ids)
            if on_wave is not None:
                on_wave(len(self.journal.done), len(self.journal.chunks))
        return rows

    def mirror(self, blocking: bool, stop: threading.Event | None = None) -> int:
        """Copy the server's binlog into ``mirror_dir`` from the journal's start (or where an
        earlier mirror stopped); ``blocking`` follows it, else stops at the server's current end.
        Returns the events written."""
        m = Mirror(self.mirror_dir)
        start = m.resume_point() or FilePosition(*self.journal.start)
        client = ReplicaClient(self.server, start, blocking=blocking)
        n = 0
        try:
            for item in client.events():
                if stop is not None and stop.is_set():
                    break
                if not isinstance(item, Reconnected) and m.write(item):
                    n += 1
        finally:
            client.close()
            m.close()
        return n
