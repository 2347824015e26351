"""The ``binlake`` command."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from binlake import __version__
from binlake.console import ByteProgress, output_console
from binlake.credentials import redacted_url
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.filters import OPERATIONS, Selection, parse_datetime
from binlake.gtid import AnyGtidSet, GtidSet, GtidSetError, MariaGtidPos
from binlake.reader import BinlogReader
from binlake.sizes import size_arg as _size
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


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes in one line, exit 2 (argparse prints the whole usage first: a dozen lines for
    dump, burying the one that says what is wrong)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def check_start(path: str, start: int) -> None:
    """A --start-position past the end of the file is a mistake (a position of another file?), not
    an empty selection: say so instead of printing nothing."""
    size = Path(path).stat().st_size
    if start > size:
        raise BinlogError(
            f"--start-position {start} is past the end of the file ({size:,} bytes)", source=path
        )


def selection_from(args: argparse.Namespace) -> Selection:
    return Selection(
        start_time=args.start_datetime,
        stop_time=args.stop_datetime,
        include_gtids=args.include_gtids,
        exclude_gtids=args.exclude_gtids,
        databases=args.database or [],
        tables=args.table or [],
        operations=args.type or [],
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
    from binlake.render.output import write_lines_to
    from binlake.render.text import render_text

    events = selected_events(args)
    lines = (
        render_jsonl(events)
        if args.format == "json"
        else render_text(events, verbosity=args.verbose, positional=args.positional)
    )
    write_lines_to(lines)
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
    from binlake.render.output import write_lines_to
    from binlake.render.sql import render_sql

    write_lines_to(render_sql(selected_transactions(args), flashback=args.flashback))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from binlake.stats import collect, print_stats, write_plot

    stats = collect(selected_transactions(args), top=args.top)
    print_stats(stats)
    if args.plot:
        write_plot(stats, args.plot)
        print(f"charts written to {args.plot}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rich.table import Table

    from binlake.position import index_file
    from binlake.series import BinlogSeries
    from binlake.stats import _ts

    series = BinlogSeries.open(*args.source)
    table = Table(title=f"{len(series.files)} binlog file(s) (header-only scan)")
    for c in ("file", "size", "events", "transactions", "first commit", "last commit", "previous GTIDs"):
        table.add_column(c)
    for f in series.files:
        ix = index_file(f)
        prev = ix.previous_gtids if ix.previous_gtids is not None else ix.maria_gtid_list
        table.add_row(
            f.name,
            f"{ix.size:,}",
            f"{ix.events:,}",
            f"{ix.transactions:,}",
            _ts(ix.first_commit_us),
            _ts(ix.last_commit_us),
            str(prev) if prev is not None else "-",
        )
    output_console().print(table)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from binlake.generate import GenConfig, Generator

    cfg = GenConfig(
        seed=args.seed,
        flavor=args.flavor,
        target_bytes=args.size,
        max_file_size=args.max_file_size,
        json_type=not args.json_as_text,
        keep_transactions=False,  # the truth goes to truth/transactions.jsonl: memory stays bounded
    )
    with ByteProgress(args.size, "generating", streams_output=False) as progress:
        result = Generator(cfg).run(args.out, on_progress=progress.advance_to)
    total = sum(f.stat().st_size for f in result.files)
    with open(result.truth_dir / "transactions.jsonl") as f:
        count = sum(1 for _ in f)
    print(f"{len(result.files)} binlog file(s), {total:,} bytes, {count:,} transactions in {args.out}")
    print(f"truth (final tables, every committed transaction): {result.truth_dir}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from binlake.shardsim import ShardSimulator, SimConfig

    cfg = SimConfig(
        seed=args.seed,
        nodes=args.nodes,
        transactions=args.transactions,
        carrier=args.carrier,
        heartbeat_every=args.heartbeat_every,
        max_file_size=args.max_file_size,
    )
    result = ShardSimulator(cfg).run(args.out)
    kinds: dict[str, int] = {}
    for t in result.transactions:
        kinds[f"{t.kind} {t.outcome}"] = kinds.get(f"{t.kind} {t.outcome}", 0) + 1
    print(
        f"{args.nodes} data nodes in {args.out}/dn*: "
        + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items()))
    )
    print(f"truth: {args.out}/truth.jsonl; conserved total {result.total}")
    return 0


class UsageError(Exception):
    """Options that cannot work together, said in one line (exit 2, as for bad input)."""


def check_sync_inputs(args: argparse.Namespace, target_dir: str | None) -> None:
    """What can be told of sync's source, schema and target before Spark starts (seconds): a mistake
    is one error line at once, not a Spark stack after the wait. A stream's source may hold no
    binlog yet, but must exist."""
    from binlake.tail import check_source, check_stream_source

    (check_stream_source if args.stream else check_source)(args.source)
    if target_dir is not None:
        check_target_dir(target_dir)
    if args.schema:
        open_seed(args.schema)  # a bad seed is one error line before Spark starts


def check_target_dir(path: str) -> None:
    """A directory binlake writes into: it exists as a directory, or can be made (no file in the way)."""
    for p in (Path(path), *Path(path).absolute().parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{p} is a file: the target must be a directory (or not exist yet)")
            return


@dataclass
class Sink:
    """A ``--to`` target: ``kind`` delta, parquet or jdbc; ``where`` the Delta directory (Parquet's
    exactly-once state) or the JDBC URL; ``shown`` what output may say of it (never a password)."""

    kind: str
    where: str
    shown: str
    snapshots: str | None = None
    password: str | None = None


def sink_from(args: argparse.Namespace) -> Sink:
    """The ``--to`` target of ``sync`` and ``offsets``, with the JDBC password from outside the URL."""
    kind, _, where = args.to.partition(":")
    if kind not in ("delta", "jdbc", "parquet") or not where:
        raise UsageError("--to takes delta:PATH, parquet:PATH or jdbc:postgresql://… / jdbc:mariadb://…")
    if kind != "jdbc":  # executors run in another directory (on a cluster, another host): absolute
        from binlake.spark.source import absolute

        where = absolute(where)
    sink = Sink(kind, where, redacted_url(args.to))
    if kind == "parquet":  # Parquet cannot MERGE: a Delta state beside the snapshots keeps it exactly-once
        sink.snapshots, sink.where = where, str(Path(where) / "_binlake_state")
    if kind == "jdbc":
        from binlake.credentials import CredentialsError, secret_from
        from binlake.spark.jdbc import dialect_for

        sink.where = args.to
        if sink.shown != args.to:
            print(
                "binlake: warning: the target URL holds a password (visible in ps and shell history): "
                "give it with --to-password-env VAR or --to-password-file FILE",
                file=sys.stderr,
            )
        try:
            dialect_for(args.to)
            sink.password = secret_from(args.to_password_env, args.to_password_file)
        except (ValueError, CredentialsError) as e:
            raise UsageError(str(e)) from None
    return sink


def cmd_sync(args: argparse.Namespace) -> int:
    from rich.table import Table

    from binlake.spark.session import spark_session

    sink = sink_from(args)
    kind, where, snapshots, password, shown = sink.kind, sink.where, sink.snapshots, sink.password, sink.shown
    if kind == "jdbc" and args.stream and not args.checkpoint:
        raise UsageError("--stream into jdbc needs --checkpoint DIR")
    from binlake.spark.source import absolute

    # executors run in another directory (on a cluster, on another host): every path absolute here
    args.source = absolute(args.source)
    args.schema = args.schema and absolute(args.schema)
    args.checkpoint = args.checkpoint and absolute(args.checkpoint)
    check_sync_inputs(args, None if kind == "jdbc" else (snapshots or where))
    try:
        options = selection_from(args).to_options()
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.schema:
        options["schema"] = args.schema
    console = output_console()

    def apply(df: Any, on_phase: Any = None) -> Any:
        """The sink's exactly-once apply of one batch of the change log."""
        if kind == "jdbc":
            from binlake.spark.jdbc import apply_changes_jdbc

            return apply_changes_jdbc(
                spark, df, args.to, source=args.source, on_phase=on_phase, password=password
            )
        from binlake.spark.apply import apply_changes, export_parquet

        report = apply_changes(df, where, source=args.source, on_phase=on_phase)
        if snapshots:
            if on_phase:
                on_phase("writing Parquet snapshots")
            report.snapshots = export_parquet(where, snapshots)
        return report

    if args.stream:
        from binlake.spark.apply import stream_changes
        from binlake.stopping import STOP_SIGNALS, stop_flag

        spark = spark_session(args.master)
        checkpoint = args.checkpoint or str(Path(where) / "_binlake_checkpoint")
        console.print(f"following {args.source} into {shown} (checkpoint {checkpoint}); Ctrl-C stops")
        with stop_flag(*STOP_SIGNALS) as stop:  # after Spark's start: it installs a Ctrl-C handler
            query = stream_changes(
                spark,
                args.source,
                checkpoint,
                apply,
                available_now=args.available_now,
                interval=args.interval,
                options=options,
            )
            while query.isActive and not stop.is_set():
                query.awaitTermination(1)  # seconds: Ctrl-C is seen between calls into the JVM
            query.stop()
        merged = sum(n for r in query.reports for n in r.tables.values())
        console.print(f"{len(query.reports)} micro-batches, {merged:,} rows merged")
        return 0
    from binlake.spark.apply import change_log
    from binlake.spark.progress import SyncProgress
    from binlake.spark.source import resolve_files

    with console.status(f"starting Spark ({args.master})"):
        spark = spark_session(args.master)
    total = sum(Path(f).stat().st_size for f in resolve_files(args.source))
    with SyncProgress(spark, total, console) as progress:
        report = apply(change_log(spark, args.source, options), progress.phase)
    table = Table(title=f"binlake sync -> {shown} (up to {report.position or 'nothing new'})")
    for c in ("table", "rows merged", "state"):
        table.add_column(c)
    for name, n in sorted(report.tables.items()):
        table.add_row(name, f"{n:,}", "merged")
    for name in report.skipped:
        table.add_row(name, "0", "already at this position")
    for rename in report.renamed:
        table.add_row(rename, "", "followed upstream DDL")
    console.print(table)
    console.print(f"{report.changes:,} row changes read")
    if snapshots:
        console.print(f"{len(report.snapshots)} Parquet snapshots in {snapshots} (one file per table)")
    return 0


