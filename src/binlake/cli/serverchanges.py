"""``binlake changes mysql://USER@HOST:PORT[/DB,…]``: row changes read from a server as a replica.

Without ``--follow`` it reads from the server's oldest binlog (or ``--start-file``/``--gtid``) to its
current end and exits; with ``--follow`` it starts at the current end (or there) and keeps reading
as the server commits, reconnecting after a dropped connection where no transaction is open (no
change lost, none repeated). Every transaction's lines are flushed when it is whole.

Column names: from the binlog's own metadata where it has them (``binlog_row_metadata=FULL``); else
from ``--schema``; else from the server's catalog, read when the run starts, at a binlog position P
(DDL after P keeps it in step). A read that starts before P first reads the statements between
its start and P (rows left undecoded): a table with DDL there has no known layout before its last
such DDL, so its rows before it keep ``@N`` names (said once on stderr) instead of today's names.
"""

from __future__ import annotations

import dataclasses
import glob
import signal
import sys
from typing import Any

from binlake.cli.changes import ChangesOptions, finished
from binlake.cli.common import UsageError, note
from binlake.cli.reading import select
from binlake.cli.replication import received
from binlake.cli.serverurl import server_from_url
from binlake.replication.client import (
    FilePosition,
    GtidStart,
    ReplicaClient,
    ServerAddress,
    Start,
)
from binlake.replication.stream import StreamEvent
from binlake.schema import SchemaTracker
from binlake.schema.history import Position
from binlake.stopping import interrupt_on


def _start(o: ChangesOptions) -> Start:
    if o.gtid and o.start_file:
        raise UsageError("--gtid and --start-file both say where to start: give one")
    if o.start_position is not None and not o.start_file:
        raise UsageError("--start-position is an offset in --start-file: give the file too")
    if o.gtid:
        return GtidStart(o.gtid)
    if o.start_file:
        return FilePosition(o.start_file, 4 if o.start_position is None else o.start_position)
    return "current" if o.follow else "oldest"


def _tracker(
    o: ChangesOptions, server: ServerAddress, databases: list[str], start: Start
) -> tuple[SchemaTracker, Start]:
    """The schema tracker and where to start: ``--schema`` when given; else the server's catalog as
    of its binlog end P (a ``--follow`` from "now" starts exactly at P: no DDL between the catalog
    and the stream), with the tables whose layout before P is unknown marked."""
    if o.schema.seed:
        return o.schema.tracker(), start
    from binlake.snapshot.catalog import server_tables
    from binlake.snapshot.schema import seed_at_position

    conn = server.connect()
    try:
        tables = server_tables(conn, lambda db, _: not databases or db in databases)
        history = seed_at_position(conn, tables)
    finally:
        conn.close()
    if not tables:
        note(
            f"{server.label}: the catalog shows this user no tables{' in ' + ', '.join(databases) if databases else ''}"
            " (no SELECT privilege, or none yet): rows of binlogs without column metadata are named @N"
        )
    tracker = SchemaTracker(history, on_mismatch=o.schema.mismatch or "positional")
    assert history.seeded_at is not None
    if start == "current":
        return tracker, FilePosition(*history.seeded_at)
    tracker.unknown_before = ddl_before(server, start, history.seeded_at)
    return tracker, start


def ddl_before(server: ServerAddress, start: Start, end: Position) -> dict[tuple[str, str], Position]:
    """The tables a DDL statement between ``start`` and ``end`` touches, each with the position of
    the last one: one pass over the server's binlog, rows left undecoded."""
    from binlake.events.query import Query
    from binlake.schema.ddl import is_ddl
    from binlake.schema.history import position_order
    from binlake.statements import classify

    touched: dict[tuple[str, str], Position] = {}
    stop = position_order(end)
    with ReplicaClient(server, start, blocking=False, decode_rows=False) as client:
        for item in client.events():
            if not isinstance(item, StreamEvent) or not item.in_file:
                continue
            if position_order((item.file, item.start)) >= stop:
                break
            for ev in item.events:
                b = ev.body
                if isinstance(b, Query) and is_ddl(b.query):
                    for t in classify(b.query, b.database).tables:
                        touched[t] = (item.file, item.start)
    return touched


def _check_databases(server: ServerAddress, databases: list[str]) -> None:
    """Say so when a database the URL names is not on the server (or not visible to this user):
    reading on prints nothing for it, which would look like a quiet database."""
    if not databases:
        return
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            present = {str(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()
    for db in databases:
        if db not in present:
            note(f"warning: {server.label}: no database {db!r} (or this user cannot see it)")


def server_changes(o: ChangesOptions, lines: Any) -> int:
    if o.poll is not None:
        raise UsageError("--poll is for a followed directory: a server sends each commit as it happens")
    server, databases, _ = server_from_url(o.sources[0])
    if databases and o.selection.databases:
        raise UsageError("databases are named in the URL and by --database: give them in one place")
    # the URL names databases exactly (a name with * or ? in it is that name, not a pattern)
    selection = dataclasses.replace(
        o.selection, databases=[glob.escape(d) for d in databases] or o.selection.databases
    )
    _check_databases(server, databases)
    tracker, start = _tracker(o, server, databases, _start(o))
    client = ReplicaClient(
        server,
        start,
        blocking=o.follow,
        verify_checksum=o.verify_checksum,
        keep_events=True,
        observers=[tracker],
    )

    def transactions() -> Any:
        for _ in received(client):
            if client.stream is not None:
                yield from client.stream.take_transactions()

    sys.stdout.flush()
    out = sys.stdout.buffer
    said = 0  # the tracker's mismatches said on stderr so far
    try:
        with interrupt_on(signal.SIGTERM), client:
            for t in finished(select(transactions(), selection)):
                got = lines.lines(t)
                if got:
                    out.write(("\n".join(got) + "\n").encode("utf-8", "surrogateescape"))
                    if o.follow:
                        out.flush()
                for m in tracker.mismatches[said:]:
                    note(f"warning: {m.file}:{m.offset}: {m.table} named @N: {m.detail}")
                said = len(tracker.mismatches)
    except KeyboardInterrupt:
        # following ends this way; a read to the server's end stopped early is not complete
        return 0 if o.follow else 130
    finally:
        out.flush()
        if o.schema.save:
            tracker.history.save(o.schema.save)
    return 0
