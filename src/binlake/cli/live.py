"""``binlake sync mysql://USER@HOST:PORT[/DB,…] --to SINK``: a live server into a sink in one command
(``binlake.spark.live``): the snapshot of its tables, then its binlog, resumable at every step.

The URL is read by ``binlake.cli.serverurl``; this command's own parameter: ``chunk-rows`` (rows per
snapshot chunk).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from binlake.cli.common import UsageError
from binlake.cli.serverurl import server_from_url
from binlake.cli.sync import SyncOptions, batch_apply, cmd_sync, sink_from
from binlake.console import output_console

if TYPE_CHECKING:
    from binlake.spark.sinks import Sink

DEFAULT_CHUNK_ROWS = 50_000


def chunk_rows_of(parameters: dict[str, str]) -> int:
    try:
        rows = int(parameters.get("chunk-rows", DEFAULT_CHUNK_ROWS))
    except ValueError as e:
        raise UsageError(f"chunk-rows: {e}") from None
    if rows < 1:
        raise UsageError("chunk-rows must be at least 1")
    return rows


def state_dir(args: SyncOptions, sink: Sink) -> Path:
    """Where the journal and the mirrored binlog live: beside a Delta/Parquet target's data, or in
    the checkpoint directory a JDBC target needs."""
    where = sink.state_dir()
    if where is None:
        if not args.checkpoint:
            raise UsageError(
                "sync from a server into jdbc needs --checkpoint DIR (its journal and binlog copy)"
            )
        return Path(args.checkpoint).absolute() / "live"
    return where / "_binlake_live"


def cmd_live(args: SyncOptions) -> int:
    from binlake.spark.live import LiveSync
    from binlake.spark.session import CLI_LOG_LEVEL, spark_session

    server, databases, parameters = server_from_url(args.source, frozenset({"chunk-rows"}))
    chunk_rows = chunk_rows_of(parameters)
    sink = sink_from(args.target)
    state = state_dir(args, sink)
    selection = args.selection

    def keep(db: str, table: str) -> bool:
        return (not databases or db in databases) and selection.keeps_table(db, table)

    console = output_console()
    with console.status(f"starting Spark ({args.master})"):
        spark = spark_session(args.master, log_level=CLI_LOG_LEVEL)
    live = LiveSync(server, state, keep, rows_per_chunk=chunk_rows)
    j = live.journal
    console.print(
        f"snapshot of {len(j.plan)} tables in {len(j.chunks)} chunks ({len(j.done)} applied before); "
        f"the binlog from {j.start[0]}"
    )
    apply = batch_apply(sink, f"snapshot:{server.label}", positioned=False)
    live.snapshot(
        spark,
        apply,
        on_wave=lambda done, total: console.print(f"snapshot: {done}/{total} chunks applied"),
    )
    # the copy must pass every chunk's position before a batch of it is applied (module docstring)
    console.print(f"binlog: {live.mirror(blocking=False)} events copied into {live.mirror_dir}")
    schema = args.schema or (str(live.schema_path) if live.schema_path else None)  # the server's catalog
    follow = replace(
        args, source=str(live.mirror_dir), stream=args.stream and not args.available_now, schema=schema
    )
    if not follow.stream:
        return cmd_sync(follow)
    stop = threading.Event()
    mirror = threading.Thread(target=live.mirror, args=(True, stop), daemon=True, name="binlake-mirror")
    mirror.start()
    try:
        return cmd_sync(follow)
    finally:
        stop.set()


__all__ = ["cmd_live"]
