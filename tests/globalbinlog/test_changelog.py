"""The merged stream as row changes: the core model with the virtual TSO as order key."""

from __future__ import annotations

from pathlib import Path

from binlake.changes import Op, OrderKey
from binlake.globalbinlog import vtso
from binlake.globalbinlog.changelog import GLOBAL_FILE, global_row_changes
from binlake.globalbinlog.merge import merge_nodes
from binlake.schema import SchemaHistory
from binlake.shardsim import simulate


def test_global_row_changes_follow_the_merged_order(tmp_path: Path) -> None:
    res = simulate(tmp_path, seed=5, transactions=120, nodes=3, pending_at_end=0)
    merged, _ = merge_nodes(res.node_files)
    ddl = "CREATE TABLE db.acct (id BIGINT PRIMARY KEY, bal BIGINT)"
    changes = list(global_row_changes(merged, schema=SchemaHistory.from_ddl_script(ddl)))
    assert changes and {c.op for c in changes} <= {Op.INSERT, Op.UPDATE, Op.DELETE}
    keys = [c.order_key for c in changes]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [k.encode() for k in keys] == sorted(k.encode() for k in keys)
    by_vtso = {g.vtso: n for n, g in enumerate(merged, start=1)}
    for c in changes:
        assert c.origin.gtid is not None
        assert OrderKey.of_vtso(*vtso.parse(c.origin.gtid), c.order_key.event, c.order_key.row) == c.order_key
        assert c.origin.txn_position == by_vtso[c.origin.gtid]
        assert c.file == GLOBAL_FILE and c.key is not None and c.layout is not None
        assert [col.name for col in c.layout] == ["id", "bal"]
