"""``binlake changes``: row changes as JSON lines, one object per inserted, updated or deleted row
(the envelope is ``binlake.render.changes``'s, documented in the README), from binlog files or a
directory, with ``--follow`` from a directory the server is still writing, and from a server itself
(``mysql://USER@HOST:PORT[/DB,…]``) read as a replica."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from binlake.cli.common import Command, Options, SchemaOptions, UsageError, add_schema_history, add_selection
from binlake.cli.serverurl import is_server_url
from binlake.events.rows import Rows
from binlake.filters import Selection
from binlake.txn import UNFINISHED, Transaction


@dataclass(frozen=True)
class ChangesOptions(Options):
    sources: tuple[str, ...]
    follow: bool = False
    poll: float | None = None  # seconds between looks at a followed directory (default 0.5)
    verify_checksum: bool = True
    selection: Selection = field(default_factory=Selection)
    schema: SchemaOptions = SchemaOptions()
    # where a server is read from (default: its oldest binlog; with --follow, its current end)
    start_file: str | None = None
    start_position: int | None = None  # in --start-file (default 4: its first event)
    gtid: str | None = None


def warn_undecoded(t: Transaction) -> None:
    """A rows event whose rows could not be decoded has no changes to print: say so on stderr
    rather than leave a silent gap in the stream."""
    for ev in t.events:
        b = ev.body
        if b.__class__ is Rows and (b.table is None or b.undecoded_reason):
            reason = b.undecoded_reason or "no TABLE_MAP for its table id"
            print(f"binlake: warning: {ev.source}:{ev.offset}: rows not decoded ({reason})", file=sys.stderr)


def finished(transactions: Iterable[Transaction]) -> Iterator[Transaction]:
    for t in transactions:
        if t.kind != UNFINISHED:
            warn_undecoded(t)
            yield t


def cmd_changes(o: ChangesOptions) -> int:
    from binlake.render.changes import ChangeLines

    if "ddl" in o.selection.operations:
        raise UsageError(
            "--type ddl: changes prints row changes only (binlake dump --type ddl shows the DDL)"
        )
    lines = ChangeLines()
    if any(is_server_url(s) for s in o.sources):
        if len(o.sources) != 1:
            raise UsageError("a server URL is the only source of a run (not mixed with files)")
        from binlake.cli.serverchanges import server_changes

        return server_changes(o, lines)
    if o.start_file or o.gtid or o.start_position is not None:
        raise UsageError(
            "--start-file, --start-position and --gtid choose where a server is read from: give a mysql:// URL"
        )
    if o.follow:
        return follow(o, lines)
    from binlake.cli.reading import ReadOptions, selected_transactions
    from binlake.render.output import write_lines_to

    read = ReadOptions(
        o.sources, verify_checksum=o.verify_checksum, selection=o.selection, schema=o.schema
    ).resolved()
    transactions = finished(selected_transactions(read, streams_output=True))
    write_lines_to(line for t in transactions for line in lines.lines(t))
    return 0


def follow(o: ChangesOptions, lines: Any) -> int:
    """Every finished transaction's changes as the directory grows, flushed whenever the follower
    has caught up; Ctrl-C or SIGTERM ends it (exit 0, every line whole)."""
    from binlake.cli.follow import DirectoryFollower
    from binlake.cli.reading import select
    from binlake.stopping import interrupt_on

    if len(o.sources) != 1:
        raise UsageError("--follow takes one source: a binlog directory, an index file or a glob")
    sys.stdout.flush()
    out = sys.stdout.buffer
    poll = 0.5 if o.poll is None else o.poll
    follower = DirectoryFollower(o.sources[0], o.schema.tracker(), poll, o.verify_checksum)
    try:
        with interrupt_on(signal.SIGTERM):
            transactions = follower.transactions(idle=out.flush, stop=lambda: False)
            for t in finished(select(transactions, o.selection)):
                got = lines.lines(t)
                if got:
                    out.write(("\n".join(got) + "\n").encode("utf-8", "surrogateescape"))
    except KeyboardInterrupt:
        pass
    out.flush()
    return 0


def add_changes(sub: Any) -> None:
    c = sub.add_parser(
        "changes",
        help="row changes as JSON lines (op, before, after, source, transaction, key), one per row",
    )
    c.add_argument(
        "sources",
        nargs="+",
        metavar="FILES|DIR|URL",
        help="binlog files in order, or a directory / index / glob; or a server, "
        "mysql://USER@HOST:PORT[/DB,...] (also mariadb://; password from $MYSQL_PWD or ~/.my.cnf), "
        "read as a replica",
    )
    c.add_argument(
        "--follow",
        action="store_true",
        help="keep reading the directory as the server writes it, or the server's binlog as it "
        "commits (Ctrl-C or SIGTERM stops)",
    )
    s = c.add_argument_group("start (a server)")
    s.add_argument(
        "--start-file", help="binlog file to start from (default: the oldest; with --follow, the current end)"
    )
    s.add_argument("--start-position", type=int, help="offset in --start-file (an event start; default 4)")
    s.add_argument("--gtid", help="start after these GTIDs (MySQL GTID set or MariaDB GTID position)")
    c.add_argument("--poll", type=float, help="seconds between looks at a followed directory (default 0.5)")
    c.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false", default=True)
    add_selection(c)
    add_schema_history(c)
    c.set_defaults(handler=Command(ChangesOptions, cmd_changes))
