"""``dump``, ``sql`` and ``stats``: the events, redo/flashback SQL and statistics of binlog files."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.cli.common import (
    Command,
    Options,
    SchemaOptions,
    UsageError,
    add_schema_history,
    add_selection,
    expand,
    position_arg,
)
from binlake.console import ByteProgress
from binlake.errors import BinlogError
from binlake.events import SCHEMA_KINDS
from binlake.events.base import Event
from binlake.events.query import Query
from binlake.events.table_map import TableMap
from binlake.filters import Selection
from binlake.reader import BinlogReader
from binlake.schema.ddl import is_ddl
from binlake.txn import CONTROL_EVENTS, Transaction, TransactionGrouper

if TYPE_CHECKING:
    from binlake.schema import SchemaTracker


@dataclass(frozen=True)
class ReadOptions(Options):
    """Which files, which part of them, how strictly, which selection and which schema history:
    what dump, sql and stats read alike."""

    files: tuple[str, ...]
    start_position: int | None = None
    stop_position: int | None = None
    verify_checksum: bool = True
    require_fde: bool = True
    selection: Selection = field(default_factory=Selection)
    schema: SchemaOptions = SchemaOptions()

    def resolved(self) -> ReadOptions:
        """These options with the files given as a directory, index file or glob read as the
        series they hold (as ``changes`` and ``find-position`` read them); a missing file is said
        here, before a command prints anything (sql's header would go first, into a redo file)."""
        files = expand(self.files)
        missing = [f for f in files if not Path(f).exists()]
        if missing:
            raise UsageError(f"{', '.join(missing)}: No such file")
        return dataclasses.replace(self, files=files)


def file_events(
    read: ReadOptions,
    tracker: SchemaTracker | None = None,
    *,
    streams_output: bool = False,
    count_only: bool = False,
) -> Iterator[tuple[int, Event]]:
    """Events of the files in the order given: --start-position applies to the first file and
    --stop-position to the last, as with mysqlbinlog. ``tracker`` (default: the one of
    ``read.schema``) follows their DDL; ``streams_output``: the command prints lines as it goes;
    ``count_only``: rows events carry their row count (``Rows.counted``), not their rows."""
    last = len(read.files) - 1
    observer: SchemaTracker | DeferredDdl
    if tracker is None:  # the run's own history: read by nothing but --save-schema at the end
        tracker = read.schema.tracker()
        observer = DeferredDdl(tracker)
    else:
        observer = tracker
    sizes = [Path(f).stat().st_size for f in read.files]
    label = f"reading {len(sizes)} file(s)"
    with ByteProgress(sum(sizes), label, streams_output=streams_output) as progress:
        for seq, path in enumerate(read.files):
            if seq == 0 and read.start_position is not None:
                check_start(path, read.start_position)
            reader = BinlogReader(
                path,
                verify_checksum=read.verify_checksum,
                start_position=read.start_position if seq == 0 else None,
                stop_position=read.stop_position if seq == last else None,
                require_fde=read.require_fde,
                observers=[observer],
            )
            if count_only:
                reader.decoder.state.decode_rows = False
                reader.decoder.state.count_rows = True
            if not progress.enabled:  # no bar: nothing to tell per event
                for ev in reader:
                    yield seq, ev
                continue
            done = sum(sizes[:seq])
            for ev in reader:
                progress.advance_to(done + ev.offset)
                yield seq, ev
    if read.schema.save:
        if isinstance(observer, DeferredDdl):
            observer.flush()
        tracker.history.save(read.schema.save)


class DeferredDdl:
    """A schema tracker whose DDL is applied when the history is first needed: before a table map
    without column names (which the tracker names from it), and by ``flush``. A table map that
    carries names is never changed by the tracker (it only notes where the history disagrees, which
    dump, sql and stats do not read), so it does not go through it: a binlog written with
    binlog_row_metadata=FULL is read without the DDL parser (sqlglot: 70-100 ms of start-up) and
    without parsing its DDL, and prints the same. The statements are applied in binlog order all
    the same, each before the first map that needs it."""

    event_kinds = SCHEMA_KINDS  # what a decoder gives it, as it gives a tracker

    def __init__(self, tracker: SchemaTracker) -> None:
        self.tracker = tracker
        self.pending: list[Event] = []

    def __call__(self, ev: Event) -> None:
        body = ev.body
        if isinstance(body, TableMap):
            if any(c.name is not None for c in body.columns):
                return
            self.flush()
            self.tracker(ev)
        elif isinstance(body, Query) and ev.inner_index is None and is_ddl(body.query):
            # what the tracker would look at now (it applies its own rules to it, error codes too)
            self.pending.append(ev)

    def flush(self) -> None:
        """Apply the statements met so far, in order."""
        pending, self.pending = self.pending, []
        for ev in pending:
            self.tracker(ev)


def check_start(path: str, start: int) -> None:
    """A --start-position past the end of the file is a mistake (a position of another file?), not
    an empty selection: say so instead of printing nothing."""
    size = Path(path).stat().st_size
    if start > size:
        raise BinlogError(
            f"--start-position {start} is past the end of the file ({size:,} bytes)", source=path
        )


def selected_events(read: ReadOptions) -> Iterator[Event]:
    """The events ``dump`` prints: everything, or the selected transactions' selected events."""
    sel = read.selection
    if sel == Selection():
        yield from (ev for _, ev in file_events(read, streams_output=True))
        return
    grouper = TransactionGrouper(keep_events=True)
    for seq, ev in file_events(read, streams_output=True):
        if ev.type_code in CONTROL_EVENTS:
            yield ev
            continue
        for t in grouper.feed(seq, ev):
            if sel.keeps(t):
                yield from (e for e in t.events if sel.keeps_event(t, e))
    for t in grouper.finish():
        if sel.keeps(t):
            yield from (e for e in t.events if sel.keeps_event(t, e))


@dataclass(frozen=True)
class DumpOptions(Options):
    read: ReadOptions
    format: str = "text"
    verbose: int = 2
    positional: bool = False


def cmd_dump(o: DumpOptions) -> int:
    from binlake.render.output import write_blocks_to

    events = selected_events(o.read.resolved())
    if o.format == "json":
        from binlake.render.jsonl import render_jsonl_bytes

        write_blocks_to(render_jsonl_bytes(events))
    else:
        from binlake.render.text import render_text_bytes

        write_blocks_to(render_text_bytes(events, verbosity=o.verbose, positional=o.positional))
    return 0


def selected_transactions(
    read: ReadOptions, *, streams_output: bool, count_only: bool = False
) -> Iterator[Transaction]:
    """Finished transactions that pass the selection, with only their selected events
    (``count_only``: rows counted, not decoded — see ``file_events``)."""
    grouper = TransactionGrouper(keep_events=True)
    feed = grouper.feed
    events = file_events(read, streams_output=streams_output, count_only=count_only)
    if read.selection == Selection():  # every transaction with every event (``select`` keeps all)
        for seq, ev in events:
            finished = feed(seq, ev)
            if finished:
                yield from finished
        return
    for seq, ev in events:
        yield from select(feed(seq, ev), read.selection)


def select(transactions: Iterable[Transaction], sel: Selection) -> Iterator[Transaction]:
    """The transactions that pass the selection, each with only its selected events."""
    for t in transactions:
        if sel.keeps(t):
            t.events = [e for e in t.events if sel.keeps_event(t, e)]
            yield t


@dataclass(frozen=True)
class SqlOptions(Options):
    read: ReadOptions
    flashback: bool = False


def cmd_sql(o: SqlOptions) -> int:
    from binlake.render.output import write_blocks_to
    from binlake.render.sql import render_sql_bytes

    transactions = selected_transactions(o.read.resolved(), streams_output=True)
    write_blocks_to(render_sql_bytes(transactions, flashback=o.flashback))
    return 0


@dataclass(frozen=True)
class StatsOptions(Options):
    read: ReadOptions
    plot: str | None = None
    top: int = 5


def cmd_stats(o: StatsOptions) -> int:
    from binlake.stats import collect, print_stats, write_plot

    # stats needs how many rows, never their values: they are counted by their lengths alone
    transactions = selected_transactions(o.read.resolved(), streams_output=False, count_only=True)
    stats = collect(transactions, top=o.top)  # prints at the end
    print_stats(stats)
    if o.plot:
        write_plot(stats, o.plot)
        print(f"charts written to {o.plot}")
    return 0


def add_dump(sub: Any) -> None:
    d = sub.add_parser("dump", help="decode binlog files to mysqlbinlog-style text or JSON lines")
    d.add_argument("files", nargs="+", help="binlog or relay log files in order, or a directory / index / glob")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument(
        "--start-position",
        type=position_arg,
        help="first event offset in the first file (its format event is always read)",
    )
    d.add_argument(
        "--stop-position",
        type=position_arg,
        help="stop before the event at or after this offset of the last file",
    )
    d.add_argument(
        "--verify-checksum",
        dest="verify_checksum",
        action="store_true",
        default=True,
        help="verify every event's CRC32 (default)",
    )
    d.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false")
    d.add_argument(
        "--no-require-fde",
        dest="require_fde",
        action="store_false",
        default=True,
        help="read a fragment without a FORMAT_DESCRIPTION event as MySQL 5.x v4 events",
    )
    d.add_argument(
        "--positional",
        action="store_true",
        help="name columns @1, @2… even when the binlog carries names (as mysqlbinlog does)",
    )
    d.add_argument(
        "-v",
        "--verbose",
        type=int,
        default=2,
        choices=(1, 2),
        help="2 (default) adds the /* TYPE meta nullable is_null */ comments of mysqlbinlog -vv",
    )
    add_selection(d)
    add_schema_history(d)
    d.set_defaults(handler=Command(DumpOptions, cmd_dump))


def add_sql(sub: Any) -> None:
    q = sub.add_parser("sql", help="redo SQL of the row changes, or --flashback SQL that undoes them")
    q.add_argument("files", nargs="+", help="binlog files in order, or a directory / index / glob")
    q.add_argument(
        "--flashback", action="store_true", help="undo: newest first, INSERT<->DELETE, UPDATE images swapped"
    )
    q.add_argument("--start-position", type=position_arg, help="first event offset in the first file")
    q.add_argument("--stop-position", type=position_arg, help="stop before this offset of the last file")
    q.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false", default=True)
    q.set_defaults(require_fde=True)
    add_selection(q)
    add_schema_history(q)
    q.set_defaults(handler=Command(SqlOptions, cmd_sql))


def plot_arg(text: str) -> str:
    """``--plot``: a chart file whose name says its format (as ``binlake.stats.write_plot`` takes)."""
    from binlake.stats import PLOT_SUFFIXES

    if not text.endswith(PLOT_SUFFIXES):
        raise argparse.ArgumentTypeError(f"{text!r}: charts are written as FILE.html or FILE.png")
    return text


def add_stats(sub: Any) -> None:
    st = sub.add_parser(
        "stats", help="activity, hot tables, big and long transactions, group commits, parallelism"
    )
    st.add_argument("files", nargs="+", help="binlog files in order, or a directory / index / glob")
    st.add_argument(
        "--plot",
        type=plot_arg,
        help="also write charts to FILE.html (self-contained) or FILE.png (needs matplotlib)",
    )
    st.add_argument("--top", type=int, default=5, help="how many largest / longest transactions to list")
    st.add_argument("--start-position", type=position_arg)
    st.add_argument("--stop-position", type=position_arg)
    st.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false", default=True)
    st.set_defaults(require_fde=True, handler=Command(StatsOptions, cmd_stats))
    add_selection(st)
    add_schema_history(st)
