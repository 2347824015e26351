"""``dump``, ``sql`` and ``stats``: the events, redo/flashback SQL and statistics of binlog files."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from binlake.cli.common import UsageError, _add_schema, _add_selection, _position, selection_from
from binlake.console import ByteProgress
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.filters import Selection
from binlake.reader import BinlogReader
from binlake.txn import CONTROL_EVENTS, Transaction, TransactionGrouper

if TYPE_CHECKING:
    from binlake.schema import SchemaHistory, SchemaTracker


def schema_tracker(args: argparse.Namespace) -> SchemaTracker:
    """The schema history the run keeps: from --schema (a DDL script or a saved history), else empty;
    DDL in the binlog updates it either way. Without --schema a mismatch falls back to @N."""
    from binlake.schema import SchemaHistory, SchemaTracker

    if getattr(args, "_tracker", None) is None:
        seed = getattr(args, "schema", None)
        history = open_seed(seed) if seed else SchemaHistory()
        mode = getattr(args, "schema_mismatch", None) or ("error" if seed else "positional")
        args._tracker = SchemaTracker(history, on_mismatch=mode)
    return args._tracker  # type: ignore[no-any-return]


def open_seed(seed: str) -> SchemaHistory:
    """The ``--schema`` seed, refused when a statement of it is not understood: the table it
    defines would be missing, and rows of it read as @N (or stop the run) far from the cause."""
    from binlake.schema import SchemaHistory

    history = SchemaHistory.open(seed)
    bad = [n for n in history.not_understood if n.position[0] == "<seed>"]
    if bad:
        first = " ".join(bad[0].sql.split())[:100]
        raise UsageError(
            f"--schema {seed}: {len(bad)} statement(s) not understood; first: {bad[0].reason}: {first}"
        )
    return history


def _file_events(args: argparse.Namespace) -> Iterator[tuple[int, Event]]:
    """Events of the files in the order given: --start-position applies to the first file and
    --stop-position to the last, as with mysqlbinlog."""
    last = len(args.files) - 1
    tracker = schema_tracker(args)
    sizes = [Path(f).stat().st_size for f in args.files]
    streams = getattr(args, "func", None) in (
        cmd_dump,
        cmd_sql,
    )  # output lines as it goes (stats prints at the end)
    with ByteProgress(sum(sizes), f"reading {len(sizes)} file(s)", streams_output=streams) as progress:
        for seq, path in enumerate(args.files):
            if seq == 0 and args.start_position is not None:
                check_start(path, args.start_position)
            reader = BinlogReader(
                path,
                verify_checksum=args.verify_checksum,
                start_position=args.start_position if seq == 0 else None,
                stop_position=args.stop_position if seq == last else None,
                require_fde=args.require_fde,
                observers=[tracker],
            )
            for ev in reader:
                progress.advance_to(sum(sizes[:seq]) + ev.offset)
                yield seq, ev
    if getattr(args, "save_schema", None):
        tracker.history.save(args.save_schema)


def check_start(path: str, start: int) -> None:
    """A --start-position past the end of the file is a mistake (a position of another file?), not
    an empty selection: say so instead of printing nothing."""
    size = Path(path).stat().st_size
    if start > size:
        raise BinlogError(
            f"--start-position {start} is past the end of the file ({size:,} bytes)", source=path
        )


def selected_events(args: argparse.Namespace) -> Iterator[Event]:
    """The events ``dump`` prints: everything, or the selected transactions' selected events."""
    sel = selection_from(args)
    if sel == Selection():
        yield from (ev for _, ev in _file_events(args))
        return
    grouper = TransactionGrouper(keep_events=True)
    for seq, ev in _file_events(args):
        if ev.type_code in CONTROL_EVENTS:
            yield ev
            continue
        for t in grouper.feed(seq, ev):
            if sel.keeps(t):
                yield from (e for e in t.events if sel.keeps_event(t, e))
    for t in grouper.finish():
        if sel.keeps(t):
            yield from (e for e in t.events if sel.keeps_event(t, e))


def cmd_dump(args: argparse.Namespace) -> int:
    from binlake.render.jsonl import render_jsonl
    from binlake.render.text import render_text

    events = selected_events(args)
    lines = (
        render_jsonl(events)
        if args.format == "json"
        else render_text(events, verbosity=args.verbose, positional=args.positional)
    )
    out = sys.stdout
    for line in lines:
        out.write(line)
        out.write("\n")
    return 0


def selected_transactions(args: argparse.Namespace) -> Iterator[Transaction]:
    """Finished transactions that pass the selection, with only their selected events."""
    sel = selection_from(args)
    grouper = TransactionGrouper(keep_events=True)
    for seq, ev in _file_events(args):
        for t in grouper.feed(seq, ev):
            if sel.keeps(t):
                t.events = [e for e in t.events if sel.keeps_event(t, e)]
                yield t


def cmd_sql(args: argparse.Namespace) -> int:
    from binlake.render.sql import render_sql

    out = sys.stdout
    for line in render_sql(selected_transactions(args), flashback=args.flashback):
        out.write(line)
        out.write("\n")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from binlake.stats import collect, print_stats, write_plot

    stats = collect(selected_transactions(args), top=args.top)
    print_stats(stats)
    if args.plot:
        write_plot(stats, args.plot)
        print(f"charts written to {args.plot}")
    return 0


def add_dump(sub: Any) -> None:
    d = sub.add_parser("dump", help="decode binlog files to mysqlbinlog-style text or JSON lines")
    d.add_argument("files", nargs="+", help="binlog or relay log files, in order")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument(
        "--start-position",
        type=_position,
        help="first event offset in the first file (its format event is always read)",
    )
    d.add_argument(
        "--stop-position",
        type=_position,
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
    _add_selection(d)
    _add_schema(d)
    d.set_defaults(func=cmd_dump)


def add_sql(sub: Any) -> None:
    q = sub.add_parser("sql", help="redo SQL of the row changes, or --flashback SQL that undoes them")
    q.add_argument("files", nargs="+", help="binlog files, in order")
    q.add_argument(
        "--flashback", action="store_true", help="undo: newest first, INSERT<->DELETE, UPDATE images swapped"
    )
    q.add_argument("--start-position", type=_position, help="first event offset in the first file")
    q.add_argument("--stop-position", type=_position, help="stop before this offset of the last file")
    q.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false", default=True)
    q.set_defaults(require_fde=True)
    _add_selection(q)
    _add_schema(q)
    q.set_defaults(func=cmd_sql)


def add_stats(sub: Any) -> None:
    st = sub.add_parser(
        "stats", help="activity, hot tables, big and long transactions, group commits, parallelism"
    )
    st.add_argument("files", nargs="+", help="binlog files, in order")
    st.add_argument(
        "--plot", help="also write charts to FILE.html (self-contained) or FILE.png (needs matplotlib)"
    )
    st.add_argument("--top", type=int, default=5, help="how many largest / longest transactions to list")
    st.add_argument("--start-position", type=_position)
    st.add_argument("--stop-position", type=_position)
    st.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false", default=True)
    st.set_defaults(require_fde=True, func=cmd_stats)
    _add_selection(st)
    _add_schema(st)
