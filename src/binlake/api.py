"""The public Python API's own functions: transactions and position search over any source of
binlog files (a file, a directory, an index file, files in order, or a ``BinlogSeries``), so that a
user does not assemble series, readers and groupers by hand. Sans-I/O apart from reading the files:
no Spark, no sockets (``binlake`` imports the replica client only when it is asked for)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Sequence
from typing import TypeAlias

from binlake.filters import parse_datetime
from binlake.gtid import GtidSet, MariaGtidPos, parse_executed
from binlake.position import Found, find_by_gtid_set, find_by_time
from binlake.series import BinlogSeries, Position
from binlake.txn import Transaction, iter_transactions

PathLike: TypeAlias = str | os.PathLike[str]
# A file, a binlog directory (its index file or numbered files), an index file, files in binlog order,
# or a series already opened.
Source: TypeAlias = PathLike | Sequence[PathLike] | BinlogSeries


def open_series(source: Source) -> BinlogSeries:
    """``source`` as a series of files in binlog order (rotate links checked as they are read)."""
    if isinstance(source, BinlogSeries):
        return source
    if isinstance(source, str | os.PathLike):
        return BinlogSeries.open(source)
    return BinlogSeries.open(*source)


def transactions(
    source: Source,
    *,
    start: Position | None = None,
    stop: Position | None = None,
    keep_events: bool = True,
    include_unfinished: bool = False,
    **reader_options: object,
) -> Iterator[Transaction]:
    """The transactions of ``source`` in commit order (binlog order), each with its GTID, XID or XA
    id, commit time, ordering metadata, start and end position, tables and row count, and (with
    ``keep_events``) its events. ``start``/``stop`` bound it by position (``find_position`` gives
    one); a transaction cut off at the end (a file still being written) is left out unless
    ``include_unfinished``, and a file that ends inside an event raises ``IncompleteTailError`` once
    the transactions before it are given. ``reader_options`` go to each ``BinlogReader`` (e.g.
    ``verify_checksum``).
    """
    for name, bound in (("start", start), ("stop", stop)):
        if bound is not None and not isinstance(bound, Position):
            raise TypeError(f"{name}: a Position (find_position(...).position), not {type(bound).__name__}")
    series = open_series(source)
    events = series.events(start, stop, **reader_options)
    return iter_transactions(events, keep_events=keep_events, include_unfinished=include_unfinished)


def find_position(
    source: Source,
    when: dt.datetime | str | None = None,
    *,
    gtids: str | GtidSet | MariaGtidPos | None = None,
) -> Found:
    """Where to start reading ``source`` for transactions committed at or after ``when`` (a
    datetime or ``YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]``; without an offset, UTC), or for what
    follows the executed ``gtids`` (a MySQL GTID set or a MariaDB GTID position, as text or
    parsed): exactly one of the two."""
    if (when is None) == (gtids is None):
        raise ValueError("find_position takes a time or a GTID set (one of them)")
    if when is not None and not isinstance(when, str | dt.datetime):
        raise TypeError(f"when: a datetime or its text (YYYY-MM-DD HH:MM:SS), not {type(when).__name__}")
    series = open_series(source)
    if when is not None:
        if isinstance(when, str):
            when = parse_datetime(when)
        elif when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return find_by_time(series, when)
    assert gtids is not None
    return find_by_gtid_set(series, parse_executed(gtids) if isinstance(gtids, str) else gtids)
