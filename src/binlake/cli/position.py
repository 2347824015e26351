"""``index``, ``find-position`` and ``schema``: where things are in a series, and the tables as of a
position."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.cli.common import (
    Command,
    Options,
    SchemaOptions,
    UsageError,
    add_schema_history,
    datetime_arg,
    gtid_any_arg,
    note,
)
from binlake.cli.reading import ReadOptions, file_events
from binlake.console import output_console, plain
from binlake.gtid import GtidSet, MariaGtidPos


@dataclass(frozen=True)
class SeriesOptions(Options):
    """``index``: a binlog directory, an index file, or files in order."""

    source: tuple[str, ...]


def cmd_index(o: SeriesOptions) -> int:
    from rich.table import Table

    from binlake.position import EVENT_CUT, cut_note, index_file
    from binlake.series import BinlogSeries
    from binlake.stats import _ts

    series = BinlogSeries.open(*o.source)
    table = Table(title=f"{len(series.files)} binlog file(s) (header-only scan)")
    for c in ("file", "size", "events", "transactions", "first commit", "last commit", "previous GTIDs"):
        table.add_column(c)
    cut = None
    for i, f in enumerate(series.files):
        ix = index_file(f, live=i == len(series.files) - 1)  # the last may be being written
        if ix.cut is not None:
            cut = cut_note(f, EVENT_CUT, ix.cut)
        prev = ix.previous_gtids if ix.previous_gtids is not None else ix.maria_gtid_list
        table.add_row(
            plain(f.name),
            f"{ix.size:,}",
            f"{ix.events:,}",
            f"{ix.transactions:,}",
            _ts(ix.first_commit_us),
            _ts(ix.last_commit_us),
            str(prev) if prev is not None else "-",
        )
    output_console().print(table)
    if cut is not None:
        note(cut)
    return 0


@dataclass(frozen=True)
class FindPositionOptions(Options):
    """``find-position``: a series, and a time, a GTID set or a commit TSO (exactly one of them)."""

    source: tuple[str, ...]
    datetime: dt.datetime | None = None
    gtid_set: GtidSet | MariaGtidPos | None = None
    tso: str | None = None  # a global binlog (``binlake merge``): a commit TSO or a whole vtso


def cmd_find_position(o: FindPositionOptions) -> int:
    from binlake.position import find_by_gtid_set, find_by_time
    from binlake.series import BinlogSeries

    series = BinlogSeries.open(*o.source)
    if o.tso is not None:
        from binlake.globalbinlog.position import describe, find_by_tso

        print(describe(*find_by_tso(series, o.tso)))
        return 0
    if o.datetime is not None:
        found = find_by_time(series, o.datetime)
    else:
        assert o.gtid_set is not None  # argparse requires one of the two
        found = find_by_gtid_set(series, o.gtid_set)
    print(found.describe())
    return 0


def schema_position(at: str | None, files: list[str] | tuple[str, ...]) -> tuple[str, int] | None:
    """``--at FILE:POSITION`` as a position of one of ``files`` (None: the end). A file outside the
    series or a position past its end is refused: the history would silently show the end."""
    if not at:
        return None
    name, sep, offset = at.rpartition(":")
    if not sep or not name or not offset.isdigit():
        raise UsageError(f"--at takes FILE:POSITION (e.g. binlog.000002:4), not {at!r}")
    sizes = {Path(f).name: Path(f).stat().st_size for f in files}
    base, position = Path(name).name, int(offset)
    if base not in sizes:
        raise UsageError(f"--at {at}: {base} is not a file of the series ({', '.join(sizes)})")
    if position > sizes[base]:
        raise UsageError(f"--at {at}: {base} has {sizes[base]:,} bytes")
    return base, position


@dataclass(frozen=True)
class SchemaCommandOptions(Options):
    """``schema``: a series, the position (``--at``), the databases shown, the history's seed."""

    source: tuple[str, ...]
    at: str | None = None
    database: tuple[str, ...] | None = None
    schema: SchemaOptions = SchemaOptions()


def cmd_schema(o: SchemaCommandOptions) -> int:
    from binlake.series import BinlogSeries

    read = ReadOptions(tuple(str(f) for f in BinlogSeries.open(*o.source).files), schema=o.schema)
    at = schema_position(o.at, read.files)
    tracker = o.schema.tracker()
    for _ in file_events(read, tracker):
        pass
    history = tracker.history
    catalog = history.at(at) if at else history.catalog
    for (db, _table), t in sorted(catalog.items()):
        if o.database and db not in o.database:
            continue
        print(t.ddl() + ";\n")
    print(f"-- {len(history.changes)} DDL statements applied, {len(history.not_understood)} not understood")
    for n in history.not_understood[:20]:
        print(f"--   {n.position[0]}:{n.position[1]}: {n.reason}")
    return 0


def tso_arg(text: str) -> str:
    from binlake.globalbinlog.position import target_vtso

    try:
        target_vtso(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def add_index(sub: Any) -> None:
    ix = sub.add_parser("index", help="per-file summary of a series from a header-only scan")
    ix.add_argument("source", nargs="+", help="a binlog directory, an index file, or files in order")
    ix.set_defaults(handler=Command(SeriesOptions, cmd_index))


def add_schema(sub: Any) -> None:
    sc = sub.add_parser(
        "schema",
        help="the tables as of a position: seed + every DDL of the binlog, replayed",
        description="Print the tables as of a position as MySQL CREATE TABLE statements (the seed of "
        "--schema, then every DDL of the binlog replayed); the output loads back as --schema.",
    )
    sc.add_argument("source", nargs="+", help="a binlog directory, an index file, or files in order")
    sc.add_argument(
        "--at", metavar="FILE:POSITION", help="as of this byte of a file of the series (default: the end)"
    )
    sc.add_argument("--database", action="append", help="only this schema (repeatable)")
    add_schema_history(sc)
    sc.set_defaults(handler=Command(SchemaCommandOptions, cmd_schema))


def add_find_position(sub: Any) -> None:
    f = sub.add_parser("find-position", help="where to start reading for a point in time or a GTID set")
    f.add_argument("source", nargs="+", help="a binlog directory, an index file, or files in order")
    what = f.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--datetime",
        type=datetime_arg,
        help="first position of transactions committed at or after this time (UTC unless an offset is given)",
    )
    what.add_argument(
        "--gtid-set", type=gtid_any_arg, help="a MySQL GTID set or a MariaDB GTID position already executed"
    )
    what.add_argument(
        "--tso",
        type=tso_arg,
        help="a global binlog (binlake merge): first position of transactions at or after this commit TSO "
        "(a number, or a whole 54-digit vtso from a CTS:: mark)",
    )
    f.set_defaults(handler=Command(FindPositionOptions, cmd_find_position))
