"""Transactions: events grouped GTID → BEGIN/DDL → table maps and rows → XID / COMMIT / XA PREPARE,
with the metadata ordering needs. Sans-I/O: feed events, get finished transactions.

The order key is (file sequence number in the series, start offset of the transaction): strictly
increasing in binlog order, which is commit order for one server. Header timestamps are statement
start times and XIDs are not in commit order (seed 000), so neither is used for ordering.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from binlake.events.base import Event, Skipped
from binlake.events.control import XaPrepare, Xid
from binlake.events.gtid import Gtid, MariaGtid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.statements import Kind, XaId, classify, xa_canonical

# Events that describe the stream, never part of a transaction.
CONTROL_EVENTS = frozenset(
    {
        EventType.FORMAT_DESCRIPTION,
        EventType.START_V3,
        EventType.ROTATE,
        EventType.STOP,
        EventType.PREVIOUS_GTIDS,
        EventType.MARIA_GTID_LIST,
        EventType.MARIA_BINLOG_CHECKPOINT,
        EventType.HEARTBEAT,
        EventType.HEARTBEAT_V2,
        EventType.INCIDENT,
        EventType.MARIA_START_ENCRYPTION,
        EventType.PERCONA_START_ENCRYPTION,
        EventType.AURORA_PADDING,
        EventType.POLARDBX_CONSENSUS,
    }
)
GTID_EVENTS = frozenset(
    {EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED, EventType.MARIA_GTID}
)

# what ended a transaction
COMMIT, ROLLBACK, DDL, XA_PREPARE, XA_COMMIT, XA_ROLLBACK, UNFINISHED = (
    "commit",
    "rollback",
    "ddl",
    "xa_prepare",
    "xa_commit",
    "xa_rollback",
    "unfinished",
)


@dataclass(slots=True)
class Transaction:
    file_seq: int
    source: str
    start: int  # offset of its first event
    end: int = 0  # offset just past its last event
    end_source: str = ""
    kind: str = UNFINISHED
    gtid: str | None = None  # MySQL uuid[:tag]:n, or MariaDB domain-server-seq
    anonymous: bool = False
    server_id: int = 0
    xid: int | None = None
    xa_id: XaId | None = None  # XA transactions: their id (from XA START/PREPARE/COMMIT/ROLLBACK)
    last_committed: int | None = None
    sequence_number: int | None = None
    commit_ts_us: int | None = None  # MySQL 8: immediate_commit_timestamp
    original_commit_ts_us: int | None = None
    first_header_ts: int = 0  # header time of its first event (a statement start time)
    commit_header_ts: int = 0  # header time of the event that ended it
    commit_exec_time: int = 0  # exec_time of the ending QUERY (seconds the statement ran)
    tables: list[tuple[str, str]] = field(default_factory=list)
    rows: int = 0
    events: list[Event] = field(default_factory=list)
    began: bool = False  # saw BEGIN / XA START
    standalone: bool = False  # MariaDB FL_STANDALONE: ends at its statement

    @property
    def order_key(self) -> tuple[int, int]:
        return (self.file_seq, self.start)

    @property
    def commit_time_us(self) -> int:
        """The commit time: exact where the server wrote it (µs), else the ending event's header time."""
        if self.commit_ts_us:
            return self.commit_ts_us
        return self.commit_header_ts * 1_000_000

    @property
    def commit_time_exact(self) -> bool:
        return bool(self.commit_ts_us)

    @property
    def latest_commit_us(self) -> int:
        """An upper bound of the commit time when the server did not write it: the ending event's
        header second, plus the ending statement's run time, plus the rest of that second."""
        if self.commit_ts_us:
            return self.commit_ts_us
        return (self.commit_header_ts + self.commit_exec_time + 1) * 1_000_000 - 1


# bodies of exactly these classes (Rows, TableMap) only go into an open transaction (they end
# nothing), unless their type code has rules of its own (``feed`` takes these first: most events
# are row changes and their table maps)
_OWN_RULES = CONTROL_EVENTS | GTID_EVENTS | {EventType.POLARDBX_GCN, EventType.POLARDBX_SEQUENCE}


