"""A streaming read decoded on the driver (``option("reads", "driver")``): for a low lag.

A micro-batch of a followed directory is small (at 100 txn/s and a 1 s trigger, some 100 row
changes). Read by Spark tasks, its first action runs a Python data-source worker that decodes those
few hundred bytes: under load 0.5–1 s of a micro-batch that takes 2–3 s. Read here, the driver
decodes the range when Spark asks for the latest offset and hands Spark the Arrow batches (Spark's
``SimpleDataSourceStreamReader``): the micro-batch's jobs then run in the JVM on data it already
holds, with no Python worker.

Offsets, ranges, schemas and the change log are the task reader's (``BinlogStreamReader``: the same
code, so the same rows). A micro-batch holds at most ``maxBatchBytes`` of binlog (cut at a
transaction boundary; default 32 MB): a long backlog is caught up in bounded batches the driver can
hold. A batch Spark replays after a restart (in its write-ahead log, not committed) is read again by
``readBetweenOffsets``, which Spark runs in a task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import SimpleDataSourceStreamReader

from binlake.errors import BinlogError
from binlake.sizes import parse_size
from binlake.spark.changelog import file_number
from binlake.spark.source import RangePartition, resolve_files
from binlake.spark.stream import BinlogStreamReader

try:  # Spark 4.3: lets ``trigger(availableNow=True)`` stop at the offset it began with
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark: availableNow runs as Spark's own wrapper
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

DEFAULT_MAX_BATCH = "32MB"
Offset = dict[str, Any]


class DriverStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    def __init__(self, options: dict[str, str]) -> None:
        self.max_bytes = parse_size(options.get("maxbatchbytes", DEFAULT_MAX_BATCH))
        # its ranges are cut at most this long, so a batch can end inside a long file
        self.ranges = BinlogStreamReader({**options, "splitsize": str(self.max_bytes)})
        self.until: Offset | None = None  # availableNow: the offset the query stops at

    def initialOffset(self) -> Offset:  # noqa: N802 - Spark's name
        return self.ranges.initialOffset()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self.until = self.ranges.latestOffset()

    def read(self, start: Offset) -> tuple[Iterator[Any], Offset]:
        """The change log from ``start`` to the newest complete transaction (at most
        ``max_bytes`` of binlog), decoded now, and the offset it ends at."""
        latest = self.until if self.until is not None else self.ranges.latestOffset()
        parts, end = self._bounded(start, latest)
        return iter([b for p in parts for b in self.ranges.read(p)]), end

    def readBetweenOffsets(self, start: Offset, end: Offset) -> Iterator[Any]:  # noqa: N802
        """A batch again (Spark replays it after a restart, in a task): its files must be there, or
        the replay would be empty and committed as done."""
        files = resolve_files(self.ranges.path)  # raises where the path names no binlogs
        names = {os.path.basename(f) for f in files}
        missing = [o["file"] for o in (start, end) if o["file"] and o["file"] not in names]
        if missing:
            raise BinlogError(
                f"replaying a micro-batch: {', '.join(missing)} not found under {self.ranges.path} "
                "(purged, or not visible where Spark ran the replay)"
            )
        return (b for p in self.ranges.partitions(start, end) for b in self.ranges.read(p))

    def _bounded(self, start: Offset, latest: Offset) -> tuple[list[RangePartition], Offset]:
        """The ranges from ``start`` on that hold at most ``max_bytes`` (at least one range),
        with the schemas as of each, and the offset after the last. Only the files up to the
        bound are scanned, and the DDL pass is moved no further than what is returned."""
        if not latest["file"] or latest == start:
            return [], start
        files = self.ranges.files_now()
        if start["file"] and _key(latest) < _key(start):
            raise BinlogError(
                f"the binlogs under {self.ranges.path} end before this stream's offset "
                f"{start['file']}:{start['pos']} (reset or replaced?): start a new checkpoint"
            )
        bound, total = latest, 0
        for path in files:
            name = os.path.basename(path)
            if start["file"] and _key({"file": name}) < _key(start):
                continue
            if _key({"file": name}) >= _key(latest):
                break
            first = start["pos"] if name == start["file"] else 4
            total += os.path.getsize(path) - first
            if total > self.max_bytes:
                bound = {"file": name, "pos": os.path.getsize(path)}  # a rotated file: it ends whole
                break
        parts: list[RangePartition] = []
        total = 0
        for p in self.ranges.ranges_between(files, start, bound):
            if parts and total + end_of(p) - p.start > self.max_bytes:
                break
            parts.append(p)
            total += end_of(p) - p.start
        if not parts:
            return [], start
        parts = self.ranges.with_schemas(parts, files)
        return parts, {"file": os.path.basename(parts[-1].path), "pos": end_of(parts[-1])}

    def commit(self, end: Offset) -> None:
        pass  # nothing held: correctness never depends on this being called


def _key(offset: Offset) -> tuple[int, str]:
    """An offset's file in series order."""
    return (file_number(offset["file"]), offset["file"])


def end_of(p: RangePartition) -> int:
    """Where range ``p`` ends (a stream's ranges always say; None would be the file's end)."""
    return p.end if p.end is not None else os.path.getsize(p.path)
