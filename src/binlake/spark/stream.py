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

from binlake.errors import BinlogError
from binlake.position import last_boundary, split_points
from binlake.schema.ddlpass import DdlPass
from binlake.sizes import parse_size
from binlake.spark.changelog import file_number
from binlake.spark.source import (
    DEFAULT_SPLIT,
    RangePartition,
    attach_schemas,
    read_range,
    resolve_files,
    schema_seed,
    start_position,
    warn,
)


class BinlogStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.path = options["path"]
        self.split = parse_size(options.get("splitsize", DEFAULT_SPLIT))
        self.ddl: DdlPass | None = None  # the schema history, grown with the DDL of each micro-batch
        # file -> (its inode, a boundary found, the size then): what latestOffset scanned already
        self.scanned: dict[str, tuple[int, int, int]] = {}

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        """The series' start, or option ``startPosition``'s transaction (``start_position``)."""
        files = self.files_now()
        start = start_position(self.options, files)
        if start is None:
            return {"file": "", "pos": 0}
        return {"file": os.path.basename(files[start.index]), "pos": start.offset}

    def files_now(self) -> list[str]:
        """The series' files as the path names them now (none yet: an empty list, not an error)."""
        try:
            return resolve_files(self.path)
        except BinlogError:
            return []

    def latestOffset(self) -> dict[str, Any]:  # type: ignore[override]  # noqa: N802 - Spark's name
        files = self.files_now()
        if not files:
            return {"file": "", "pos": 0}
        # the newest file with a complete transaction decides; older files are complete once rotated
        for path in reversed(files):
            end = self._last_boundary(path)
            if end > 4:
                return {"file": os.path.basename(path), "pos": end}
        return {"file": "", "pos": 0}

    def _last_boundary(self, path: str) -> int:
        """``last_boundary`` of a growing file, scanned on from the boundary the last call found
        (each trigger reads only what was appended since: a whole rescan took 0.15 s a trigger
        after a minute at 100 txn/s, and grows). A file that shrank or was replaced (another inode:
        a server's binlogs reset) is scanned anew."""
        st = os.stat(path)
        inode, start, seen = self.scanned.get(path, (st.st_ino, 4, 0))
        if inode != st.st_ino or st.st_size < seen:
            start = 4
        end = last_boundary(path, start) if st.st_size > start else start
        self.scanned[path] = (st.st_ino, end, st.st_size)
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[RangePartition]:
        files = self.files_now()
        return self.with_schemas(self.ranges_between(files, start, end), files)

    def with_schemas(self, parts: list[RangePartition], files: list[str]) -> list[RangePartition]:
        """``parts`` (in series order) with the tables as of each one's start (the DDL pass moves
        forward to the last of them only)."""
        if parts and self.ddl is None:
            self.ddl = DdlPass(schema_seed(self.options, files), warn=warn)
        return list(attach_schemas(parts, files, self.ddl)) if self.ddl else []

    def ranges_between(
        self, files: list[str], start: dict[str, Any], end: dict[str, Any]
    ) -> list[RangePartition]:
        """The ranges between two offsets, in series order (big ones split at transactions)."""
        parts: list[RangePartition] = []
        for path in files:
            name = os.path.basename(path)
            key = (file_number(name), name)
            lo = (file_number(start["file"]), start["file"]) if start["file"] else (-1, "")
            hi = (file_number(end["file"]), end["file"]) if end["file"] else (-1, "")
            if key < lo or key > hi:
                continue
            first = start["pos"] if key == lo else 4
            last = end["pos"] if key == hi else os.path.getsize(path)
            cuts = (
                split_points(path, self.split, first, last)
                if self.split and last - first > self.split
                else []
            )
            for a, b in zip([first, *cuts], [*cuts, last], strict=True):
                if b > a:
                    parts.append(RangePartition(len(parts), path, a, b))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        yield from read_range({**self.options, "source": self.options.get("source", self.path)}, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing to clean up: correctness never depends on this being called

    @staticmethod
    def dumps(offset: dict[str, Any]) -> str:
        return json.dumps(offset)
