"""The global merge against the shard simulator's truth: the invariants of global-binlog.md §5.4."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.globalbinlog.merge import GlobalTxn, IncrementalMerge, merge_nodes
from binlake.globalbinlog.sorter import HEARTBEAT, LOCAL, NO_TSO_XA, ONE_PHASE, TSO_XA
from binlake.globalbinlog.vtso import TSO_NODE, parse
from binlake.shardsim import SimResult, simulate

TSO_KINDS = {"GLOBAL_TSO": TSO_XA, "SINGLE_DN_TSO": TSO_XA, "HEARTBEAT": HEARTBEAT}
PER_BRANCH = {"NO_TSO_XA": NO_TSO_XA, "ONE_PHASE": ONE_PHASE, "LOCAL": LOCAL}


def units(out: list[GlobalTxn]) -> Counter[tuple[object, ...]]:
    """What came out, as (kind, transaction id, branches)."""
    got: Counter[tuple[object, ...]] = Counter()
    for g in out:
        ident = g.pieces[0].local_xid if g.kind == LOCAL else g.txn_id
        got[(g.kind, ident, frozenset((p.node, p.branch if g.kind != LOCAL else "") for p in g.pieces))] += 1
    return got


def expected_units(res: SimResult) -> Counter[tuple[object, ...]]:
    want: Counter[tuple[object, ...]] = Counter()
    for t in res.committed():
        if t.kind in TSO_KINDS:
            want[(TSO_KINDS[t.kind], t.txid, frozenset((f"dn{b.dn}", b.group) for b in t.branches))] += 1
        else:
            for b in t.branches:
                group = "" if t.kind == "LOCAL" else b.group
                want[(PER_BRANCH[t.kind], t.txid, frozenset({(f"dn{b.dn}", group)}))] += 1
    return want


def check_invariants(res: SimResult, out: list[GlobalTxn]) -> None:
    # I1 exactly once, I2 nothing rolled back or pending, I8 pieces complete
    assert units(out) == expected_units(res)
    # I3 strictly increasing vtso; I5 TSO units in CTS order, with the CTS the nodes wrote
    assert all(a.vtso < b.vtso for a, b in itertools.pairwise(out))
    cts = {t.txid: t.cts for t in res.committed()}
    tso_units = [g for g in out if g.kind in (TSO_XA, HEARTBEAT)]
    assert all(a.cts < b.cts for a, b in itertools.pairwise(tso_units))  # type: ignore[operator]
    assert all(g.cts == cts[g.txn_id] for g in tso_units)
    # I11 vtso form
    for g in out:
        tso, txn, seq, node = parse(g.vtso)
        if g.kind in (TSO_XA, HEARTBEAT):
            assert (tso, txn, seq, node) == (g.cts, g.txn_id, 0, TSO_NODE)
        else:
            assert seq >= 1 and node == g.pieces[0].node_seq
    # I6/I7: on every node, units come out in the order they committed there — TSO units relative to
    # each other by CTS (I5), every non-TSO unit after the TSO units committed before it on its node
    # and before those prepared after it (its vtso inherits the node's running maximum)
    per_node: dict[str, list[tuple[int, int]]] = {}
    for g in out:
        if g.kind not in (TSO_XA, HEARTBEAT):
            per_node.setdefault(g.pieces[0].node, []).append(g.pieces[0].commit_at)  # type: ignore[arg-type]
    assert all(pos == sorted(pos) for pos in per_node.values())
    for node in per_node:
        seen = [
            (p.commit_at, p.start, g.kind in (TSO_XA, HEARTBEAT))
            for g in out
            for p in g.pieces
            if p.node == node
        ]
        for i, (at, _, tso) in enumerate(seen):
            if tso:
                continue
            # after every TSO unit committed before it on this node …
            assert not [c for c, _, t in seen[i + 1 :] if t and c < at], (node, at)
            # … and before every TSO unit prepared after it committed
            assert not [s for _, s, t in seen[:i] if t and s > at], (node, at)
    # I10 prefix consistency: before each TSO unit exactly the TSO units of smaller CTS
    committed_tso = sorted(c for t in res.committed() if t.kind in TSO_KINDS for c in [t.cts])
    assert [g.cts for g in tso_units] == committed_tso[: len(tso_units)]
    # I8 only row events and their table maps (no XA control, GTID or TSO carrier events)
    assert all(isinstance(e.body, (Rows, TableMap)) for g in out for e in g.events)
    # I4 + I9: replay every unit in order: before-images match, the bank's total never changes
    # (transactions without a TSO are split into one unit per branch by design: the total holds
    # again once all their branches are in)
    balance = {a: 1000 for t in res.transactions for b in t.branches for a, _, _ in b.changes if a}
    total = sum(balance.values())
    branches_left = {t.txid: len(t.branches) for t in res.committed() if t.kind in PER_BRANCH}
    checked, half_in = 0, set()
    for g in out:
        for e in g.events:
            if isinstance(e.body, Rows) and e.body.table is not None and e.body.table.table == "acct":
                for before, after in e.body.rows:
                    assert balance[before[0]] == before[1], (g.vtso, before)
                    balance[after[0]] = after[1]
        ident = g.pieces[0].local_xid if g.kind == LOCAL else g.txn_id
        if g.kind in (NO_TSO_XA, ONE_PHASE, LOCAL):
            branches_left[ident] -= 1
            if branches_left[ident]:
                half_in.add(ident)
            else:
                half_in.discard(ident)
        if not half_in:
            assert sum(balance.values()) == total, g.vtso
            checked += 1
    assert checked and not half_in  # checked wherever no split transaction is half in, and at the end


CASES = [
    dict(seed=1, carrier="sequence80", nodes=3),
    dict(seed=2, carrier="gcn105", nodes=4, groups_per_node=3),
    dict(seed=3, carrier="qstatus200", nodes=2),
    dict(seed=4, carrier="sequence80", nodes=5, sessions=10),
    dict(seed=5, carrier="gcn105", nodes=3, heartbeat_every=0),
    dict(seed=6, carrier="sequence80", nodes=4, idle_nodes=(3,)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c['seed']}-{c['carrier']}-{c['nodes']}dn")
def test_invariants_hold(tmp_path: Path, case: dict) -> None:
    res = simulate(tmp_path, transactions=250, pending_at_end=0, **case)
    out, merger = merge_nodes(res.node_files)
    assert not merger.pending and not any(s.orphans for s in merger.sorters)
    check_invariants(res, out)
    # I13 incremental == batch, whatever the chunking; I12 deterministic
    for chunk in (1, 7):
        again, _ = merge_nodes(res.node_files, chunk=chunk)
        assert [(g.vtso, [p.key for p in g.pieces]) for g in again] == [
            (g.vtso, [p.key for p in g.pieces]) for g in out
        ]


def test_an_unresolved_prepare_holds_back_only_what_may_follow_it(tmp_path: Path) -> None:
    res = simulate(tmp_path, seed=7, transactions=250, pending_at_end=1)
    pending = [t for t in res.transactions if t.outcome == "pending"]
    assert pending
    out, merger = merge_nodes(res.node_files)
    held = {(p.node, p.branch) for p in merger.pending}
    assert held == {(f"dn{b.dn}", b.group) for t in pending for b in t.branches}
    assert not any(g.txn_id == pending[0].txid for g in out)  # I2
    assert set(units(out)) <= set(expected_units(res))  # only committed units, each once
    assert len(out) == len(set(g.vtso for g in out))
    # everything below the held-back watermark came out
    limit = merger.watermark
    later = sum(1 for s in merger.sorters for _ in s.ready) + len(merger.heap)
    assert later and all(g.vtso <= limit for g in out)


def test_heartbeats_let_a_live_merge_move_past_an_idle_node(tmp_path: Path) -> None:
    """I14: node 3 gets no data. With heartbeats a live (non-final) merge emits up to the last
    heartbeat; without them the idle node's watermark never moves and nothing can be emitted."""
    with_hb = simulate(tmp_path / "hb", seed=8, transactions=200, pending_at_end=0, nodes=4, idle_nodes=(3,))
    out, merger = merge_nodes(with_hb.node_files, chunk=5, final=False)
    last_hb = max(t.cts for t in with_hb.committed() if t.kind == "HEARTBEAT")
    assert out and out[-1].cts is not None
    assert max(g.cts for g in out if g.cts) == last_hb  # up to the last heartbeat, not beyond
    without = simulate(
        tmp_path / "no",
        seed=8,
        transactions=200,
        pending_at_end=0,
        nodes=4,
        idle_nodes=(3,),
        heartbeat_every=0,
    )
    out2, merger2 = merge_nodes(without.node_files, chunk=5, final=False)
    assert out2 == [] and merger2.watermark == ""
    done, _ = merge_nodes(without.node_files)  # once the input is final, everything comes out
    check_invariants(without, done)


