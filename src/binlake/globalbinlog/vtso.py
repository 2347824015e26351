"""Virtual TSOs: one total order for every committed transaction of every node.

A vtso is 54 digits, compared as text: commit TSO (19) | transaction id (19) | sequence (10) | node (6).
A distributed transaction's pieces share ``(cts, txn id, 0, 000000)``; a transaction without a TSO
(local, one-phase, XA without TSO) takes the running maximum (TSO, txn id) of its node — the last
TSO commit before it in that node's binlog — with the next sequence number and its own node id, so it
sorts right after that commit and before the next one (seed 002, global-binlog.md §2.6).
"""

from __future__ import annotations

from dataclasses import dataclass

Vtso = str
WIDTHS = (19, 19, 10, 6)
TSO_NODE = "000000"


def make(tso: int, txn_id: int, seq: int, node: str) -> Vtso:
    return f"{tso:019d}{txn_id:019d}{seq:010d}{node:>06}"


def parse(v: Vtso) -> tuple[int, int, int, str]:
    a, b, c = WIDTHS[0], WIDTHS[0] + WIDTHS[1], WIDTHS[0] + WIDTHS[1] + WIDTHS[2]
    return int(v[:a]), int(v[a:b]), int(v[b:c]), v[c:]


@dataclass
class Segment:
    """The running maximum (TSO, txn id) of a node, and the sequence within it."""

    tso: int = 0
    txn_id: int = 0
    seq: int = 0

    def raise_to(self, tso: int, txn_id: int) -> None:
        if (tso, txn_id) > (self.tso, self.txn_id):
            self.tso, self.txn_id, self.seq = tso, txn_id, 0

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq
