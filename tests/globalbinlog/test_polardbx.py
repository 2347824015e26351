"""The real PolarDB-X / AliSQL data-node files of the corpus: XA branches and TSOs extracted."""

from __future__ import annotations

from pathlib import Path

from binlake.globalbinlog.merge import node_transactions
from binlake.globalbinlog.sorter import NodeSorter
from binlake.globalbinlog.vtso import make
from binlake.statements import XaId


def test_alisql_one_phase_xa_with_snapshot_and_commit_sequence(corpus: Path) -> None:
    """AliSQL X-Cluster 5.7 (polardbx-cdc-task): XA START, a DRDS trace, Sequence SNAPSHOT, rows,
    XA END, Sequence COMMIT, XA PREPARE flagged one-phase (XA COMMIT … ONE PHASE), then the file is
    cut inside the next event: one branch, committed there. A one-phase commit is local to its node
    (#17 item 1): its sequence is kept, its place is a virtual TSO after the node's last TSO commit."""
    path = corpus / "polardb-polardbx-cdc/polardbx-cdc-task/mysql_bin.1"
    txns = list(node_transactions([path]))  # the torn tail waits; the transaction before it is complete
    assert [t.kind for t in txns] == ["xa_prepare"]
    s = NodeSorter("dn", "000001")
    s.feed(txns[0])
    s.finish()
    (p,) = s.drain()
    assert p.xid == XaId(1, b"drds-1881c1536f401000@9d11c57d194702f4", b"D1_P00000_GROUP@0000")
    assert p.txn_id == 0x1881C1536F401000 and p.branch == "D1_P00000_GROUP@0000"
    assert (p.snapshot, p.prepared_cts, p.cts) == (7234839877466980416, 7234839881111830594, None)
    assert p.kind == "ONE_PHASE" and p.vtso == make(0, 0, 1, "000001")
    assert [type(e.body).__name__ for e in p.events] == ["RowsQuery", "TableMap", "TableMap", "Rows"]
    assert p.rows[0].table.table == "t_jg_tag_ynub"


def test_polardbx_gcn_events_without_commit_flag(corpus: Path) -> None:
    """PolarDB-X 8.0 (polardbx-cdc-canal, a fragment without FORMAT_DESCRIPTION): each transaction is
    preceded by a GCN event whose flag (1) carries no commit TSO: local DDL with a snapshot GCN."""
    path = corpus / "polardb-polardbx-cdc/polardbx-cdc-canal/mysql_bin.19_1"
    txns = list(node_transactions([path], require_fde=False))
    assert txns and all(t.kind == "ddl" for t in txns)
    s = NodeSorter("dn", "000001")
    for t in txns:
        s.feed(t)
    s.finish()
    pieces = s.drain()
    assert len(pieces) == len(txns) - 1 or len(pieces) == len(txns)
    assert all(p.kind == "DDL" and p.cts is None for p in pieces)
    assert {p.snapshot for p in pieces[1:]} == {7223944869700436032}
    assert [p.vtso for p in pieces] == sorted(p.vtso for p in pieces)