def _target_offsets(args: argparse.Namespace, sink: Sink) -> list[Any]:
    """``offsets show`` or ``reset`` on the target: the offsets shown or reset."""
    from binlake.spark import offsets

    reset = args.action == "reset"
    if sink.kind != "jdbc":
        if reset:
            return offsets.reset_delta(sink.where, args.source, empty_change_tables=args.empty_change_tables)
        return offsets.delta_offsets(sink.where)
    from binlake.spark.jdbc import Jdbc
    from binlake.spark.session import spark_session

    db = Jdbc(spark_session(args.master), sink.where, sink.password)
    try:
        if reset:
            return offsets.reset_jdbc(db, args.source, empty_change_tables=args.empty_change_tables)
        return offsets.jdbc_offsets(db)
    finally:
        db.close()


def cmd_offsets(args: argparse.Namespace) -> int:
    from rich.table import Table

    from binlake.spark.offsets import OffsetsError

    sink = sink_from(args)
    try:
        found = _target_offsets(args, sink)
    except OffsetsError as e:
        raise UsageError(str(e)) from None
    console = output_console()
    if not found:
        console.print(f"no positions {'to reset' if args.action == 'reset' else 'recorded'} in {sink.shown}")
        return 0
    verb = "forgotten" if args.action == "reset" else "recorded"
    table = Table(title=f"positions {verb} in {sink.shown}")
    for c in ("source", "table", "version", "position", "kind"):
        table.add_column(c)
    for o in found:
        kind = "" if o.table is None else f"change table, {o.rows:,} rows" if o.change_table else "keyed"
        if args.action == "reset" and o.change_table:
            kind += " (emptied)"
        shown = o.position if args.action == "reset" else o.shown
        table.add_row(o.source, o.table or "", str(o.version or "-"), shown, kind)
    console.print(table)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from binlake.spark.apply import export_parquet

    src_kind, _, src = args.source.partition(":")
    dst_kind, _, dst = args.to.partition(":")
    if src_kind != "delta" or dst_kind != "parquet" or not src or not dst:
        raise UsageError("export takes --from delta:PATH --to parquet:PATH")
    from binlake.spark.apply import delta_tables

    if not delta_tables(src):
        raise UsageError(f"{src}: no tables synced there (binlake sync --to delta:{src} writes them)")
    check_target_dir(dst)
    for name, n in sorted(export_parquet(src, dst).items()):
        print(f"{name}: {n:,} rows -> {dst}/{name}.parquet")
    return 0


