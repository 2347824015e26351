"""``binlake changes mysql://USER@HOST:PORT[/DB,…]``: row changes read from a server as a replica.

Without ``--follow`` it reads from the server's oldest binlog (or ``--start-file``/``--gtid``) to its
current end and exits; with ``--follow`` it starts at the current end (or there) and keeps reading
as the server commits, reconnecting after a dropped connection where no transaction is open (no
change lost, none repeated). Every transaction's lines are flushed when it is whole.

Column names: from the binlog's own metadata where it has them (``binlog_row_metadata=FULL``); else
from ``--schema``, else from the server's catalog, read when the run starts (the DDL in the binlog
after that point keeps it in step; rows older than a later DDL, read with ``--start-file``, are
named by position where their layout differs from it).
"""

from __future__ import annotations

import dataclasses
import glob
import signal
import sys
from typing import Any

from binlake.cli.changes import ChangesOptions, finished
from binlake.cli.common import UsageError
from binlake.cli.reading import select
from binlake.cli.serverurl import server_from_url
from binlake.replication.client import (
    FilePosition,
    GtidStart,
    Reconnected,
    ReplicaClient,
    ServerAddress,
    Start,
)
from binlake.replication.stream import StreamEvent
from binlake.schema import SchemaTracker
from binlake.stopping import interrupt_on


def _start(o: ChangesOptions) -> Start:
    if o.gtid and o.start_file:
        raise UsageError("--gtid and --start-file both say where to start: give one")
    if o.gtid:
        return GtidStart(o.gtid)
    if o.start_file:
        return FilePosition(o.start_file, o.start_position)
    return "current" if o.follow else "oldest"


def _tracker(o: ChangesOptions, server: ServerAddress, databases: list[str]) -> SchemaTracker:
    """``--schema`` when given; else the catalog of the server's tables as of its binlog end."""
    if o.schema.seed:
        return o.schema.tracker()
    from binlake.snapshot.catalog import server_tables
    from binlake.snapshot.schema import seed_at_position

    conn = server.connect()
    try:
        tables = server_tables(conn, lambda db, _: not databases or db in databases)
        history = seed_at_position(conn, tables)
    finally:
        conn.close()
    return SchemaTracker(history, on_mismatch=o.schema.mismatch or "positional")


def _note(msg: str) -> None:
    sys.stdout.flush()
    print(f"binlake: {msg}", file=sys.stderr, flush=True)


def server_changes(o: ChangesOptions, lines: Any) -> int:
    server, databases, _ = server_from_url(o.sources[0])
    if databases and o.selection.databases:
        raise UsageError("databases are named in the URL and by --database: give them in one place")
    # the URL names databases exactly (a name with * or ? in it is that name, not a pattern)
    selection = dataclasses.replace(
        o.selection, databases=[glob.escape(d) for d in databases] or o.selection.databases
    )
    start = _start(o)
    tracker = _tracker(o, server, databases)
    client = ReplicaClient(
        server,
        start,
        blocking=o.follow,
        verify_checksum=o.verify_checksum,
        keep_events=True,
        observers=[tracker],
    )

    def transactions() -> Any:
        for item in client.events():
            if isinstance(item, Reconnected):
                _note(f"reconnected after {item.reason}; continuing at {item.resume}")
            elif isinstance(item, StreamEvent) and client.stream is not None:
                yield from client.stream.take_transactions()

    sys.stdout.flush()
    out = sys.stdout.buffer
    try:
        with interrupt_on(signal.SIGTERM), client:
            for t in finished(select(transactions(), selection)):
                got = lines.lines(t)
                if got:
                    out.write(("\n".join(got) + "\n").encode("utf-8", "surrogateescape"))
                    if o.follow:
                        out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        out.flush()
        if o.schema.save:
            tracker.history.save(o.schema.save)
    return 0
