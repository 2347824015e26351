"""``spark.readStream.format("binlog")``: follow a directory whose binlogs grow (a server's binlog
directory, or the files the replication client mirrors).

Offsets are transaction boundaries: ``{"file": name, "pos": offset}`` just past the last complete
transaction. An incomplete tail (a transaction the server is still writing, or a half-written event)
is waited for: it is only read once complete. Each micro-batch reads, per file, the range between
the previous offset and the new one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from binlake.errors import BinlogError, IncompleteTailError
from binlake.position import HEADER_ONLY
from binlake.reader import BinlogReader
from binlake.spark.changelog import file_changes, file_number, to_batches
from binlake.spark.source import resolve_files
from binlake.txn import UNFINISHED, TransactionGrouper


def last_boundary(path: str, start: int) -> int:
    """The offset just past the last complete transaction of a file, from ``start`` (header-only)."""
    g = TransactionGrouper(keep_events=False)
    end = start
    try:
        for ev in BinlogReader(path, skip=HEADER_ONLY, start_position=start if start > 4 else None):
            for t in g.feed(0, ev):
                if t.kind != UNFINISHED:
                    end = max(end, t.end)
            if ev.type_name in ("ROTATE", "STOP") and g.current is None:
                end = max(end, ev.end_offset)
    except IncompleteTailError:
        pass  # the server is still writing it: what follows the last boundary waits for the next batch
    except BinlogError:
        raise
    return end


class RangePartition(InputPartition):
    def __init__(self, index: int, path: str, start: int, end: int) -> None:
        super().__init__(index)
        self.path, self.start, self.end = path, start, end


class BinlogStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.path = options["path"]

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        return {"file": "", "pos": 0}

    def _files(self) -> list[str]:
        try:
            return resolve_files(self.path)
        except BinlogError:
            return []

    def latestOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        files = self._files()
        if not files:
            return {"file": "", "pos": 0}
        # the newest file with a complete transaction decides; older files are complete once rotated
        for path in reversed(files):
            end = last_boundary(path, 4)
            if end > 4:
                return {"file": os.path.basename(path), "pos": end}
        return {"file": "", "pos": 0}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for path in self._files():
            name = os.path.basename(path)
            key = (file_number(name), name)
            lo = (file_number(start["file"]), start["file"]) if start["file"] else (-1, "")
            hi = (file_number(end["file"]), end["file"]) if end["file"] else (-1, "")
            if key < lo or key > hi:
                continue
            first = start["pos"] if key == lo else 4
            last = end["pos"] if key == hi else os.path.getsize(path)
            if last > first:
                parts.append(RangePartition(len(parts), path, first, last))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        source = self.options.get("source", self.path)
        rows = file_changes(
            partition.path, source, start=partition.start if partition.start > 4 else None, stop=partition.end
        )
        yield from to_batches(rows)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing to clean up: correctness never depends on this being called

    @staticmethod
    def dumps(offset: dict[str, Any]) -> str:
        return json.dumps(offset)
