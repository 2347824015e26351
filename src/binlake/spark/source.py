"""``spark.read.format("binlog")``: the change log of a binlog series as a Spark DataFrame.

One partition per file (files are independent: a transaction never spans two), and files bigger
than ``splitSize`` (default 32MB; 0 turns splitting off) cut at transaction boundaries found by a
header-only scan, so one big file still uses every core. ``read`` yields Arrow
record batches. Column names, signedness, ENUM/SET values and keys of binlogs without that metadata
come from the DDL in the series: one DDL-only pass on the driver gives every range the tables as of
its start (a table it cannot explain is one warning, its columns ``@N``). Options: ``schema`` (a
saved schema history .json or DDL script: the tables before the series begins), ``schemaMismatch``
(``error``, the default with ``schema``, or ``positional``), ``source`` (a name for the series, stored
in every row), ``splitSize``, ``columns`` (``every``, the default, or ``first``: a row change carries
its ``columns`` only where it is the first of its layout in a range, and every row a ``layout``
number, the same for equal layouts), ``before`` (``every``, the default, or ``keyless``: a keyed
change's ``before`` is NULL, its key is ``pk_before``), ``changes`` (``every``, the default, or
``last``: only the last change per key of a range (in rolling windows), each row counting the changes it
stands for in ``changes`` and whether its image lacks columns in ``partial``;
``binlake.arrowlog.compact``) — a sync reads with all three
(``binlake.arrowlog.changelog.Trim``); and a selection:
``databases``, ``tables`` (``db.table`` or ``table`` globs), ``operations`` (insert,update,delete),
``startDatetime``/``stopDatetime`` (by commit time), ``includeGtids``/``excludeGtids`` (GTID sets).
Spark filters on ``db``, ``table``, ``op`` and ``commit_ts`` are pushed down the same way.
``startPosition`` (``FILE:POS``, a file of the series by name and the offset of a transaction's first
event in it, as a change log's ``file`` and ``txn_position`` give it): read from that transaction
on (a stream: its first micro-batch starts there). ``nodes`` (``true``): the path names a sharded database's data nodes, merged on the fly into the
global binlog (``binlake.spark.merged``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from binlake.errors import BinlogError
from binlake.filters import Selection
from binlake.schema import SchemaHistory, SchemaTracker
from binlake.schema.ddlpass import DdlPass, snapshot
from binlake.sizes import parse_size
from binlake.spark.changelog import file_batches, read_trim, spark_ddl
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
    for name in ("schema", "logicalmap"):
        if out.get(name):
            out[name] = absolute(out[name])
    return out


class RangePartition(InputPartition):
    """Bytes [start, end) of one binlog file, both transaction boundaries (end None: to the end).
    ``schema``: the tables as of ``start`` (a snapshot of the series' schema history, pickled with the
    range to the executor that reads it); None reads with the binlog's own metadata only."""

    def __init__(
        self,
        index: int,
        path: str,
        start: int = 4,
        end: int | None = None,
        schema: SchemaHistory | None = None,
    ) -> None:
        super().__init__(index)
        self.path, self.start, self.end, self.schema = path, start, end, schema


def schema_seed(options: dict[str, str], files: list[str]) -> SchemaHistory:
    """The history before the series' first file: the ``schema`` option's (a saved history as of
    there, or a DDL script), else empty (the DDL in the binlog then names the tables it creates)."""
    if not options.get("schema") or not files:
        return SchemaHistory()
    saved = SchemaHistory.open(options["schema"])
    saved.catalog = saved.at((os.path.basename(files[0]), 4))
    return snapshot(saved)


def attach_schemas(parts: list[RangePartition], files: list[str], ddl: DdlPass) -> list[RangePartition]:
    """Give each range the tables as of its start, found by one DDL-only pass on the driver (ranges
    in series order, as planned)."""
    for part in parts:
        part.schema = ddl.at(files, part.path, part.start)
    return parts


def _tracker(options: dict[str, str], part: RangePartition) -> list[Any]:
    """The observer that names a range's columns from its schema snapshot (none without one)."""
    if part.schema is None:
        return []
    mode = options.get("schemamismatch") or ("error" if options.get("schema") else "positional")
    return [SchemaTracker(part.schema, on_mismatch=mode)]


def read_range(
    options: dict[str, str], part: RangePartition, pushed: Selection | None = None
) -> Iterator[Any]:
    """The change log of one range as Arrow batches: batch and streaming reads share it. ``pushed``:
    the selection implied by filters Spark pushed down (applied before row images are built)."""
    observers = _tracker(options, part)
    path = options["path"]
    source = options.get("source", os.path.dirname(path) or path)
    start = part.start if part.start > 4 else None
    chosen = [
        sel for sel in (Selection.from_options(options), pushed) if sel is not None and sel != Selection()
    ]
    yield from file_batches(
        part.path,
        source,
        observers,
        start=start,
        stop=part.end,
        selection=None if not chosen else chosen[0] if len(chosen) == 1 else AllOf(*chosen),
        trim=read_trim(options),
    )


