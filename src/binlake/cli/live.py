"""``binlake sync mysql://USER@HOST:PORT[/DB,…] --to SINK``: a live server into a sink in one command
(``binlake.spark.live``): the snapshot of its tables, then its binlog, resumable at every step.

The URL carries no password (``ps`` would show it): it comes from ``$MYSQL_PWD`` or the client
option files, as for ``binlake mirror``. Query parameters: ``socket``, ``ssl-mode``, ``ssl-ca``,
``ssl-cert``, ``ssl-key``, ``chunk-rows`` (rows per snapshot chunk).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

from binlake.cli.common import UsageError
from binlake.cli.sync import SyncOptions, batch_apply, cmd_sync, sink_from
from binlake.console import output_console
from binlake.credentials import CredentialsError, client_options, resolve_password
from binlake.replication.client import ServerAddress

if TYPE_CHECKING:
    from binlake.spark.sinks import Sink

DEFAULT_CHUNK_ROWS = 50_000


def server_from_url(url: str) -> tuple[ServerAddress, list[str], int]:
    """The server, the databases the URL's path names (none: every user database), rows per chunk."""
    u = urlsplit(url)
    if u.password is not None:
        raise UsageError(
            "the server URL holds a password (visible in ps): give it with $MYSQL_PWD or an option file"
        )
    query = {k: v[-1] for k, v in parse_qs(u.query).items()}
    known = {"socket", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key", "chunk-rows"}
    if set(query) - known:
        raise UsageError(
            f"unknown URL parameter(s) {', '.join(sorted(set(query) - known))}: {', '.join(sorted(known))}"
        )
    try:
        opts = client_options(None)
        password = resolve_password(None, options=opts)
        server = ServerAddress(
            host=u.hostname or "127.0.0.1",
            port=u.port or 3306,
            user=unquote(u.username) if u.username else opts.get("user") or "root",
            password=password,
            unix_socket=query.get("socket"),
            ssl_ca=query.get("ssl-ca"),
            ssl_cert=query.get("ssl-cert"),
            ssl_key=query.get("ssl-key"),
            ssl_mode=query.get("ssl-mode"),
        )
        chunk_rows = int(query.get("chunk-rows", DEFAULT_CHUNK_ROWS))
    except (CredentialsError, ValueError) as e:
        raise UsageError(str(e)) from None
    databases = [unquote(d) for d in u.path.lstrip("/").split(",") if d]
    return server, databases, chunk_rows


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
    from binlake.spark.session import spark_session

    server, databases, chunk_rows = server_from_url(args.source)
    sink = sink_from(args.target)
    state = state_dir(args, sink)
    selection = args.selection

    def keep(db: str, table: str) -> bool:
        return (not databases or db in databases) and selection.keeps_table(db, table)

    console = output_console()
    with console.status(f"starting Spark ({args.master})"):
        spark = spark_session(args.master)
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


__all__ = ["cmd_live", "server_from_url"]
