"""The schema history of a binlog series as of any position, found by reading its DDL alone.

A parallel reader needs, for each range it hands out, the table definitions as of the range's start.
``DdlPass`` walks the series once, in order, reading QUERY and TABLE_MAP events only (row events are
seeked over, never decoded), applies the DDL to a history and hands out snapshots: small,
picklable histories that travel with a range to wherever it is decoded. TABLE_MAPs are read so that
a table whose layout the DDL does not explain is reported once, with where it was met.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from binlake.errors import IncompleteTailError
from binlake.events.table_map import TableMap
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.reader import BinlogReader, KnownEvents
from binlake.schema.history import SchemaHistory
from binlake.schema.tracker import SchemaTracker
from binlake.txn import GTID_EVENTS

# what the pass does not read: row images and their companions (TABLE_MAPs are read, for reports),
# and what begins and ends a transaction
_SKIPPED = frozenset(
    {
        *GTID_EVENTS,
        EventType.XID,
        EventType.ROWS_QUERY,
        EventType.MARIA_ANNOTATE_ROWS,
        EventType.TRANSACTION_PAYLOAD,
        EventType.APPEND_BLOCK,
        EventType.BEGIN_LOAD_QUERY,
        *ROWS_EVENT_KINDS,
    }
)


def snapshot(history: SchemaHistory) -> SchemaHistory:
    """The tables of ``history`` as they are now, without the changes that led there: what one range
    needs to start from (the DDL inside the range is applied as it is met)."""
    return SchemaHistory(
        catalog=copy.deepcopy(history.catalog),
        server_charset=history.server_charset,
        database_charsets=dict(history.database_charsets),
        position=history.position,
        seeded_at=history.seeded_at,
    )


@dataclass
class DdlPass:
    """A schema history advanced through a series by its DDL. ``seed``: the history before the
    series' first position (empty, or from ``--schema``); ``warn``: called once per table the
    history cannot name (created before the binlog began, or disagreeing with it)."""

    seed: SchemaHistory = field(default_factory=SchemaHistory)
    warn: Callable[[str], None] = lambda message: None
    history: SchemaHistory = field(init=False)
    tracker: SchemaTracker = field(init=False)
    file: str = field(init=False, default="")  # the file read up to (basename; "" before the first)
    offset: int = field(init=False, default=4)
    warned: set[tuple[str, str]] = field(init=False, default_factory=set)
    # what the reader may drop from an event's bytes (each BEGIN, a TABLE_MAP met since the last
    # DDL: naming it again finds nothing new)
    _known: KnownEvents = field(init=False, default_factory=KnownEvents)
    drop_known: ClassVar[bool] = True  # (False: decode every QUERY and TABLE_MAP, for the checks)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the seed, before the series' first file."""
        self.history = snapshot(self.seed)
        self.tracker = SchemaTracker(self.history, on_mismatch="positional")
        self.file, self.offset = "", 4
        self._known.maps.clear()

    def at(self, files: list[str], path: str, offset: int) -> SchemaHistory:
        """A snapshot of the history as of ``offset`` of ``path`` (one of ``files``, the series in
        order). Positions asked for in order cost one read of the series in all; an earlier one starts
        the pass over."""
        names = [os.path.basename(f) for f in files]
        target = names.index(os.path.basename(path))
        if self.file and (self.file not in names or (names.index(self.file), self.offset) > (target, offset)):
            self.reset()
        first = names.index(self.file) if self.file else 0
        for i in range(first, target + 1):
            start = self.offset if names[i] == self.file else 4
            self._read(files[i], start, offset if i == target else None)
        return snapshot(self.history)

    def _read(self, path: str, start: int, stop: int | None) -> None:
        """Apply the DDL of [start, stop) of one file (stop None: to its end, or to a tail still being
        written) and report the tables met that the history cannot name."""
        reader = BinlogReader(
            path,
            skip=_SKIPPED,
            omit_skipped=True,
            known=self._known if self.drop_known else None,
            start_position=start if start > 4 else None,
            stop_position=stop,
        )
        self.file, self.offset = os.path.basename(path), start
        try:
            for ev in reader:
                generation = self.tracker.generation
                self.tracker(ev)
                if self.tracker.generation != generation:
                    self._known.maps.clear()
                if isinstance(ev.body, TableMap):
                    self._check(ev.body, f"{self.file}:{ev.offset}")
        except IncompleteTailError:
            pass  # a live file's unfinished tail: it is read on a later call, once complete
        # where the reader got to (the next event's start): not the end of the last event it
        # yielded — the events it omits come after it, and the format event it always yields
        # first lies before ``start``
        self.offset = max(start, reader.position)

    def _check(self, tm: TableMap, where: str) -> None:
        key = (tm.database, tm.table)
        if key in self.warned or any(c.name is not None for c in tm.columns):
            return
        self.warned.add(key)
        found = [m for m in self.tracker.mismatches if m.table == f"{tm.database}.{tm.table}"]
        why = (
            found[-1].detail
            if found
            else "no CREATE TABLE for it in the binlog or the schema history (created before the binlog begins?)"
        )
        self.warn(
            f"table `{tm.database}`.`{tm.table}` at {where}: its columns are not known ({why}); "
            f"they are named @1..@{len(tm.columns)} by position and the table is read as keyless "
            "(give its DDL with the schema option / --schema)"
        )
