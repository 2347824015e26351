"""The hand-written scenario catalog of global-binlog.md §5.5: exact event orders per node."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.globalbinlog.merge import IncrementalMerge, merge_nodes
from binlake.globalbinlog.sorter import LOCAL, NO_TSO_XA, ONE_PHASE, TSO_XA
from binlake.shardsim import ScriptedCluster, SimTxn
from tests.globalbinlog.test_merge import check_invariants

# the order of T1's and T2's prepare (P) and commit (C) on every node
SHAPES = ["P1 C1 P2 C2", "P2 C2 P1 C1", "P1 P2 C1 C2", "P1 P2 C2 C1", "P2 P1 C1 C2", "P2 P1 C2 C1"]


def order(out, t: SimTxn) -> int:  # type: ignore[no-untyped-def]
    return next(i for i, g in enumerate(out) if g.txn_id == t.txid or g.pieces[0].local_xid == t.txid)


@pytest.mark.parametrize("cts_first", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_two_global_transactions_every_interleaving(tmp_path: Path, shape: str, cts_first: int) -> None:
    """Scenario 1: both TSO orders wherever the protocol allows them (a CTS is fetched only after
    all of its transaction's prepares); without a hole the two conflict (same accounts)."""
    c = ScriptedCluster(tmp_path)
    hole = shape.split()[1][0] == "P"
    t = {
        1: c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})]),
        2: c.txn("GLOBAL_TSO", [(0, "G0", {1 if not hole else 3: -7}), (1, "G0", {2 if not hole else 4: 7})]),
    }
    fetched: set[int] = set()
    steps = shape.split()
    for i, step in enumerate(steps):
        n = int(step[1])
        if step[0] == "P":
            for dn in (0, 1):
                c.prepare(t[n], dn)
        else:
            # fetch CTSs once every prepare is in: in the chosen order when both are prepared
            prepared = {int(s[1]) for s in steps[:i] if s[0] == "P"}
            want = [cts_first, 3 - cts_first] if prepared == {1, 2} else [n]
            for m in want:
                if m not in fetched and m in prepared:
                    c.fetch_cts(t[m])
                    fetched.add(m)
            for dn in (0, 1):
                c.commit(t[n], dn)
    res = c.finish()
    out, merger = merge_nodes(res.node_files)
    assert not merger.pending
    check_invariants(res, out)
    assert [g.txn_id for g in out] == sorted(
        (t[1].txid, t[2].txid), key=lambda x: next(s.cts for s in res.transactions if s.txid == x)
    )


@pytest.mark.parametrize("where", ["before", "inside", "after"])
def test_local_transaction_around_a_hole(tmp_path: Path, where: str) -> None:
    """Scenario 2 (I6): a local transaction L on DN0 before P1, inside P1..C1, or after C1: after
    every TSO unit committed before it on DN0, before every TSO unit prepared after its commit."""
    c = ScriptedCluster(tmp_path)
    t0 = c.txn("GLOBAL_TSO", [(0, "G0", {5: -1}), (1, "G0", {6: 1})])
    c.two_phase_commit(t0)
    t1 = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    local = c.txn("LOCAL", [(0, "G1", {3: -2, 7: 2})])
    if where == "before":
        c.local(local)
    c.prepare(t1, 0)
    if where == "inside":
        c.local(local)
    c.prepare(t1, 1)
    c.fetch_cts(t1)
    c.commit(t1, 0)
    c.commit(t1, 1)
    if where == "after":
        c.local(local)
    t2 = c.txn("GLOBAL_TSO", [(0, "G0", {1: -1}), (1, "G0", {2: 1})])
    c.two_phase_commit(t2)
    res = c.finish()
    out, _ = merge_nodes(res.node_files)
    check_invariants(res, out)
    assert order(out, t0) < order(out, local) < order(out, t2)
    if where == "after":
        assert order(out, t1) < order(out, local)


