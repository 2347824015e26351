"""``sync``, ``offsets`` and ``export``: the Spark pipeline (Spark is imported only when one runs)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from binlake.cli.common import Command, Options, UsageError, add_selection, open_seed
from binlake.cli.serverurl import is_server_url
from binlake.console import output_console, plain
from binlake.credentials import redacted_url
from binlake.filters import Selection

if TYPE_CHECKING:
    from binlake.spark.resume import ResumePoint
    from binlake.spark.sinks import Sink


@dataclass(frozen=True)
class TargetOptions(Options):
    """``--to`` and where a JDBC target's password comes from (sync, offsets)."""

    to: str
    to_password_env: str | None = None
    to_password_file: str | None = None


@dataclass(frozen=True)
class SyncOptions(Options):
    source: str
    target: TargetOptions
    master: str = "local[*]"
    schema: str | None = None
    stream: bool = False
    nodes: bool = False  # the source names data nodes, comma-separated: merged into the global binlog
    final: bool = False  # with nodes: their files are complete (nothing held back)
    available_now: bool = False
    interval: str = "2 seconds"
    reads: str = "driver"  # with stream: where micro-batches are decoded (``binlake.spark.driverstream``)
    checkpoint: str | None = None
    selection: Selection = field(default_factory=Selection)


def check_sync_inputs(args: SyncOptions, target_dir: str | None) -> None:
    """What can be told of sync's source, schema and target before Spark starts (seconds): a mistake
    is one error line at once, not a Spark stack after the wait. A stream's source may hold no
    binlog yet, but must exist."""
    from binlake.tail import check_source, check_stream_source

    for source in sources(args):
        (check_stream_source if args.stream else check_source)(source)
    if target_dir is not None:
        check_target_dir(target_dir)
    if args.schema:
        open_seed(args.schema)  # a bad seed is one error line before Spark starts


def sources(args: SyncOptions) -> list[str]:
    """The binlog series sync reads: one, or with ``--nodes`` every data node's."""
    if not args.nodes:
        return [args.source]
    from binlake.spark.merged import node_paths

    try:
        return node_paths(args.source)
    except ValueError as e:
        raise UsageError(str(e)) from None


def check_target_dir(path: str) -> None:
    """A directory binlake writes into: it exists as a directory, or can be made (no file in the way)."""
    for p in (Path(path), *Path(path).absolute().parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{p} is a file: the target must be a directory (or not exist yet)")
            return


def sink_from(args: TargetOptions) -> Sink:
    """The ``--to`` target of ``sync`` and ``offsets``, with a JDBC password from outside the URL."""
    from binlake.credentials import CredentialsError, secret_from
    from binlake.spark.sinks import sink_for

    password = None
    try:
        if args.to.startswith("jdbc:"):
            if redacted_url(args.to) != args.to:
                print(
                    "binlake: warning: the target URL holds a password (visible in ps and shell history): "
                    "give it with --to-password-env VAR or --to-password-file FILE",
                    file=sys.stderr,
                )
            password = secret_from(args.to_password_env, args.to_password_file)
        return sink_for(args.to, password=password)
    except CredentialsError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(f"--to: {e}") from None


def batch_apply(sink: Sink, source: str, positioned: bool = True) -> Any:
    """The sink's exactly-once apply of one batch of the change log: ``apply(df, on_phase=None)``.
    ``positioned=False``: a snapshot's chunks, which record no binlog position."""
    from binlake.spark.apply import apply_changes

    def apply(df: Any, on_phase: Any = None) -> Any:
        return apply_changes(df, sink, source=source, on_phase=on_phase, positioned=positioned)

    return apply


def bytes_to_read(args: SyncOptions, point: ResumePoint | None) -> int:
    """The bytes a batch sync reads (for its progress): its files' from where it resumes, if it does."""
    from binlake.spark.source import resolve_files

    files = [f for s in sources(args) for f in resolve_files(s)]
    names = [os.path.basename(f) for f in files]
    if point is not None and point.file in names:
        files = files[names.index(point.file) :]
        return sum(Path(f).stat().st_size for f in files) - point.offset
    return sum(Path(f).stat().st_size for f in files)


def cmd_sync(args: SyncOptions) -> int:
    from rich.table import Table

    from binlake.spark.session import CLI_LOG_LEVEL, spark_session

    if is_server_url(args.source):
        from binlake.cli.live import cmd_live

        return cmd_live(args)
    sink = sink_from(args.target)
    state = sink.state_dir()
    if state is None and args.stream and not args.checkpoint:
        raise UsageError("--stream into jdbc needs --checkpoint DIR")
    from binlake.spark.source import absolute

    # executors run in another directory (on a cluster, on another host): every path absolute here
    args = replace(
        args,
        source=",".join(absolute(s) for s in sources(args)),
        schema=args.schema and absolute(args.schema),
        checkpoint=args.checkpoint and absolute(args.checkpoint),
    )
    check_sync_inputs(args, None if state is None else str(state))
    try:
        options = args.selection.to_options()
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.schema:
        options["schema"] = args.schema
    if args.nodes:
        if args.stream:
            raise UsageError(
                "--nodes merges in one batch: to follow a sharded database, `binlake merge --follow` "
                "into a directory and sync --stream that"
            )
        options["nodes"] = "true"
        options["final"] = "true" if args.final else "false"
    elif args.final:
        raise UsageError("--final goes with --nodes")
    console = output_console()

    apply = batch_apply(sink, args.source)

    if args.stream:
        from binlake.spark.apply import stream_changes
        from binlake.stopping import STOP_SIGNALS, stop_flag

        spark = spark_session(args.master, log_level=CLI_LOG_LEVEL)
        options["reads"] = args.reads
        checkpoint = args.checkpoint or str(Path(str(state)) / "_binlake_checkpoint")
        console.print(f"following {args.source} into {sink.shown} (checkpoint {checkpoint}); Ctrl-C stops")
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
    from binlake.spark import resume
    from binlake.spark.apply import change_log, sync_options
    from binlake.spark.progress import SyncProgress

    with console.status(f"starting Spark ({args.master})"):
        spark = spark_session(args.master, log_level=CLI_LOG_LEVEL)
    read = resume.read_of(sink, spark, args.source, sync_options(options, spark, args.source))
    if read.note:
        console.print(plain(read.note))
    with SyncProgress(spark, bytes_to_read(args, read.point), console) as progress:
        report = apply(change_log(spark, args.source, read.options), progress.phase)
    resume.record_of(sink, spark, args.source, read.options, report)
    nothing_new = read.point is not None and report.version == read.point.version
    last = (
        "nothing new"
        if not report.position or nothing_new
        else f"last transaction applied starts at {report.position}"
    )
    table = Table(title=f"binlake sync -> {sink.shown} ({last})")
    for c in ("table", "rows merged", "state"):
        table.add_column(c)
    for name, n in sorted(report.tables.items()):
        table.add_row(plain(name), f"{n:,}", "merged")
    for name in report.skipped:
        table.add_row(plain(name), "0", "already at this position")
    for rename in report.renamed:
        table.add_row(plain(rename), "", "followed upstream DDL")
    for filled in report.filled:
        table.add_row(plain(filled), "", "ADD COLUMN: rows held got its value")
    console.print(table)
    for warning in report.warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", plain(warning)))
    console.print(f"{report.changes:,} row changes read")
    if report.snapshots:
        console.print(f"{len(report.snapshots)} Parquet snapshots in {sink.shown} (one file per table)")
    return 0


@dataclass(frozen=True)
class OffsetsOptions(Options):
    """``offsets show`` or ``offsets reset`` (of one ``source``, or all)."""

    action: str
    target: TargetOptions
    master: str = "local[*]"
    source: str | None = None
    empty_change_tables: bool = False


def _target_offsets(args: OffsetsOptions, sink: Sink) -> tuple[list[Any], list[Any]]:
    """``offsets show`` or ``reset`` on the target: the offsets shown or reset, and (show) where
    batch syncs resume (``resume.Recorded``)."""
    from binlake.spark import offsets, resume
    from binlake.spark.sinks.jdbc import JdbcSink
    from binlake.spark.sinks.jdbc_records import JdbcRecords

    reset = args.action == "reset"
    if not isinstance(sink, JdbcSink):
        where = str(sink.state_dir())
        if reset:
            return offsets.reset_delta(where, args.source, empty_change_tables=args.empty_change_tables), []
        return offsets.delta_offsets(where), resume.recorded(resume.FileRecords(Path(where)))
    from binlake.spark.session import CLI_LOG_LEVEL, spark_session

    db = sink.connect(spark_session(args.master, log_level=CLI_LOG_LEVEL))
    try:
        if reset:
            return offsets.reset_jdbc(db, args.source, empty_change_tables=args.empty_change_tables), []
        return offsets.jdbc_offsets(db), resume.recorded(JdbcRecords(db))
    finally:
        db.close()


def cmd_offsets(args: OffsetsOptions) -> int:
    from rich.table import Table

    from binlake.spark.offsets import OffsetsError

    sink = sink_from(args.target)
    try:
        found, records = _target_offsets(args, sink)
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
    if records:
        resumes = Table(title="where the next batch sync resumes (README: a batch sync run again resumes)")
        for c in ("source", "selection", "at the transaction"):
            resumes.add_column(c)
        for r in records:
            resumes.add_row(plain(r.source), plain(r.read or "(all)"), r.at or "(a record that does not read)")
        console.print(resumes)
    return 0


@dataclass(frozen=True)
class ExportOptions(Options):
    """``export --from delta:PATH --to parquet:PATH``."""

    source: str
    to: str


def cmd_export(args: ExportOptions) -> int:
    from binlake.spark.sinks.parquet import export_parquet

    src_kind, _, src = args.source.partition(":")
    dst_kind, _, dst = args.to.partition(":")
    if src_kind != "delta" or dst_kind != "parquet" or not src or not dst:
        raise UsageError("export takes --from delta:PATH --to parquet:PATH")
    from binlake.spark.sinks.delta import delta_tables

    if not delta_tables(src):
        raise UsageError(f"{src}: no tables synced there (binlake sync --to delta:{src} writes them)")
    check_target_dir(dst)
    for name, n in sorted(export_parquet(src, dst).items()):
        print(f"{name}: {n:,} rows -> {dst}/{name}.parquet")
    return 0


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


def add_offsets(sub: Any) -> None:
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
        a.set_defaults(handler=Command(OffsetsOptions, cmd_offsets))


def add_sync(sub: Any) -> None:
    sy = sub.add_parser(
        "sync",
        help="apply a binlog series to Delta tables on Spark, exactly once",
        description="Apply a binlog series to Delta, Parquet or JDBC tables exactly once, optionally "
        "only a selection of it (the options of dump). The target records how far it got: a batch at "
        "or below that position is skipped, so to widen the selection of an existing target, or to "
        "apply again from the start, run `binlake offsets reset` first. A batch sync run again reads "
        "from where the last one of the same source and selection ended.",
    )
    sy.add_argument(
        "source",
        help="a binlog directory, an index file or a glob; or a server, mysql://USER@HOST:PORT[/DB,...] "
        "(also mariadb://): a snapshot of its tables, then its binlog (README: Snapshots)",
    )
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
        "--nodes",
        action="store_true",
        help="the source names a sharded database's data nodes, comma-separated (DIR,DIR,…): their "
        "binlogs merged into one globally ordered stream (the global binlog) and applied in one batch",
    )
    sy.add_argument(
        "--final",
        action="store_true",
        help="with --nodes: the nodes' files are complete (else what a node may still precede is held "
        "back for the next run, as binlake merge does)",
    )
    sy.add_argument(
        "--available-now", action="store_true", help="with --stream: process what is there, then stop"
    )
    sy.add_argument("--interval", default="2 seconds", help="with --stream: the trigger interval")
    sy.add_argument(
        "--reads",
        choices=("driver", "tasks"),
        default="driver",
        help="with --stream: decode each micro-batch on the driver (low lag; at most 32 MB of binlog a "
        "batch) or in Spark tasks (a long backlog read in parallel)",
    )
    sy.add_argument(
        "--checkpoint", help="with --stream: Spark checkpoint directory (default PATH/_binlake_checkpoint)"
    )
    add_selection(sy)
    sy.set_defaults(handler=Command(SyncOptions, cmd_sync))


def add_export(sub: Any) -> None:
    ex = sub.add_parser("export", help="a Parquet snapshot of synced Delta tables")
    ex.add_argument("--from", dest="source", required=True, help="delta:PATH written by binlake sync")
    ex.add_argument("--to", required=True, help="parquet:PATH (one file per table)")
    ex.set_defaults(handler=Command(ExportOptions, cmd_export))
