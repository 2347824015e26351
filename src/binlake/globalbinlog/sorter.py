"""One data node: its transactions become pieces (XA branches, local transactions), each committed
piece gets its virtual TSO, and the first-level sorter releases pieces in vtso order as soon as no
unresolved prepare can still precede them (global-binlog.md §1 theorems, §5.3 B–C). Sans-I/O: feed
``Transaction``s in binlog order.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.events.control import XaPrepare
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.globalbinlog.body import NodeBody
from binlake.globalbinlog.nodes import leave_out
from binlake.globalbinlog.spill import is_body
from binlake.globalbinlog.vtso import TSO_NODE, Segment, Vtso, make
from binlake.statements import XaId
from binlake.txn import COMMIT, DDL, XA_COMMIT, XA_PREPARE, XA_ROLLBACK, Transaction

TSO_XA, NO_TSO_XA, ONE_PHASE, LOCAL, HEARTBEAT = "TSO_XA", "NO_TSO_XA", "ONE_PHASE", "LOCAL", "HEARTBEAT"
DDL_KIND = "DDL"  # a node's DDL statement: a transaction of its own
UNBOUNDED: Vtso = "~"  # sorts after every vtso: a finished node holds nothing back
HEARTBEAT_TABLES = frozenset({"__cdc_heartbeat__", "__drds_heartbeat__"})
TOP_TXN = 10**19 - 1  # above every transaction id (they have 63 bits)


class OrphanCommitError(BinlogError):
    """An XA COMMIT whose prepare is not in what was read (it was prepared before the start)."""


def polardbx_txn_id(gtrid: bytes) -> int:
    """PolarDB-X global transaction ids: ``drds-<hex>@<hex>`` -> the first hex number."""
    m = re.match(rb"drds-([0-9a-fA-F]+)@", gtrid)
    if m:
        return int(m.group(1), 16) & ((1 << 63) - 1)
    import hashlib

    return int.from_bytes(hashlib.blake2b(gtrid, digest_size=8).digest(), "big") >> 1


@dataclass(slots=True)  # no __dict__: one object less per held piece for the cycle collector
class Piece:
    """One XA branch or one local transaction of one node."""

    node: str
    node_seq: str
    key: XaId | tuple[str, int, int]  # an XA branch by its id, a local transaction by where it starts
    kind: str
    start: tuple[int, int]  # (file number, offset) of its first event
    events: Sequence[Event]  # the body: table maps, rows, DDL (a ``spill.SpilledBody`` when held on disk)
    xid: XaId | None = None
    txn_id: int | None = None
    cts: int | None = None
    vtso: Vtso | None = None
    state: str = "open"  # prepared | committed | rolled_back
    local_xid: int | None = None  # the XID event's number of a local transaction
    snapshot: int | None = None  # the snapshot TSO it read at
    commit_at: tuple[int, int] | None = None  # (file number, offset) where it committed on its node
    prepared_cts: int | None = None  # a commit TSO written already in the prepare group (AliSQL)
    tables: frozenset[str] = frozenset()  # the tables its rows change

    @property
    def branch(self) -> str:
        return self.xid.bqual.decode("utf-8", "replace") if self.xid else ""

    @property
    def rows(self) -> list[Rows]:
        return [e.body for e in self.events if isinstance(e.body, Rows)]


def commit_tso(t: Transaction) -> int | None:
    """The commit TSO a node wrote with an XA COMMIT: PolarDB-X Sequence (type 2), GCN with the
    commit flag, or the QUERY status variable 200 (``lizard_commit_gcn``)."""
    for e in t.events:
        b = e.body
        if isinstance(b, PolarxSequence) and b.is_commit:
            return b.sequence
        if isinstance(b, PolarxGcn) and b.has_commit_tso:
            return b.gcn
        if isinstance(b, Query) and b.status.get("lizard_commit_gcn") is not None:
            return int(b.status["lizard_commit_gcn"])
    return None


def snapshot_tso(t: Transaction) -> int | None:
    """The snapshot TSO of a transaction: Sequence type 1, a GCN event, or status variable 201."""
    for e in t.events:
        b = e.body
        if isinstance(b, PolarxSequence) and b.sequence_type == 1:
            return b.sequence
        if isinstance(b, PolarxGcn) and not b.has_commit_tso:
            return b.gcn
        if isinstance(b, Query) and b.status.get("lizard_prepare_gcn") is not None:
            return int(b.status["lizard_prepare_gcn"])
    return None


_TABLE_SETS: dict[tuple[tuple[str, str], ...], frozenset[str]] = {}
TABLE_SETS_KEPT = 4096


def _table_set(tables: list[tuple[str, str]]) -> frozenset[str]:
    """The names of ``tables``, one shared set per list of tables (a held piece keeps one object
    less for the cycle collector to walk)."""
    key = tuple(tables)
    found = _TABLE_SETS.get(key)
    if found is None:
        found = frozenset(table for _, table in tables)
        if len(_TABLE_SETS) < TABLE_SETS_KEPT:
            _TABLE_SETS[key] = found
    return found


def _body(t: Transaction) -> NodeBody:
    """What a merged transaction keeps (``spill.is_body``), from a transaction with its events (rows
    decoded when looked at: ``body.NodeBody``)."""
    # a tuple: the collector stops walking it once its events are untracked (the node loop's are)
    return NodeBody(tuple([e for e in t.events if is_body(e, t.kind == DDL)]))


@dataclass
class NodeSorter:
    """Feed a node's transactions in binlog order; ``drain()`` returns the pieces now final, in vtso
    order; ``watermark`` bounds every later one from below (exclusive)."""

    name: str
    node_seq: str
    heartbeat_tables: frozenset[str] = HEARTBEAT_TABLES
    segment: Segment = field(default_factory=Segment)
    max_passed: Vtso = ""
    finished: bool = False
    # binlog order of prepares (P), commits (C) and rollbacks (R); an unresolved P blocks the front
    fifo: deque[tuple[str, Piece]] = field(default_factory=deque)
    pending: dict[XaId, Piece] = field(default_factory=dict)
    ready: list[tuple[Vtso, str, int, Piece]] = field(default_factory=list)
    orphans: list[tuple[XaId, tuple[int, int]]] = field(default_factory=list)
    declared: Vtso = ""  # a bound told from outside (see ``declare_quiet_until``)
    # Unaligned start (global-binlog.md §2.11): a node whose input does not begin at its first binlog
    # misses what it committed before; ``floor`` bounds those transactions from above (their pieces on
    # other nodes must not come out alone), ``aligned`` once it is known (``_align``)
    complete_from_start: bool = True
    # how a piece gets its body from a transaction (``spill.BodyOf`` for light transactions)
    body_of: Callable[[Transaction], Sequence[Event]] | None = None
    floor: Vtso = ""
    aligned: bool = True
    _n: int = 0

    def __post_init__(self) -> None:
        self.aligned = self.complete_from_start

    def _align(self, cts: int) -> None:
        """A TSO commit whose prepare is in the input: whatever this node committed before its input
        begins committed before that prepare, so with a smaller TSO (Theorem 3)."""
        if not self.aligned:
            self.floor = max(self.floor, make(cts - 1, TOP_TXN, 10**10 - 1, "999999"))
            self.aligned = True

    def _piece(self, t: Transaction, kind: str, xid: XaId | None = None) -> Piece:
        self._n += 1
        key: XaId | tuple[str, int, int] = xid if xid is not None else ("local", t.file_seq, t.start)
        p = Piece(
            self.name,
            self.node_seq,
            key,
            kind,
            (t.file_seq, t.start),
            self.body_of(t) if self.body_of else _body(t),
            xid,
            local_xid=t.xid,
            snapshot=snapshot_tso(t),
            tables=_table_set(t.tables),
        )
        # a held piece and its body refer to events, ids and names, and nothing they refer to refers
        # back: out of the cycle collector, whose full collections walked every held piece (with 16
        # nodes most of the reader's CPU; CPython never untracks a tuple holding such objects)
        leave_out(p, p.events, *((p.events.raw,) if isinstance(p.events, NodeBody) else ()))
        return p

    def _commit(self, p: Piece, cts: int | None = None, at: tuple[int, int] | None = None) -> None:
        if cts is not None:
            self._align(cts)
            self.segment.raise_to(cts, p.txn_id or 0)
            p.cts, p.vtso = cts, make(cts, p.txn_id or 0, 0, TSO_NODE)
        else:
            s = self.segment
            p.vtso = make(s.tso, s.txn_id, s.next_seq(), self.node_seq)
        p.state = "committed"
        p.commit_at = at
        entry = (p.vtso, p.branch, self._n, p)
        leave_out(entry)  # as the piece
        heapq.heappush(self.ready, entry)
        self._queue("C", p)

    def _queue(self, what: str, p: Piece) -> None:
        """``p`` in binlog order: prepared (P), committed (C), rolled back (R). The entry is out of
        the cycle collector as the piece (CPython keeps a tuple holding any object of a class
        tracked: with 16 nodes ~16,000 of them made each full collection take ~10 ms)."""
        entry = (what, p)
        leave_out(entry)
        self.fifo.append(entry)

    def feed(self, t: Transaction) -> None:
        if t.kind == XA_PREPARE:
            prep = next(e.body for e in t.events if isinstance(e.body, XaPrepare))
            xid = t.xa_id  # the reader's (one object less per held branch), when it is this one
            if xid is None or (xid.format_id, xid.gtrid, xid.bqual) != (
                prep.format_id,
                prep.gtrid,
                prep.bqual,
            ):
                xid = XaId(prep.format_id, prep.gtrid, prep.bqual)
            p = self._piece(t, ONE_PHASE if prep.one_phase else NO_TSO_XA, xid)
            p.txn_id = polardbx_txn_id(prep.gtrid)
            p.prepared_cts = commit_tso(t)
            if prep.one_phase:
                # committed here, and local to this node whatever sequence it carries (AliSQL writes
                # one): its place is where it committed in this binlog, a virtual TSO, never that
                # sequence — a later conflicting commit may carry a smaller one (global-binlog.md
                # §2.5, seed 002)
                self._commit(p, None, (t.file_seq, t.start))
            else:
                self._queue("P", p)
                p.state = "prepared"
                self.pending[xid] = p
        elif t.kind in (XA_COMMIT, XA_ROLLBACK):
            if t.xa_id is None:
                raise BinlogError(f"an XA COMMIT/ROLLBACK without a readable XA id at {t.source}:{t.start}")
            if t.xa_id not in self.pending:  # prepared before what was read: reported, never guessed
                self.orphans.append((t.xa_id, (t.file_seq, t.start)))
                cts = commit_tso(t) if t.kind == XA_COMMIT else None
                if cts is not None:  # its other branches must not come out alone; what follows it
                    txn_id = polardbx_txn_id(t.xa_id.gtrid)  # sorts after it, as in the whole history
                    self.floor = max(self.floor, make(cts, txn_id, 0, TSO_NODE))
                    self.segment.raise_to(cts, txn_id)
                return
            p = self.pending.pop(t.xa_id)
            if t.kind == XA_ROLLBACK:
                p.state = "rolled_back"
                self._queue("R", p)
                return
            cts = commit_tso(t)
            cts = cts if cts is not None else p.prepared_cts
            if cts is not None:
                p.kind = HEARTBEAT if p.tables and p.tables <= self.heartbeat_tables else TSO_XA
            self._commit(p, cts, (t.file_seq, t.start))
        elif t.kind in (COMMIT, DDL):
            self._commit(self._piece(t, LOCAL if t.kind == COMMIT else DDL_KIND), at=(t.file_seq, t.start))

    def resolve(self, xid: XaId, commit: bool, cts: int | None = None) -> None:
        """Settle a prepared branch whose outcome the binlog does not (yet) say, from an outside source
        (the coordinator's transaction log, XA RECOVER): committed with its ``cts``, or rolled back."""
        p = self.pending.pop(xid)
        if not commit:
            p.state = "rolled_back"
            return
        if cts is not None:
            p.kind = TSO_XA
        self._commit(p, cts)

    def declare_quiet_until(self, tso: int) -> None:
        """An explicit watermark for an idle node: it will commit nothing with a TSO at or below
        ``tso`` (e.g. the TSO service's current value). Only honoured while no prepare is open: a
        prepared branch may already hold a smaller commit TSO."""
        self.declared = max(self.declared, make(tso, TOP_TXN, 0, TSO_NODE))
        self.segment.raise_to(tso, TOP_TXN)  # its next local commit sorts after the declared bound

    def finish(self) -> None:
        """No more input for this node (a batch run)."""
        self.finished = True

    @property
    def watermark(self) -> Vtso:
        """Every piece this node emits later has a larger vtso."""
        if self.finished and not self.pending:
            return UNBOUNDED
        if not self.pending:
            return max(self.max_passed, self.declared)
        return self.max_passed

    def drain(self) -> list[Piece]:
        # a commit raises the bound only once everything before it is resolved: a branch prepared
        # before a commit may still commit with a smaller TSO (a hole), one prepared after it may not
        while self.fifo and not (self.fifo[0][0] == "P" and self.fifo[0][1].state == "prepared"):
            what, p = self.fifo.popleft()
            if what == "C" and p.vtso is not None and p.vtso > self.max_passed:
                self.max_passed = p.vtso
        limit = self.watermark if self.finished and not self.pending else self.max_passed
        out = []
        while self.ready and self.ready[0][0] <= limit:
            out.append(heapq.heappop(self.ready)[3])
        return out
