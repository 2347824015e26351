"""``spark.read.format("binlog")``: the change log of a binlog series as a Spark DataFrame.

One partition per file (files are independent: a transaction never spans two). ``read`` yields Arrow
record batches. Options: ``schema`` (a saved schema history .json or DDL script, for binlogs without
column metadata), ``source`` (a name for the series, stored in every row).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from binlake.spark.changelog import SPARK_DDL, file_changes, to_batches


def resolve_files(path: str) -> list[str]:
    """A directory (numbered binlogs or its .index), an index file, a glob, or one file."""
    from binlake.series import BinlogSeries

    if any(ch in path for ch in "*?["):
        return sorted(glob.glob(path), key=lambda p: (os.path.dirname(p), p))
    return [str(f) for f in BinlogSeries.open(path).files]


class FilePartition(InputPartition):
    def __init__(self, index: int, path: str) -> None:
        super().__init__(index)
        self.path = path


class BinlogReaderSpark(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [FilePartition(i, p) for i, p in enumerate(resolve_files(self.options["path"]))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FilePartition)
        observers = []
        schema = self.options.get("schema")
        if schema:
            from binlake.schema import SchemaHistory, SchemaTracker

            history = SchemaHistory.open(schema)
            history.catalog = history.at((os.path.basename(partition.path), 0))
            observers.append(SchemaTracker(history, on_mismatch=self.options.get("schemaMismatch", "error")))
        source = self.options.get("source", os.path.dirname(self.options["path"]) or self.options["path"])
        yield from to_batches(file_changes(partition.path, source, observers))


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "binlog"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return BinlogReaderSpark(dict(self.options))

    def streamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        from binlake.spark.stream import BinlogStreamReader

        return BinlogStreamReader(dict(self.options))


def register(spark: Any) -> None:
    spark.dataSource.register(BinlogDataSource)
