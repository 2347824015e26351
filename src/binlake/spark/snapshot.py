"""A live server's tables as change-log rows, read in parallel by Spark: one task per chunk.

The driver plans chunks (``binlake.snapshot.chunks.plan_chunks``: one pass over each primary
key); every task connects on its own, reads its chunk in one consistent snapshot with that
snapshot's binlog position, and yields its rows as inserts ordered just before the binlog's next
transaction (see ``binlake.snapshot``). The rows have the change log's schema, so the same apply
merges them with the binlog's changes: a later binlog change wins, an earlier one loses. Tasks
reach the server by its address (``ServerAddress``, pickled with the task: nothing assumes the
executors share the driver's host), never through options Spark would show in plans.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from binlake.arrowlog.changelog import CHANGELOG_SCHEMA, SPARK_DDL, changelog_batches
from binlake.replication.client import ServerAddress
from binlake.snapshot.catalog import CatalogTable, server_tables, table_layout
from binlake.snapshot.chunks import KeyRange, chunk_changes, plan_chunks, raw_conversions, read_chunk


@dataclass(frozen=True, slots=True)
class ChunkTask:
    """One chunk to read: the n-th range of a table's plan."""

    table: CatalogTable
    range: KeyRange
    index: int


def plan(
    server: ServerAddress, keep: Callable[[str, str], bool] | None = None, rows_per_chunk: int = 50_000
) -> list[ChunkTask]:
    """The chunks of every selected base table, planned on the driver."""
    conn = server.connect(conv=raw_conversions(), use_unicode=False)
    try:
        tasks = []
        for db, name in server_tables(conn, keep):
            table = table_layout(conn, db, name)
            tasks += [ChunkTask(table, r, i) for i, r in enumerate(plan_chunks(conn, table, rows_per_chunk))]
        return tasks
    finally:
        conn.close()


def read_tasks(server: ServerAddress, tasks: list[ChunkTask], source: str) -> Iterator[pa.RecordBatch]:
    """Change-log batches of some chunks, over one connection (run inside a Spark task)."""
    conn = server.connect(conv=raw_conversions(), use_unicode=False)
    try:
        for t in tasks:
            yield from changelog_batches(chunk_changes(read_chunk(conn, t.table, t.range), source))
    finally:
        conn.close()


class _ChunkPartition(InputPartition):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _SnapshotReader(DataSourceReader):
    def __init__(self, server: ServerAddress, tasks: list[ChunkTask], source: str) -> None:
        self.server, self.tasks, self.source = server, tasks, source

    def partitions(self) -> list[InputPartition]:
        return [_ChunkPartition(i) for i in range(len(self.tasks))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _ChunkPartition)
        yield from read_tasks(self.server, [self.tasks[partition.index]], self.source)


class _SnapshotSource(DataSource):
    """Made per snapshot as a subclass holding its plan (``snapshot_changelog``): Spark pickles the
    class to its workers, so the plan and the server's address travel with it, not as options."""

    server: ServerAddress
    tasks: list[ChunkTask]
    source: str
    registered: str

    @classmethod
    def name(cls) -> str:
        return cls.registered

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return _SnapshotReader(self.server, self.tasks, self.source)


def snapshot_changelog(
    spark: Any, server: ServerAddress, tasks: list[ChunkTask], source: str = "snapshot"
) -> Any:
    """A DataFrame of the chunks' rows in the change log's schema, one Spark partition per chunk."""
    if not tasks:
        return spark.createDataFrame([], SPARK_DDL)
    name = f"binlake_snapshot_{uuid.uuid4().hex}"
    attrs = {"server": server, "tasks": tasks, "source": source, "registered": name}
    spark.dataSource.register(type("BinlakeSnapshot", (_SnapshotSource,), attrs))
    return spark.read.format(name).load()


__all__ = ["CHANGELOG_SCHEMA", "ChunkTask", "plan", "read_tasks", "snapshot_changelog"]
