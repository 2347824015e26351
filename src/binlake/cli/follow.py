"""Following a growing binlog directory (``changes --follow``): every finished transaction once, in
order, as the server writes and rotates its files.

Each poll reads the current file from the end of the last finished transaction: a transaction the
server is still writing (or an event cut short at the end) is left for the next poll, and read
again whole then. A file is done once a later file exists and it has been read to its end; a
transaction left open at the end of such a file means the file was cut (an error, as for a batch
read, ``binlake.tail``). The schema tracker is kept across polls, so names follow the DDL.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.errors import IncompleteTailError
from binlake.reader import BinlogReader
from binlake.series import SeriesError, series_files
from binlake.tail import just_created
from binlake.txn import Transaction, TransactionGrouper


@dataclass
class DirectoryFollower:
    """Finished transactions of the series at ``source`` (a directory, index or glob), forever.
    ``idle`` is called after each poll that found nothing new (the caller flushes its output
    there); ``stop`` ends the loop between polls."""

    source: str
    tracker: Any  # binlake.schema.SchemaTracker: kept across polls
    poll_seconds: float = 0.5
    verify_checksum: bool = True
    file_seq: int = 0  # the file being read, by its place in the series
    position: int | None = None  # where its next transaction starts (None: its first event)
    _seen_size: int = field(default=-1, repr=False)  # the current file's size when last read

    def transactions(self, idle: Callable[[], None], stop: Callable[[], bool]) -> Iterator[Transaction]:
        while not stop():
            files = self._files()
            progressed = False
            while self.file_seq < len(files):
                path = files[self.file_seq]
                active = self.file_seq == len(files) - 1
                if just_created(path, active=active):
                    break
                size = os.path.getsize(path)
                if active and size == self._seen_size:
                    break  # nothing new since the last read
                self._seen_size = size
                yield from self._read(path, active)
                progressed = True
                if active:
                    break
                self.file_seq, self.position, self._seen_size = self.file_seq + 1, None, -1
            if not progressed:
                idle()
                time.sleep(self.poll_seconds)

    def _files(self) -> list[Path]:
        where = Path(self.source)
        if where.is_dir() and not any(where.iterdir()):
            return []  # nothing written yet
        try:
            return series_files(self.source)
        except SeriesError:
            if where.exists() or any(ch in self.source for ch in "*?["):
                raise
            raise SeriesError(f"{self.source}: no such file or directory to follow") from None

    def _read(self, path: Path, active: bool) -> Iterator[Transaction]:
        """The transactions finished in ``path`` from ``position``; ``position`` moves past each."""
        grouper = TransactionGrouper(keep_events=True)
        reader = BinlogReader(
            path,
            verify_checksum=self.verify_checksum,
            start_position=self.position,
            observers=[self.tracker],
        )
        try:
            for ev in reader:
                for t in grouper.feed(self.file_seq, ev):
                    self.position = t.end
                    yield t
        except IncompleteTailError:
            if not active:
                raise  # a rotated file never grows: it was cut
            return
        if grouper.current is not None and not active:
            raise IncompleteTailError(
                "a transaction is left open at the end of the file, but a later file of the series "
                "follows it: a rotated file never grows, so this one was cut or damaged",
                source=str(path),
                offset=grouper.current.start,
            )