class TransactionGrouper:
    """Feed events in binlog order; ``feed`` returns the transactions they finish."""

    def __init__(self, keep_events: bool = True) -> None:
        self.keep_events = keep_events
        self.current: Transaction | None = None
        self.pending: list[Event] = []  # vendor events met between transactions (PolarDB-X GCN)
        self._payload_size = 0  # size of the last TRANSACTION_PAYLOAD, whose inner events follow it
        self._last_end, self._last_source = 0, ""  # where the last event of the open transaction ends

    def _start(self, file_seq: int, ev: Event) -> Transaction:
        t = Transaction(
            file_seq=file_seq,
            source=ev.source,
            start=ev.offset,
            server_id=ev.header.server_id,
            first_header_ts=ev.header.timestamp,
        )
        if self.pending:
            t.start = min(t.start, self.pending[0].offset)
            if self.keep_events:
                t.events.extend(self.pending)
            self.pending = []
        self.current = t
        return t

    def _finish(self, ev: Event, kind: str) -> Transaction:
        t = self.current
        assert t is not None
        t.kind = kind
        # an event unpacked from a TRANSACTION_PAYLOAD shares its offset: the payload's end is the end
        t.end = ev.offset + (self._payload_size if ev.inner_index is not None else ev.header.event_size)
        t.end_source = ev.source
        t.commit_header_ts = ev.header.timestamp
        if isinstance(ev.body, Query):
            t.commit_exec_time = ev.body.exec_time
        self.current = None
        return t

    def feed(self, file_seq: int, ev: Event) -> list[Transaction]:
        code = ev.kind
        body = ev.body
        t = self.current
        cls = body.__class__
        if t is not None and (cls is Rows or cls is TableMap) and code not in _OWN_RULES:  # most events
            # ``_add`` inline for these two bodies (a call per event was a fifth of the grouping)
            if self.keep_events:
                t.events.append(ev)
            if ev.inner_index is None:
                size = ev.header.event_size
                if code == EventType.TRANSACTION_PAYLOAD:
                    self._payload_size = size
            else:
                size = self._payload_size
            self._last_end, self._last_source = ev.offset + size, ev.source
            if cls is TableMap:
                key = (body.database, body.table)
                if key not in t.tables:
                    t.tables.append(key)
            else:
                t.rows += body.row_total
            return []
        out: list[Transaction] = []
        if code in CONTROL_EVENTS:
            if (
                code in (EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.STOP)
                and ev.inner_index is None
            ):
                if (
                    self.current is not None
                    and ev.header.log_pos != 0
                    and code != EventType.FORMAT_DESCRIPTION
                ):
                    out.append(self._abandon())  # a transaction never spans files
            return out
        if code in GTID_EVENTS:
            if self.current is not None:
                out.append(self._abandon())
            t = self._start(file_seq, ev)
            self._take_gtid(t, ev)
            self._add(t, ev)
            return out
        if code in (EventType.POLARDBX_GCN, EventType.POLARDBX_SEQUENCE) and self.current is None:
            self.pending.append(ev)
            return out
        t = self.current if self.current is not None else self._start(file_seq, ev)
        self._add(t, ev)
        if isinstance(body, Xid):
            t.xid = body.xid
            out.append(self._finish(ev, COMMIT))
        elif isinstance(body, XaPrepare):
            t.xa_id = XaId(body.format_id, body.gtrid, body.bqual)
            out.append(self._finish(ev, XA_PREPARE))
        elif isinstance(body, Query):
            kind = statement_ends(t, body.query)
            if kind:
                out.append(self._finish(ev, kind))
        elif code == EventType.TRANSACTION_PAYLOAD and isinstance(body, Skipped):
            out.append(self._finish(ev, COMMIT))  # header-only scans: the payload holds the commit
        return out

    def _take_gtid(self, t: Transaction, ev: Event) -> None:
        b = ev.body
        if isinstance(b, Gtid):
            t.gtid, t.anonymous = b.gtid, b.anonymous
            t.last_committed, t.sequence_number = b.last_committed, b.sequence_number
            t.commit_ts_us, t.original_commit_ts_us = (
                b.immediate_commit_timestamp,
                b.original_commit_timestamp,
            )
        elif isinstance(b, MariaGtid):
            t.gtid, t.standalone = b.gtid, b.standalone
            t.began = not b.standalone  # MariaDB writes the GTID event in place of BEGIN
            if b.commit_id is not None:
                t.last_committed = b.commit_id

    def _add(self, t: Transaction, ev: Event) -> None:
        if self.keep_events:
            t.events.append(ev)
        if ev.inner_index is None:
            size = ev.header.event_size
            if ev.kind == EventType.TRANSACTION_PAYLOAD:
                self._payload_size = size
        else:
            size = self._payload_size
        self._last_end, self._last_source = ev.offset + size, ev.source
        b = ev.body
        if isinstance(b, TableMap):
            key = (b.database, b.table)
            if key not in t.tables:
                t.tables.append(key)
        elif isinstance(b, Rows):
            t.rows += b.row_total

    def _abandon(self) -> Transaction:
        """The open transaction was cut off (a new GTID, a rotate): it is returned unfinished."""
        t = self.current
        assert t is not None
        t.end, t.end_source = self._last_end, self._last_source
        t.kind = UNFINISHED
        self.current = None
        return t

    def finish(self) -> list[Transaction]:
        """End of input: an open transaction is returned as unfinished (its commit was not seen)."""
        return [self._abandon()] if self.current is not None else []