def plan_ranges(files: list[str], split_bytes: int, start: Start | None = None) -> list[RangePartition]:
    """One range per file, files bigger than ``split_bytes`` cut at transaction boundaries (0: never).
    The last file may be a live server's active file: it is read up to its last complete transaction
    (with a warning when something after it is unfinished); an earlier file cut short is an error.
    ``start`` (``start_position``): from that transaction on; files before its file are not read."""
    parts: list[RangePartition] = []
    first = 0 if start is None else start.index
    for i, path in enumerate(files[first:], first):
        for lo, hi in file_ranges(path, split_bytes, active=i == len(files) - 1):
            if start is not None and i == start.index:
                if hi is not None and hi <= start.offset:
                    continue
                lo = max(lo, start.offset)
            parts.append(RangePartition(len(parts), path, lo, hi))
    return parts


@dataclass(frozen=True)
class Start:
    """Where a read begins (option ``startPosition``): file ``index`` of the series, at byte
    ``offset``, the start of a transaction (a change log's ``file`` and ``txn_position``)."""

    index: int
    offset: int


def start_position(options: dict[str, str], files: list[str]) -> Start | None:
    """Option ``startPosition`` (``FILE:POS``: a file of the series by name, and the offset of a
    transaction's first event in it) as a ``Start`` in ``files``; None without the option."""
    text = options.get("startposition")
    if not text:
        return None
    name, sep, offset = text.rpartition(":")
    if not sep or not name or not offset.isdigit() or int(offset) < 4:
        raise ValueError(
            f"option startPosition: FILE:POS (a binlog file of the series and the offset of a "
            f"transaction's first event in it), not {text!r}"
        )
    names = [os.path.basename(f) for f in files]
    if names.count(name) != 1:
        raise BinlogError(
            f"option startPosition: {name!r} is {'not' if name not in names else 'more than once'} "
            "in the series",
            source=options.get("path"),
        )
    index = names.index(name)
    size = os.path.getsize(files[index])
    if int(offset) > size:
        raise BinlogError(
            f"option startPosition: offset {offset} is past the end of the file ({size} bytes)",
            source=files[index],
        )
    from binlake.position import starts_transaction

    if int(offset) < size and not starts_transaction(files[index], int(offset)):
        raise BinlogError(
            f"option startPosition: no transaction starts at offset {offset} (a change log's "
            "txn_position is where one does)",
            source=files[index],
            offset=int(offset),
        )
    return Start(index, int(offset))


def file_ranges(path: str, split_bytes: int, *, active: bool) -> list[tuple[int, int | None]]:
    """The [start, end) ranges of one file (end None: to the end of the file). A file the server
    closed is cut at GTID events found by walking its headers (``gtid_cuts``), or not read at all
    when it needs no cut; else one header-only scan finds both the split points and whether the
    tail is complete."""
    from binlake.position import TailScan, gtid_cuts, split_points
    from binlake.tail import complete_end, just_created, needs_scan, still_writing

    if just_created(path, active=active):
        return []
    size = os.path.getsize(path)
    split = bool(split_bytes) and size > split_bytes
    scan = TailScan(path) if needs_scan(path, active=active) else None
    cuts: list[int] = []
    if split:
        # a complete file is cut where its GTID events are, its headers walked by length alone;
        # else (a tail to find, an old server's file) by the transaction ends a header-only scan finds
        walked = gtid_cuts(path, split_bytes) if scan is None else None
        if walked is None:
            scan = scan or TailScan(path)
            walked = split_points(path, split_bytes, ends=scan)
        cuts = walked
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
        if _merged(self.options):
            from binlake.spark.merged import plan_merged

            return plan_merged(self.options)
        split = parse_size(self.options.get("splitsize", DEFAULT_SPLIT))
        files = resolve_files(self.options["path"])
        ddl = DdlPass(schema_seed(self.options, files), warn=warn)
        parts = plan_ranges(files, split, start_position(self.options, files))
        return list(attach_schemas(parts, files, ddl))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from binlake.spark.merged import MergedPartition, read_merged

        if isinstance(partition, MergedPartition):
            yield from read_merged(self.options, partition)
            return
        assert isinstance(partition, RangePartition)
        yield from read_range(self.options, partition, self.pushed)


def _merged(options: dict[str, str]) -> bool:
    """A read of node binlogs merged into the global binlog (``binlake.spark.merged``)?"""
    return options.get("nodes", "false").lower() == "true"


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "binlog"

    def schema(self) -> str:
        return spark_ddl(driver_options(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        return BinlogReaderSpark(driver_options(self.options))

    def streamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        from binlake.spark.stream import BinlogStreamReader

        options = driver_options(self.options)
        if _merged(options):
            raise ValueError(
                "a merged read (option nodes) is a batch read: to follow a sharded database, "
                "`binlake merge --follow` into a directory and stream that"
            )
        if stream_reads(options) == "driver":  # Spark then asks simpleStreamReader
            from pyspark.errors import PySparkNotImplementedError

            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return BinlogStreamReader(options)

    def simpleStreamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        from binlake.spark.driverstream import DriverStreamReader

        return DriverStreamReader(driver_options(self.options))


def stream_reads(options: dict[str, str]) -> str:
    """Where a streaming read decodes: ``driver`` (``binlake.spark.driverstream``: small batches,
    low lag) or ``tasks`` (every range a Spark task: a backlog read in parallel)."""
    reads = options.get("reads", "tasks").lower()
    if reads not in ("driver", "tasks"):
        raise ValueError(f"option reads: driver or tasks, not {reads!r}")
    return reads


def register(spark: Any) -> None:
    spark.dataSource.register(BinlogDataSource)
