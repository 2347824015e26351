"""``spark.read.format("binlog")``: the change log of a binlog series as a Spark DataFrame.

One partition per file (files are independent: a transaction never spans two), and files bigger
than ``splitSize`` (default 32MB; 0 turns splitting off) cut at transaction boundaries found by a
header-only scan, so one big file still uses every core. ``read`` yields Arrow
record batches. Options: ``schema`` (a saved schema history .json or DDL script, for binlogs without
column metadata), ``source`` (a name for the series, stored in every row), ``splitSize``; and a selection:
``databases``, ``tables`` (``db.table`` or ``table`` globs), ``operations`` (insert,update,delete),
``startDatetime``/``stopDatetime`` (by commit time), ``includeGtids``/``excludeGtids`` (GTID sets).
Spark filters on ``db``, ``table``, ``op`` and ``commit_ts`` are pushed down the same way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from binlake.filters import Selection
from binlake.sizes import parse_size
from binlake.spark.changelog import SPARK_DDL, file_changes, to_batches
from binlake.spark.pushdown import AllOf, selection_from_filters

DEFAULT_SPLIT = "32MB"


def resolve_files(path: str) -> list[str]:
    """A directory (numbered binlogs or its .index), an index file, a glob, or one file; absolute,
    resolved on the driver: executors run elsewhere (another cwd, another host), so a partition
    never carries a path relative to the driver's working directory."""
    from binlake.series import series_files

    return [os.path.abspath(f) for f in series_files(path)]


def absolute(path: str) -> str:
    """A local path made absolute against this process's working directory; a URL unchanged."""
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


def driver_options(options: Any) -> dict[str, str]:
    """The reader's options: lower-cased (Spark hands them over case-insensitive) and the files
    executors open themselves (``schema``) made absolute here on the driver. ``path`` is kept as
    given: it names the source in every row; the files it resolves to are absolute."""
    out = {k.lower(): v for k, v in options.items()}
    if out.get("schema"):
        out["schema"] = absolute(out["schema"])
    return out


class RangePartition(InputPartition):
    """Bytes [start, end) of one binlog file, both transaction boundaries (end None: to the end)."""

    def __init__(self, index: int, path: str, start: int = 4, end: int | None = None) -> None:
        super().__init__(index)
        self.path, self.start, self.end = path, start, end


def read_range(
    options: dict[str, str], part: RangePartition, pushed: Selection | None = None
) -> Iterator[Any]:
    """The change log of one range as Arrow batches: batch and streaming reads share it. ``pushed``:
    the selection implied by filters Spark pushed down (applied before row images are built)."""
    observers = []
    schema = options.get("schema")
    if schema:
        from binlake.schema import SchemaHistory, SchemaTracker

        history = SchemaHistory.open(schema)
        history.catalog = history.at((os.path.basename(part.path), part.start))
        observers.append(SchemaTracker(history, on_mismatch=options.get("schemamismatch", "error")))
    path = options["path"]
    source = options.get("source", os.path.dirname(path) or path)
    start = part.start if part.start > 4 else None
    chosen = [
        sel for sel in (Selection.from_options(options), pushed) if sel is not None and sel != Selection()
    ]
    rows = file_changes(
        part.path,
        source,
        observers,
        start=start,
        stop=part.end,
        selection=None if not chosen else chosen[0] if len(chosen) == 1 else AllOf(*chosen),
    )
    yield from to_batches(rows)


def plan_ranges(files: list[str], split_bytes: int) -> list[RangePartition]:
    """One range per file, files bigger than ``split_bytes`` cut at transaction boundaries (0: never).
    The last file may be a live server's active file: it is read up to its last complete transaction
    (with a warning when something after it is unfinished); an earlier file cut short is an error."""
    parts: list[RangePartition] = []
    for i, path in enumerate(files):
        for lo, hi in file_ranges(path, split_bytes, active=i == len(files) - 1):
            parts.append(RangePartition(len(parts), path, lo, hi))
    return parts


def file_ranges(path: str, split_bytes: int, *, active: bool) -> list[tuple[int, int | None]]:
    """The [start, end) ranges of one file (end None: to the end of the file). One header-only scan
    finds both the split points and whether the tail is complete; a file the server closed and that
    needs no split is not scanned at all."""
    from binlake.position import TailScan, split_points
    from binlake.tail import complete_end, just_created, needs_scan, still_writing

    if just_created(path, active=active):
        return []
    size = os.path.getsize(path)
    split = bool(split_bytes) and size > split_bytes
    scan = TailScan(path) if split or needs_scan(path, active=active) else None
    cuts = split_points(path, split_bytes, ends=scan) if split else []
    end = complete_end(scan, active=active) if scan is not None else None
    if scan is not None and end is not None:
        warn(still_writing(scan))
    cuts = [c for c in cuts if c < (size if end is None else end)]
    return [(lo, hi) for lo, hi in zip([4, *cuts], [*cuts, end], strict=True) if hi is None or hi > lo]


def warn(message: str) -> None:
    """One warning line on stderr (Spark shows a planner's stderr on the driver's console)."""
    print(f"binlake: warning: {message}", file=sys.stderr, flush=True)


class BinlogReaderSpark(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.pushed: Selection | None = None

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:  # noqa: N802 - Spark's name
        """Keep what db/table/op/commit_ts filters rule out from being built at all; Spark still
        evaluates every filter (the pushed selection keeps a superset)."""
        self.pushed = selection_from_filters(filters)
        return filters

    def partitions(self) -> list[InputPartition]:
        split = parse_size(self.options.get("splitsize", DEFAULT_SPLIT))
        return list(plan_ranges(resolve_files(self.options["path"]), split))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.options, partition, self.pushed)


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "binlog"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return BinlogReaderSpark(driver_options(self.options))

    def streamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        from binlake.spark.stream import BinlogStreamReader

        return BinlogStreamReader(driver_options(self.options))


def register(spark: Any) -> None:
    spark.dataSource.register(BinlogDataSource)