# what a statement does to the open transaction (see statements.Kind)
_OPENS = frozenset({Kind.BEGIN.value, Kind.XA_START.value})
# savepoints live inside the transaction, XA END only detaches it: it goes on
_GOES_ON = frozenset(
    k.value for k in (Kind.SAVEPOINT, Kind.RELEASE_SAVEPOINT, Kind.ROLLBACK_TO_SAVEPOINT, Kind.XA_END)
)
_COMMITS = frozenset({Kind.DML.value, Kind.SET.value})
_ENDS = {
    Kind.COMMIT.value: COMMIT,
    Kind.ROLLBACK.value: ROLLBACK,
    Kind.XA_PREPARE.value: XA_PREPARE,
    Kind.XA_COMMIT.value: XA_COMMIT,
    Kind.XA_ROLLBACK.value: XA_ROLLBACK,
}


def statement_ends(t: Transaction, query: str) -> str | None:
    """What a statement does to the open transaction ``t``: None (it goes on) or how it ends (the
    grouper's rule; the merge's node reader applies it too)."""
    # the XA statements a server writes (most statements of a sharded node) without a Statement
    xa = xa_canonical(query) if query[:3] == "XA " else None
    if xa is not None:
        return apply_statement(t, xa[0]._value_, xa[1])
    st = classify(query)
    return apply_statement(t, st.kind._value_, st.xid)


def apply_statement(t: Transaction, kind: str, xid: XaId | None) -> str | None:
    """``statement_ends`` of a statement already classified: ``kind`` is its ``Kind``'s value
    (members hash in Python, their values in C: a lookup per statement), ``xid`` its XA id."""
    if kind in _OPENS:
        t.began = True
        t.xa_id = xid or t.xa_id
        return None
    if kind in _GOES_ON:
        return None
    ends = _ENDS.get(kind)
    if ends is not None:
        t.xa_id = xid or t.xa_id
        return ends
    if t.began and not t.standalone:
        return None  # a statement-format change inside the transaction
    # on its own: DDL (and what is not understood) ends as DDL; data and SET statements commit
    return COMMIT if kind in _COMMITS else DDL


def iter_transactions(
    events: Iterable[tuple[int, Event]], keep_events: bool = True, include_unfinished: bool = False
) -> Iterator[Transaction]:
    """Transactions of (file sequence number, event) pairs in binlog order."""
    g = TransactionGrouper(keep_events)
    for seq, ev in events:
        for t in g.feed(seq, ev):
            if include_unfinished or t.kind != UNFINISHED:
                yield t
    for t in g.finish():
        if include_unfinished:
            yield t