@given(
    seed=st.integers(0, 10_000),
    nodes=st.integers(2, 5),
    carrier=st.sampled_from(["sequence80", "gcn105", "qstatus200"]),
    heartbeat_every=st.sampled_from([0, 7, 25]),
    weights=st.fixed_dictionaries(
        {k: st.floats(0.1, 5) for k in ("GLOBAL_TSO", "LOCAL", "NO_TSO_XA", "ONE_PHASE", "ROLLBACK")}
    ),
    chunk=st.integers(1, 9),
    restart_every=st.integers(1, 5),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_invariants_and_restarts(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    nodes: int,
    carrier: str,
    heartbeat_every: int,
    weights: dict[str, float],
    chunk: int,
    restart_every: int,
) -> None:
    """Random clusters: every invariant holds, and an incremental run restarted from checkpoints
    every few steps emits exactly the batch output (I13)."""
    tmp = tmp_path_factory.mktemp("prop")
    res = simulate(
        tmp, seed=seed, nodes=nodes, carrier=carrier, heartbeat_every=heartbeat_every, weights=weights,
        transactions=60, pending_at_end=0, max_file_size=6_000,
    )  # fmt: skip
    out, _ = merge_nodes(res.node_files)
    check_invariants(res, out)
    m = IncrementalMerge.start(res.node_files)
    got: list[GlobalTxn] = []
    for step in itertools.count(1):
        got += m.step(chunk)
        if step % restart_every == 0:
            m = IncrementalMerge.restore(res.node_files, m.checkpoint())
        if all(p is not None for p in m.positions) and step > 200:
            break
        if step > 400:
            break
    got += m.step(10**6, final=True)
    assert [g.vtso for g in got] == [g.vtso for g in out]
