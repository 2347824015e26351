"""Issue #17 item 3: the nodes' inputs do not begin at one point in time (a node's first binlog is
missing or purged). The merge starts from an aligned point — nothing a late node may lack a branch
of comes out (global-binlog.md §2.11) — or fails with one line; never half a distributed
transaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.globalbinlog.merge import GlobalTxn, UnalignedStartError, merge_nodes
from binlake.globalbinlog.sorter import NO_TSO_XA
from binlake.shardsim import ScriptedCluster, simulate


def _whole(g: GlobalTxn) -> bool:
    """Every simulated transaction moves money between accounts: its row changes sum to zero (an XA
    transaction without a TSO is never merged: its branches come out one by one, by design)."""
    return (
        g.kind == NO_TSO_XA
        or sum(after[1] - before[1] for p in g.pieces for r in p.rows for before, after in r.rows) == 0
    )


def _shape(out: list[GlobalTxn]) -> list[tuple[str, list[Any]]]:
    return [(g.vtso, [(p.node, p.xid, p.local_xid, [r.rows for r in p.rows]) for p in g.pieces]) for g in out]


@pytest.mark.parametrize("late", [[1], [0, 2]])
def test_a_node_missing_its_first_file_starts_at_the_aligned_point(tmp_path: Path, late: list[int]) -> None:
    res = simulate(tmp_path, seed=3, transactions=400, nodes=3, pending_at_end=0, max_file_size=20_000)
    full, _ = merge_nodes(res.node_files)
    assert all(_whole(g) for g in full)
    nodes = [files[1:] if i in late else files for i, files in enumerate(res.node_files)]
    out, merger = merge_nodes(nodes)
    floor = merger.start_floor()
    assert floor and merger.dropped > 0
    assert all(_whole(g) for g in out)  # before: the late node's branches missing, half transfers out
    # exactly what one run over every file has after the aligned start: nothing complete is lost
    assert _shape(out) == _shape([g for g in full if g.vtso > floor])
    # fed a transaction at a time (a live merge), the same or a clear error, never half a transfer
    try:
        live, _ = merge_nodes(nodes, chunk=1)
    except UnalignedStartError as e:
        assert "prepared before its input begins" in str(e)
    else:
        assert _shape(live) == _shape(out)


def test_the_cli_says_where_the_merge_starts(tmp_path: Path, capsys: Any) -> None:
    import shutil

    from binlake.cli import main

    res = simulate(
        tmp_path / "sim", seed=3, transactions=200, nodes=2, pending_at_end=0, max_file_size=20_000
    )
    dirs = []
    for i, files in enumerate(res.node_files):
        d = tmp_path / f"dn{i}"
        d.mkdir()
        for f in files[1:] if i == 1 else files:
            shutil.copy(f, d / f.name)
        dirs += ["--node", str(d)]
    assert main(["merge", "--final", *dirs, "-o", str(tmp_path / "g")]) == 0
    err = capsys.readouterr().err
    assert "aligned start: dn1 does not begin at its first binlog" in err


def test_a_late_node_with_nothing_to_align_on_fails(tmp_path: Path) -> None:
    """dn1's input begins after its first file (which holds T's branch) and holds only a local
    transaction: no TSO commit bounds what it committed before, so nothing can be written safely
    (before: T's branch on dn0 came out alone, half a transfer)."""
    c = ScriptedCluster(tmp_path)
    t = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    c.two_phase_commit(t)
    c.rotate(1)
    c.local(c.txn("LOCAL", [(1, "G1", {3: -1, 4: 1})]))
    res = c.finish()
    late = [res.node_files[0], res.node_files[1][1:]]
    with pytest.raises(UnalignedStartError, match="dn1 do not start at their first binlog"):
        merge_nodes(late, ["dn0", "dn1"])
    out, _ = merge_nodes(res.node_files)  # with every file: whole
    assert len(out) == 2 and all(_whole(g) for g in out)


def test_a_branch_prepared_before_the_input_is_cut_with_what_precedes_it(tmp_path: Path) -> None:
    """dn1's input begins between T_a's prepare and its commit, and T_b (prepared and committed in
    the input) has the smaller commit TSO: the aligned start is T_a's vtso, so neither comes out
    (T_b before T_a); a live merge that wrote T_b before it read T_a's commit fails."""
    c = ScriptedCluster(tmp_path)
    a = c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})])
    b = c.txn("GLOBAL_TSO", [(0, "G0", {3: -7}), (1, "G0", {4: 7})])
    for dn in (0, 1):
        c.prepare(a, dn)
    c.rotate(1)
    for dn in (0, 1):
        c.prepare(b, dn)
    c.fetch_cts(b)
    c.fetch_cts(a)
    for dn in (0, 1):
        c.commit(b, dn)
    c.commit(a, 0)
    for i in range(3):
        c.local(c.txn("LOCAL", [(1, "G1", {10 + i: -1, 20 + i: 1})]))
    c.commit(a, 1)
    after = c.txn("GLOBAL_TSO", [(0, "G0", {1: -1}), (1, "G0", {2: 1})])
    c.two_phase_commit(after)
    res = c.finish()
    late = [res.node_files[0], res.node_files[1][1:]]
    out, merger = merge_nodes(late)
    assert [g.txn_id for g in out] == [after.txid] and all(_whole(g) for g in out)
    assert merger.dropped == 1 + 2 + 3  # T_a on dn0 (on dn1 an orphan), T_b on both, the locals (dn1)
    with pytest.raises(UnalignedStartError, match="prepared before its input begins"):
        merge_nodes(late, chunk=1)