def cmd_find_position(args: argparse.Namespace) -> int:
    from binlake.position import find_by_gtid_set, find_by_time
    from binlake.series import BinlogSeries

    series = BinlogSeries.open(*args.source)
    found = find_by_time(series, args.datetime) if args.datetime else find_by_gtid_set(series, args.gtid_set)
    print(found.describe())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from binlake.demo import run_demo

    return run_demo(args.workdir)


def _position(text: str) -> int:
    """A byte offset in a binlog file (argparse type)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte offset (a whole number)")
    return int(text)


def _datetime(text: str) -> object:
    try:
        return parse_datetime(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date/time (YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM])"
        ) from None


def _gtid_set(text: str) -> AnyGtidSet:
    try:
        return AnyGtidSet.parse(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _gtid_any(text: str) -> GtidSet | MariaGtidPos:
    try:
        return MariaGtidPos.parse(text) if text.strip() and ":" not in text else GtidSet.parse(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def schema_position(at: str | None, files: list[str]) -> tuple[str, int] | None:
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


def cmd_schema(args: argparse.Namespace) -> int:
    from binlake.series import BinlogSeries

    args.files = [str(f) for f in BinlogSeries.open(*args.source).files]
    args.verify_checksum, args.require_fde, args.start_position = True, True, None
    args.stop_position = None
    at = schema_position(args.at, args.files)
    for _ in _file_events(args):
        pass
    history = schema_tracker(args).history
    catalog = history.at(at) if at else history.catalog
    for (db, _table), t in sorted(catalog.items()):
        if args.database and db not in args.database:
            continue
        print(t.ddl() + ";\n")
    print(f"-- {len(history.changes)} DDL statements applied, {len(history.not_understood)} not understood")
    for n in history.not_understood[:20]:
        print(f"--   {n.position[0]}:{n.position[1]}: {n.reason}")
    return 0


def _add_schema(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("schema history (column names and types for binlogs without metadata)")
    g.add_argument(
        "--schema",
        help="seed: a DDL script (mysqldump --no-data, SHOW CREATE TABLE) or a saved history .json",
    )
    g.add_argument(
        "--schema-mismatch",
        choices=("error", "positional"),
        help="a table whose layout disagrees with the history: stop (default with --schema) or print @N",
    )
    g.add_argument("--save-schema", help="write the history, with the DDL met, to this .json at the end")


def _add_selection(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (by commit time, GTID, schema, table, operation)")
    g.add_argument(
        "--start-datetime",
        type=_datetime,
        help="transactions committed at or after this time (UTC unless an offset is given)",
    )
    g.add_argument("--stop-datetime", type=_datetime, help="transactions committed before this time")
    g.add_argument(
        "--include-gtids",
        type=_gtid_set,
        help="only these GTIDs: a MySQL GTID set (uuid:1-5:7) and/or MariaDB GTIDs (0-1-595) "
        "and ranges (domain-server-lo-hi: 0-1-590-595), comma-separated",
    )
    g.add_argument("--exclude-gtids", type=_gtid_set, help="not these GTIDs (as --include-gtids)")
    g.add_argument("--database", action="append", help="only this schema (glob; repeatable)")
    g.add_argument("--table", action="append", help="only this table, 'tbl' or 'db.tbl' (glob; repeatable)")
    g.add_argument("--type", action="append", choices=OPERATIONS, help="only these changes (repeatable)")


def _add_target(p: argparse.ArgumentParser) -> None:
    """``--to`` and the JDBC password options (sync, offsets)."""
    p.add_argument(
        "--to",
        required=True,
        help="delta:PATH (one Delta table per source table under PATH), parquet:PATH (a Parquet snapshot per "
        "table, refreshed every batch; the exactly-once state in PATH/_binlake_state), jdbc:postgresql://HOST:PORT/DB?user=U "
        "or jdbc:mariadb://HOST:PORT/DB?user=U (tables `db.table` in DB); see README, Security",
    )
    p.add_argument(
        "--to-password-env", metavar="VAR", help="jdbc: the target's password is in environment variable VAR"
    )
    p.add_argument(
        "--to-password-file", metavar="FILE", help="jdbc: the target's password is in FILE (a secret file)"
    )


def _add_offsets(sub: Any) -> None:
    o = sub.add_parser(
        "offsets",
        help="show or reset the positions a sync target recorded",
        description="The positions sync recorded in a target: Delta per table (app-transaction version "
        "and the binlake.position of its last commit), JDBC per source (_binlake_positions). A reset "
        "makes the next sync apply its whole input again: keyed tables take that safely (the order-key "
        "guard keeps rows as new already); change tables (no primary key) guard by order key too, so "
        "while they hold rows a reset is refused unless --empty-change-tables empties them for a refill.",
    )
    actions = o.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the recorded positions per source (and per Delta table)")
    reset = actions.add_parser("reset", help="forget them: the next sync re-applies from the start")
    reset.add_argument("--source", help="only this source (as sync was given it; offsets show lists them)")
    reset.add_argument(
        "--empty-change-tables",
        action="store_true",
        help="also empty the change tables (tables without a primary key), so the next sync refills "
        "them exactly (Delta keeps the old rows in the table history)",
    )
    for a in (show, reset):
        _add_target(a)
        a.add_argument("--master", default="local[*]", help="jdbc: the Spark master that runs the driver")
        a.set_defaults(func=cmd_offsets)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="binlake", description="Exact, ordered change data from MySQL-family binlogs.")
    p.add_argument("--version", action="version", version=f"binlake {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

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

    ix = sub.add_parser("index", help="per-file summary of a series from a header-only scan")
    ix.add_argument("source", nargs="+", help="a binlog directory, an index file, or files in order")
    ix.set_defaults(func=cmd_index)

    gen = sub.add_parser("generate", help="write a deterministic workload as binlogs, with its truth")
    gen.add_argument("out", help="output directory (binlogs, index file, truth/)")
    gen.add_argument("--size", type=_size, default=10**7, help="total binlog size to write (e.g. 500MB, 1GB)")
    gen.add_argument("--flavor", choices=("mysql57", "mysql80", "mariadb"), default="mysql80")
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--max-file-size", type=_size, default=256 * 10**6, help="rotate files past this size")
    gen.add_argument(
        "--json-as-text",
        action="store_true",
        help="JSON documents in a LONGTEXT column (for tools without binary JSON)",
    )
    gen.set_defaults(func=cmd_generate)

    sim = sub.add_parser(
        "simulate-shards", help="binlogs of a sharded database (XA with commit TSO, holes), with truth"
    )
    sim.add_argument("out")
    sim.add_argument("--nodes", type=int, default=4)
    sim.add_argument("--transactions", type=int, default=1000)
    sim.add_argument(
        "--carrier",
        choices=("sequence80", "gcn105", "qstatus200"),
        default="sequence80",
        help="where the commit TSO is written: PolarDB-X 5.7 sequence events, 8.0 GCN events, or query status",
    )
    sim.add_argument(
        "--heartbeat-every", type=int, default=25, help="ticks between heartbeat transactions (0: none)"
    )
    sim.add_argument("--max-file-size", type=_size, default=10**6)
    sim.add_argument("--seed", type=int, default=1)
    sim.set_defaults(func=cmd_simulate)

    sy = sub.add_parser(
        "sync",
        help="apply a binlog series to Delta tables on Spark, exactly once",
        description="Apply a binlog series to Delta, Parquet or JDBC tables exactly once, optionally "
        "only a selection of it (the options of dump). The target records how far it got: a batch at "
        "or below that position is skipped, so to widen the selection of an existing target, or to "
        "apply again from the start, run `binlake offsets reset` first.",
    )
    sy.add_argument("source", help="a binlog directory, an index file or a glob")
    _add_target(sy)
    sy.add_argument(
        "--master",
        default="local[*]",
        help="Spark master (local[*] by default; a cluster URL works unchanged)",
    )
    sy.add_argument(
        "--schema", help="schema history .json or DDL script, for binlogs without column metadata"
    )
    sy.add_argument(
        "--stream", action="store_true", help="follow the directory as it grows (structured streaming)"
    )
    sy.add_argument(
        "--available-now", action="store_true", help="with --stream: process what is there, then stop"
    )
    sy.add_argument("--interval", default="2 seconds", help="with --stream: the trigger interval")
    sy.add_argument(
        "--checkpoint", help="with --stream: Spark checkpoint directory (default PATH/_binlake_checkpoint)"
    )
    _add_selection(sy)
    sy.set_defaults(func=cmd_sync)

    _add_offsets(sub)

    ex = sub.add_parser("export", help="a Parquet snapshot of synced Delta tables")
    ex.add_argument("--from", dest="source", required=True, help="delta:PATH written by binlake sync")
    ex.add_argument("--to", required=True, help="parquet:PATH (one file per table)")
    ex.set_defaults(func=cmd_export)

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
    _add_schema(sc)
    sc.set_defaults(func=cmd_schema)

    f = sub.add_parser("find-position", help="where to start reading for a point in time or a GTID set")
    f.add_argument("source", nargs="+", help="a binlog directory, an index file, or files in order")
    what = f.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--datetime",
        type=_datetime,
        help="first position of transactions committed at or after this time (UTC unless an offset is given)",
    )
    what.add_argument(
        "--gtid-set", type=_gtid_any, help="a MySQL GTID set or a MariaDB GTID position already executed"
    )
    f.set_defaults(func=cmd_find_position)

    from binlake.globalbinlog.commands import add_parsers as add_merge_parsers
    from binlake.replication.commands import add_parsers as add_replication_parsers

    add_replication_parsers(sub)
    add_merge_parsers(sub)

    m = sub.add_parser(
        "demo",
        help="generate a MySQL 8 binlog series, sync it into Delta on local Spark, check it against its truth",
        description="Generate a seeded MySQL 8 binlog series (with DDL: columns added, dropped and "
        "renamed, tables renamed) and its truth, apply it to Delta tables with the Spark pipeline, "
        "and compare every table with the truth (exit 1 if one differs). Needs Java 17, no server.",
    )
    m.add_argument(
        "--workdir", default="out/demo", help="where the binlogs and the Delta tables go (emptied first)"
    )
    m.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # string values print as their stored bytes
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (BinlogError, UsageError) as e:
        sys.stdout.flush()
        print(f"binlake: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:
        sys.stdout.flush()
        print(f"binlake: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if not engine_error(e):
            raise
        sys.stdout.flush()
        print(f"binlake: error: {engine_error_line(e)}", file=sys.stderr)
        return 2


def engine_error(e: BaseException) -> bool:
    """An error of an engine sync drives (Spark through py4j, delta-rs): its message carries a Java
    or Rust stack, or a Python worker's traceback, none of which the user should have to read."""
    if type(e).__module__.split(".")[0] in ("pyspark", "py4j"):
        return True
    delta = sys.modules.get("deltalake.exceptions")
    return delta is not None and isinstance(e, delta.DeltaError)


_RAISED = re.compile(r"^((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (\S.*)$", re.M)


def engine_error_line(e: BaseException) -> str:
    """The cause of an engine error in one line: the binlake error a worker raised (it names the file
    and offset), else the innermost Python error in the message, else the message's first line."""
    text = str(e)
    raised = _RAISED.findall(text)
    ours = [m for m in raised if m[0].startswith("binlake.")]
    if ours or raised:
        name, message = (ours or raised)[-1]
        return message if name.startswith("binlake.") else f"{name.rsplit('.', 1)[-1]}: {message}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    return f"{type(e).__name__}: {first}"


if __name__ == "__main__":
    sys.exit(main())
