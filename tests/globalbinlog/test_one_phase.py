"""Issue #17 item 1: a one-phase XA commit that carries its own commit sequence (AliSQL's
XA COMMIT ... ONE PHASE with a Sequence COMMIT) is ordered where it committed on its node — a virtual
TSO after the node's last TSO commit (global-binlog.md §2.5, seed 002) — not by that sequence: a later
conflicting distributed commit may carry a smaller one."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.globalbinlog.merge import IncrementalMerge, merge_nodes
from binlake.globalbinlog.sorter import ONE_PHASE, TSO_XA
from binlake.globalbinlog.vtso import parse
from binlake.shardsim import ScriptedCluster
from tests.globalbinlog.test_merge import check_invariants


@pytest.mark.parametrize("chunk", [0, 1])
def test_one_phase_with_a_large_sequence_before_a_later_conflicting_commit(
    tmp_path: Path, chunk: int
) -> None:
    c = ScriptedCluster(tmp_path)
    first = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    c.two_phase_commit(first)
    one = c.txn("ONE_PHASE", [(0, "G1", {1: -3, 3: 3})])
    c.one_phase(one, commit_seq=c.tso.peek() + (10**6 << 22))  # a sequence above what follows
    later = c.txn("GLOBAL_TSO", [(0, "G0", {1: -2}), (1, "G0", {2: 2})])  # writes account 1 again
    c.two_phase_commit(later)
    res = c.finish()
    out, merger = merge_nodes(res.node_files, chunk=chunk)
    check_invariants(res, out)  # before: `later` came out first, its before-image did not match
    kinds = [(g.kind, g.txn_id) for g in out]
    assert [k for k, _ in kinds] == [TSO_XA, ONE_PHASE, TSO_XA]
    (p,) = out[1].pieces
    assert p.cts is None and p.prepared_cts is not None and p.prepared_cts > later.cts  # type: ignore[operator]
    tso, txn, seq, node = parse(out[1].vtso)
    assert (tso, seq, node) == (first.cts, 1, "000001")  # right after `first` on dn0


def test_one_phase_sequence_does_not_break_a_live_merge(tmp_path: Path) -> None:
    """Fed step by step with restarts (a live merge): before, the one-phase sequence raised the node's
    bound and a later commit with a smaller TSO was a MergeOrderError."""
    c = ScriptedCluster(tmp_path)
    for i in range(4):
        one = c.txn("ONE_PHASE", [(0, "G1", {10 + i: -1, 20 + i: 1})])
        c.one_phase(one, commit_seq=c.tso.peek() + (10**6 << 22))
        t = c.txn("GLOBAL_TSO", [(0, "G0", {10 + i: -1}), (1, "G0", {30 + i: 1})])
        c.two_phase_commit(t)
    res = c.finish()
    batch, _ = merge_nodes(res.node_files)
    m = IncrementalMerge.start(res.node_files)
    got = []
    for _ in range(6):
        got += m.step(1)
        m = IncrementalMerge.restore(res.node_files, m.checkpoint())
    got += m.step(10**6, final=True)
    assert [g.vtso for g in got] == [g.vtso for g in batch] and len(batch) == 8
    check_invariants(res, batch)
