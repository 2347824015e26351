"""The global merge: pieces of every node in vtso order, released up to the smallest node watermark
(an idle node holds the merge back until a heartbeat or its end), then the transaction merge: the
pieces of one distributed transaction (same vtso) become one transaction.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from binlake.errors import BinlogError
from binlake.globalbinlog.nodes import leave_out, node_transactions
from binlake.globalbinlog.sorter import HEARTBEAT, TSO_XA, NodeSorter, Piece
from binlake.globalbinlog.spill import BodyOf, light_transactions
from binlake.globalbinlog.vtso import Vtso
from binlake.statements import XaId
from binlake.txn import Transaction


class MergeOrderError(BinlogError):
    """The merged stream would go back in vtso order, or one vtso mixes transactions: a bug or input
    that breaks the TSO assumptions (global-binlog.md §1, caveat)."""


class UnalignedStartError(BinlogError):
    """The nodes' inputs do not begin at one point in time and no aligned start can be found: a
    distributed transaction could come out with only some of its branches (issue #17 item 3)."""


TSO_MEMORY = 100_000  # TSO transactions remembered for the uniqueness checks


@dataclass
class GlobalTxn:
    vtso: Vtso
    kind: str
    cts: int | None
    txn_id: int | None
    pieces: list[Piece]

    @property
    def events(self) -> list:
        return [e for p in self.pieces for e in p.events]


@dataclass
class GlobalMerger:
    """Feed node transactions with ``feed(node_index, txn)``; ``emit()`` yields what is final."""

    sorters: list[NodeSorter]
    heap: list[tuple[Vtso, str, str, int, Piece]] = field(default_factory=list)
    last: Vtso = ""
    # the commit TSOs of the latest TSO transactions -> their transaction id: a TSO names ONE
    # transaction, and one transaction has ONE commit TSO on every node (global-binlog.md §5.7.6)
    recent_tsos: dict[int, int | None] = field(default_factory=dict)
    recent_txns: dict[int, int] = field(default_factory=dict)
    dropped: int = 0  # pieces at or below the aligned start, left out
    first_out: Vtso = ""  # the first vtso emitted
    _n: int = 0

    @classmethod
    def for_nodes(cls, names: list[str], from_start: list[bool] | None = None) -> GlobalMerger:
        """``from_start[i]``: node i's input begins at its first binlog (nothing of it is missing)."""
        starts = from_start or [True] * len(names)
        return cls(
            [NodeSorter(n, f"{i + 1:06d}", complete_from_start=starts[i]) for i, n in enumerate(names)]
        )

    def feed(self, node: int, t: Transaction) -> None:
        self.sorters[node].feed(t)

    def finish(self, node: int) -> None:
        self.sorters[node].finish()

    def resolve(self, node: int, xid: XaId, commit: bool, cts: int | None = None) -> None:
        """Settle a branch left prepared (see ``NodeSorter.resolve``)."""
        self.sorters[node].resolve(xid, commit, cts)

    @property
    def watermark(self) -> Vtso:
        return min(s.watermark for s in self.sorters)

    def emit(self) -> Iterator[GlobalTxn]:
        for s in self.sorters:
            for p in s.drain():
                self._n += 1
                entry = (p.vtso or "", p.node_seq, p.branch, self._n, p)
                leave_out(entry)  # as the piece (``NodeSorter._piece``)
                heapq.heappush(self.heap, entry)
        floor = self.start_floor()
        if floor is None:
            return
        limit = self.watermark
        while self.heap and self.heap[0][0] <= limit:
            vtso = self.heap[0][0]
            pieces = []
            while self.heap and self.heap[0][0] == vtso:
                pieces.append(heapq.heappop(self.heap)[4])
            if vtso <= floor:  # may lack its branch on a node whose input begins later
                self.dropped += len(pieces)
                continue
            self.first_out = self.first_out or vtso
            yield self.merged(vtso, pieces)

    def start_floor(self) -> Vtso | None:
        """The aligned start (global-binlog.md §2.11): the largest vtso any node may lack a branch of
        because its input begins after that commit; nothing at or below it comes out. None: not
        known yet (a node whose input begins late has shown no TSO commit to align on); an error
        when it never will be and there is something to write."""
        if len(self.sorters) < 2:  # one node: every piece it has is all the input holds
            return ""
        late = [s.name for s in self.sorters if not s.aligned]
        if late and self.heap and any(s.finished for s in self.sorters if not s.aligned):
            raise UnalignedStartError(
                f"node(s) {', '.join(late)} do not start at their first binlog and hold no distributed "
                "transaction prepared in their input to align the start on (nothing can be written safely): give every node's binlogs "
                "from one point in time (e.g. from each node's first file)"
            )
        if late:
            return None
        floor = max(s.floor for s in self.sorters)
        if self.first_out and floor >= self.first_out:
            raise UnalignedStartError(
                f"a node committed a transaction prepared before its input begins (vtso {floor}) after "
                f"later ones were written (from {self.first_out}): its other branches came out alone; "
                "start every node's input from one point in time"
            )
        return floor

    def merged(self, vtso: Vtso, pieces: list[Piece]) -> GlobalTxn:
        """The pieces sharing ``vtso`` as one transaction, checked: vtsos only go up, and only the
        branches of one TSO transaction share one."""
        if vtso <= self.last:
            raise MergeOrderError(f"vtso {vtso} after {self.last}: the merged stream would go back")
        self.last = vtso
        first = pieces[0]
        if len(pieces) > 1 and (
            any(p.kind not in (TSO_XA, HEARTBEAT) for p in pieces) or len({p.txn_id for p in pieces}) > 1
        ):
            raise MergeOrderError(
                f"vtso {vtso} is shared by different transactions: {[p.key for p in pieces]}"
            )
        # a heartbeat only when no branch holds anything else: one node's branch may touch only the
        # heartbeat table while another's holds user rows
        kind = first.kind
        if kind == HEARTBEAT and any(p.kind != HEARTBEAT for p in pieces):
            kind = TSO_XA
        if first.cts is not None:
            self._check_tso(first.cts, first.txn_id, pieces)
        return GlobalTxn(vtso, kind, first.cts, first.txn_id, pieces)

    def _check_tso(self, cts: int, txn_id: int | None, pieces: list[Piece]) -> None:
        """Fail on a commit TSO given to two transactions (their order would be the transaction
        ids', not the commits') or on one transaction's branches with different commit TSOs (they
        would come out as two transactions). Remembers the last ``TSO_MEMORY`` TSO transactions."""
        where = ", ".join(f"{p.node} {p.key}" for p in pieces)
        other = self.recent_tsos.get(cts, txn_id)
        if other != txn_id:
            raise MergeOrderError(
                f"commit TSO {cts} is given to two transactions ({other} and {txn_id}, at {where}): "
                "TSOs must be unique"
            )
        if txn_id is not None and self.recent_txns.get(txn_id, cts) != cts:
            raise MergeOrderError(
                f"transaction {txn_id} committed with two commit TSOs ({self.recent_txns[txn_id]} and "
                f"{cts}, at {where}): its branches disagree"
            )
        self.recent_tsos[cts] = txn_id
        if txn_id is not None:
            self.recent_txns[txn_id] = cts
        for memory in (self.recent_tsos, self.recent_txns):
            while len(memory) > TSO_MEMORY:
                del memory[next(iter(memory))]

    @property
    def pending(self) -> list[Piece]:
        """Prepared branches never resolved (they hold their node's watermark back)."""
        return [p for s in self.sorters for p in s.pending.values()]

    @property
    def held_back(self) -> int:
        """Committed pieces not emitted yet: a node's watermark does not vouch for them."""
        return len(self.heap) + sum(len(s.ready) for s in self.sorters)


def starts_at_first_binlog(files: list[Path]) -> bool:
    """Whether a node's files begin with its first binlog (numbered 1: a server starts there, after
    RESET MASTER too); a purged or missing first file, or an unnumbered fragment, does not."""
    suffix = files[0].name.rsplit(".", 1)[-1] if files else ""
    return suffix.isdigit() and int(suffix) == 1


def merge_nodes(
    nodes: list[list[Path]],
    names: list[str] | None = None,
    chunk: int = 0,
    final: bool = True,
    require_fde: bool = True,
    view: View | None = None,
    spill: bool = False,
) -> tuple[list[GlobalTxn], GlobalMerger]:
    """Merge whole node series (a batch run). ``chunk`` > 0 feeds the nodes round-robin, ``chunk``
    transactions at a time, emitting as it goes (what a streaming run does); the result is the same.
    ``final=False``: the files may still grow (a live run): a node's end is not the end of its
    input, so what its watermark cannot yet vouch for stays back. ``require_fde=False``: node files
    may be fragments without a format description event (read as v4). ``view``: what the merged
    stream goes through before it comes out (``logical.LogicalView``: logical names, one DDL per
    logical change). ``spill``: pieces keep where their rows are, not the rows (``spill.py``)."""
    run = IncrementalMerge.start(nodes, names, require_fde=require_fde, view=view, spill=spill)
    out: list[GlobalTxn] = []
    while True:
        out += run.step(chunk or sys.maxsize, final=final)
        if all(run.ended):
            return out, run.merger


View = Callable[[Iterable[GlobalTxn]], Iterator[GlobalTxn]]


@dataclass
class IncrementalMerge:
    """A merge that runs in steps and can stop and resume: ``checkpoint()`` is everything needed to
    continue (the merger's state and where each node's reading stopped), ``restore`` continues from
    it. Emissions are final: concatenated over any steps and restarts they equal a batch run."""

    nodes: list[list[Path]]
    merger: GlobalMerger
    positions: list[tuple[int, int] | None]
    # open readers, kept between steps (not part of a checkpoint: a restored run reopens them at
    # ``positions``); ``ended``: which nodes' input ran out in the last step
    _streams: list[Iterator[Transaction] | None] = field(default_factory=list, repr=False)
    ended: list[bool] = field(default_factory=list)
    require_fde: bool = True
    view: View | None = None  # part of the checkpoint (it may hold state: the DDL groups)
    # held-back pieces keep where their body is, not its events (``spill``): bounded memory, small
    # checkpoints
    spill: bool = False

    def __post_init__(self) -> None:
        self._streams = [None] * len(self.nodes)
        self.ended = [False] * len(self.nodes)

    @classmethod
    def start(
        cls,
        nodes: list[list[Path]],
        names: list[str] | None = None,
        require_fde: bool = True,
        view: View | None = None,
        spill: bool = False,
    ) -> IncrementalMerge:
        names = names or [f"dn{i}" for i in range(len(nodes))]
        merger = GlobalMerger.for_nodes(names, [starts_at_first_binlog(files) for files in nodes])
        if spill:
            for s in merger.sorters:
                s.body_of = BodyOf(require_fde)
        return cls(nodes, merger, [None] * len(nodes), require_fde=require_fde, view=view, spill=spill)

    def step(self, per_node: int, final: bool = False) -> list[GlobalTxn]:
        """Read up to ``per_node`` more transactions of every node; what is final now."""
        read = light_transactions if self.spill else node_transactions
        for i, files in enumerate(self.nodes):
            stream = self._streams[i] or read(files, require_fde=self.require_fde, start=self.positions[i])
            self._streams[i], self.ended[i] = stream, False
            n = 0
            for t in stream:
                self.merger.feed(i, t)
                self.positions[i] = (t.file_seq, t.end)
                n += 1
                if n >= per_node:
                    break
            else:  # reopened at the next step: the node may have written more by then
                self._streams[i], self.ended[i] = None, True
                if final:
                    self.merger.finish(i)
        out = self.merger.emit()
        return list(self.view(out) if self.view else out)

    def checkpoint(self) -> bytes:
        import pickle

        return pickle.dumps((self.merger, self.positions, self.view, self.require_fde, self.spill))

    @classmethod
    def restore(cls, nodes: list[list[Path]], checkpoint: bytes) -> IncrementalMerge:
        import pickle

        merger, positions, view, require_fde, spill = pickle.loads(checkpoint)
        return cls(nodes, merger, positions, require_fde=require_fde, view=view, spill=spill)


def node_names(nodes: Sequence[str]) -> list[str]:
    """A node's name: its directory's, or its file's when a node is one file (a fragment)."""
    return [Path(d).name or Path(d).resolve().name for d in nodes]
