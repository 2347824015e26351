"""The sharded-workload simulator: per-node binlogs that binlake decodes back to the simulator's
truth — XA groups, commit TSOs on every carrier, holes, conservation of the transferred total."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.series import BinlogSeries
from binlake.shardsim import simulate
from binlake.txn import iter_transactions

XID = re.compile(r"XA (?:START|COMMIT|ROLLBACK) X'([0-9a-f]*)',X'([0-9a-f]*)',1")


def node_view(files: list[Path]) -> dict:
    """Per node: prepared rows by xid, commit TSOs and rollbacks in binlog order, local commits."""
    prepared, commits, rollbacks, locals_, order = {}, [], [], [], []
    for t in iter_transactions(BinlogSeries.open(*files).events()):
        rows = [(b[0], b[1], a[1]) for e in t.events if isinstance(e.body, Rows) for b, a in e.body.rows]
        queries = [e.body for e in t.events if isinstance(e.body, Query)]
        tso = None
        for e in t.events:
            if isinstance(e.body, PolarxSequence) and e.body.is_commit:
                tso = e.body.sequence
            elif isinstance(e.body, PolarxGcn) and e.body.has_commit_tso:
                tso = e.body.gcn
        for q in queries:
            tso = q.status.get("lizard_commit_gcn", tso)
        m = XID.search(queries[0].query) if queries else None
        xid = (bytes.fromhex(m.group(1)), bytes.fromhex(m.group(2))) if m else None
        if t.kind == "xa_prepare":
            prepared[xid] = rows
            order.append(("P", xid))
        elif t.kind == "xa_commit":
            commits.append((xid, tso))
            order.append(("C", xid))
        elif t.kind == "xa_rollback":
            rollbacks.append(xid)
        else:
            locals_.append(rows)
    return {
        "prepared": prepared,
        "commits": commits,
        "rollbacks": rollbacks,
        "locals": locals_,
        "order": order,
    }


@pytest.mark.parametrize("carrier", ["sequence80", "gcn105", "qstatus200"])
def test_nodes_decode_to_the_truth(tmp_path: Path, carrier: str) -> None:
    r = simulate(tmp_path, seed=5, transactions=250, nodes=3, carrier=carrier, max_file_size=20_000)
    views = [node_view(files) for files in r.node_files]
    assert all(len(files) >= 2 for files in r.node_files)  # rotation across files
    balances: dict[int, int] = {}
    for t in r.transactions:
        for br in t.branches:
            v = views[br.dn]
            key = (t.gtrid, br.group.encode())
            if t.kind in ("LOCAL",):
                assert [c for c in br.changes] in v["locals"]
            elif t.kind == "ONE_PHASE":
                assert v["prepared"][key] == br.changes
            elif t.outcome == "committed":
                assert v["prepared"][key] == br.changes
                tso = dict(v["commits"])[key]
                assert tso == (t.cts if t.kind in ("GLOBAL_TSO", "SINGLE_DN_TSO", "HEARTBEAT") else None)
            elif t.outcome == "rolled_back":  # a branch that never prepared leaves no trace at all
                assert (key in v["rollbacks"]) == bool(br.prepared_at) and (key in v["prepared"]) == bool(
                    br.prepared_at
                )
            else:  # pending: prepared, never resolved
                assert key in v["prepared"] and key not in dict(v["commits"])
        if t.outcome == "committed" and t.kind != "HEARTBEAT":
            for br in t.branches:
                for acc, _, after in br.changes:
                    balances[acc] = after
    assert sum(balances.values()) + 1000 * (60 - len(balances)) == r.total
    holes = 0
    for v in views:
        p = [x for k, x in v["order"] if k == "P"]
        c = [x for k, x in v["order"] if k == "C" and x in p]
        holes += sum(1 for i in range(len(c) - 1) if p.index(c[i]) > p.index(c[i + 1]))
    assert holes > 0, "no prepare/commit crossings: no transaction holes"
    kinds = collections.Counter(t.kind for t in r.transactions)
    assert {"GLOBAL_TSO", "LOCAL", "ONE_PHASE", "ROLLBACK", "HEARTBEAT", "PENDING"} <= set(kinds)


def test_idle_node_sees_only_heartbeats(tmp_path: Path) -> None:
    r = simulate(tmp_path, seed=2, transactions=80, nodes=3, idle_nodes=(2,), heartbeat_every=10)
    idle = node_view(r.node_files[2])
    assert idle["prepared"] and all(g == b"HB" for (_, g) in idle["prepared"])
    quiet = simulate(tmp_path / "q", seed=2, transactions=80, nodes=3, idle_nodes=(2,), heartbeat_every=0)
    assert not node_view(quiet.node_files[2])["prepared"]


def test_deterministic(tmp_path: Path) -> None:
    a = simulate(tmp_path / "a", seed=9, transactions=60)
    b = simulate(tmp_path / "b", seed=9, transactions=60)
    assert [[f.read_bytes() for f in fs] for fs in a.node_files] == [
        [f.read_bytes() for f in fs] for fs in b.node_files
    ]