def test_rollback_and_one_phase_inside_holes_and_split_no_tso_xa(tmp_path: Path) -> None:
    """Scenarios 3 and 4: P1 P2 R2 C1; a rollback on one node while the other's branch is still
    prepared; a one-phase commit inside a hole; an XA without TSO over two nodes comes out as two
    unmerged units."""
    c = ScriptedCluster(tmp_path)
    t1 = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    t2 = c.txn("ROLLBACK", [(0, "G0", {3: -5}), (1, "G0", {4: 5})])
    one = c.txn("ONE_PHASE", [(0, "G1", {5: -3, 7: 3})])
    nox = c.txn("NO_TSO_XA", [(0, "G0", {9: -4}), (1, "G1", {10: 4})])
    c.prepare(t1, 0)
    c.prepare(t2, 0)
    c.prepare(t2, 1)
    c.rollback(t2, 0)
    c.one_phase(one)
    c.prepare(t1, 1)
    c.rollback(t2, 1)
    c.fetch_cts(t1)
    c.commit(t1, 0)
    c.commit(t1, 1)
    c.prepare(nox, 0)
    c.prepare(nox, 1)
    c.commit(nox, 1)
    c.commit(nox, 0)
    res = c.finish()
    out, _ = merge_nodes(res.node_files)
    check_invariants(res, out)
    kinds = [(g.kind, g.txn_id) for g in out]
    assert (TSO_XA, t1.txid) in kinds and not any(i == t2.txid for _, i in kinds)
    assert (ONE_PHASE, one.txid) in kinds
    assert kinds.count((NO_TSO_XA, nox.txid)) == 2


def test_several_branches_on_one_node_merge_into_one_transaction(tmp_path: Path) -> None:
    """Scenario 5: groups A, B and A@0001 on DN0 plus one branch on DN1: one unit of 4 pieces."""
    c = ScriptedCluster(tmp_path)
    t = c.txn(
        "GLOBAL_TSO",
        [(0, "A", {1: -3}), (0, "B", {3: -3}), (0, "A@0001", {5: -3}), (1, "G0", {2: 9})],
    )
    for dn, group in [(0, "A"), (1, "G0"), (0, "A@0001"), (0, "B")]:
        c.prepare(t, dn, group)
    c.fetch_cts(t)
    for dn, group in [(0, "B"), (1, "G0"), (0, "A"), (0, "A@0001")]:
        c.commit(t, dn, group)
    res = c.finish()
    out, _ = merge_nodes(res.node_files)
    check_invariants(res, out)
    (g,) = out
    assert sorted((p.node, p.branch) for p in g.pieces) == [
        ("dn0", "A"),
        ("dn0", "A@0001"),
        ("dn0", "B"),
        ("dn1", "G0"),
    ]


def busy_and_idle(tmp_path: Path, heartbeats: bool) -> tuple[ScriptedCluster, list[SimTxn]]:
    c = ScriptedCluster(tmp_path, nodes=3)
    done = []
    for i in range(6):
        t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -1}), (1, "G0", {2: 1})])
        c.two_phase_commit(t)
        done.append(t)
        if heartbeats and i % 2 == 1:
            done.append(c.heartbeat())
    return c, done


@pytest.mark.parametrize("heartbeats", [False, True])
def test_idle_node(tmp_path: Path, heartbeats: bool) -> None:
    """Scenario 6: DN2 writes nothing after its FDE. Batch: complete. Live without heartbeats: stalled;
    with heartbeats: everything up to the last heartbeat (I14)."""
    c, done = busy_and_idle(tmp_path, heartbeats)
    res = c.finish()
    batch, _ = merge_nodes(res.node_files)
    check_invariants(res, batch)
    live, merger = merge_nodes(res.node_files, chunk=1, final=False)
    if not heartbeats:
        assert live == []
        # an explicit watermark (the TSO service's current value) for the idle node lets it go on
        last = max(t.cts for t in done)
        merger.sorters[2].declare_quiet_until(last)
        assert [g.vtso for g in merger.emit()] == [g.vtso for g in batch]
    else:
        last_hb = max(t.cts for t in done if t.kind == "HEARTBEAT")
        assert [g.vtso for g in live] == [g.vtso for g in batch if g.cts is not None and g.cts <= last_hb]


def test_long_pending_prepare_stops_the_prefix(tmp_path: Path) -> None:
    """Scenario 7: a prepare on DN1 never resolved while DN0 and DN1 commit more: the output stops at
    what may precede it; the branch is reported as held back."""
    c = ScriptedCluster(tmp_path)
    first = c.txn("GLOBAL_TSO", [(0, "G0", {1: -1}), (1, "G0", {2: 1})])
    c.two_phase_commit(first)
    stuck = c.txn("GLOBAL_TSO", [(1, "G1", {20: -1}), (0, "G1", {21: 1})])
    c.prepare(stuck, 1)
    for _ in range(5):
        t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -1}), (1, "G0", {2: 1})])
        c.two_phase_commit(t)
    res = c.finish()
    out, merger = merge_nodes(res.node_files)
    assert [g.txn_id for g in out] == [first.txid]
    assert [(p.node, p.branch) for p in merger.pending] == [("dn1", "G1")]
    # the coordinator's log says it rolled back: everything else comes out, in order
    merger.resolve(1, merger.pending[0].xid, commit=False)
    rest = list(merger.emit())
    assert [g.txn_id for g in out + rest] == [t.txid for t in res.committed()]


def test_prepare_and_commit_files_apart_restart_between(tmp_path: Path) -> None:
    """Scenario 8: the prepare in binlog.000001, the commit in binlog.000003; a restart from a
    checkpoint taken between them gives the batch output (I13)."""
    c = ScriptedCluster(tmp_path)
    t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    for dn in (0, 1):
        c.prepare(t, dn)
    for _ in range(2):
        for dn in (0, 1):
            local = c.txn("LOCAL", [(dn, "G1", {30 + dn: -1, 40 + dn: 1})])
            c.local(local)
            c.rotate(dn)
    c.fetch_cts(t)
    for dn in (0, 1):
        c.commit(t, dn)
    res = c.finish()
    assert all(len(files) == 3 for files in res.node_files)
    batch, _ = merge_nodes(res.node_files)
    check_invariants(res, batch)
    for cut in range(1, 4):
        m = IncrementalMerge.start(res.node_files)
        got = m.step(cut)
        m = IncrementalMerge.restore(res.node_files, m.checkpoint())
        got += m.step(10**6, final=True)
        assert [g.vtso for g in got] == [g.vtso for g in batch]


def test_orphan_commit_is_reported_not_emitted(tmp_path: Path) -> None:
    """Scenario 9: reading starts after a prepare: its XA COMMIT is an orphan, reported."""
    c = ScriptedCluster(tmp_path)
    t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    for dn in (0, 1):
        c.prepare(t, dn)
        c.rotate(dn)
    c.fetch_cts(t)
    for dn in (0, 1):
        c.commit(t, dn)
    res = c.finish()
    out, merger = merge_nodes([files[1:] for files in res.node_files])
    assert out == []
    assert [len(s.orphans) for s in merger.sorters] == [1, 1]


def test_equal_prefix_ties_are_ordered_by_sequence_then_node(tmp_path: Path) -> None:
    """Scenario 10: both nodes' latest TSO transaction is the same, each followed by local ones:
    their vtsos share (tso, txn id) and order by (seq, node) — deterministically."""
    c = ScriptedCluster(tmp_path)
    t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    c.two_phase_commit(t)
    locals_ = []
    for i in range(2):
        for dn in (1, 0):
            lt = c.txn("LOCAL", [(dn, "G1", {10 + 2 * i + dn: -1, 20 + 2 * i + dn: 1})])
            c.local(lt)
            locals_.append(lt)
    res = c.finish()
    out, _ = merge_nodes(res.node_files)
    check_invariants(res, out)
    assert [(g.kind, g.pieces[0].node) for g in out[1:]] == [(LOCAL, "dn0"), (LOCAL, "dn1")] * 2


def history(c: ScriptedCluster) -> None:
    t1 = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    t2 = c.txn("GLOBAL_TSO", [(0, "G0", {3: -7}), (1, "G0", {4: 7})])
    c.prepare(t1, 0)
    c.prepare(t2, 0)
    c.prepare(t2, 1)
    c.prepare(t1, 1)
    c.fetch_cts(t2)
    c.fetch_cts(t1)
    c.commit(t1, 0)
    c.local(c.txn("LOCAL", [(1, "G1", {9: -1, 11: 1})]))
    c.commit(t2, 0)
    c.commit(t2, 1)
    c.commit(t1, 1)


def test_carriers_give_the_same_output(tmp_path: Path) -> None:
    """Scenario 11: one history written with Sequence-80, GCN-105 and status variable 200."""
    outs = []
    for carrier in ("sequence80", "gcn105", "qstatus200"):
        c = ScriptedCluster(tmp_path / carrier, carrier=carrier)
        history(c)
        res = c.finish()
        out, _ = merge_nodes(res.node_files)
        check_invariants(res, out)
        outs.append([(g.vtso, g.kind, [(p.node, p.branch) for p in g.pieces]) for g in out])
    assert outs[0] == outs[1] == outs[2]
    assert len(outs[0]) == 3
