"""The merged stream as row changes: the core model with the virtual TSO as order key."""

from __future__ import annotations

from pathlib import Path

from binlake.changes import Op, OrderKey
from binlake.globalbinlog import vtso
from binlake.globalbinlog.changelog import GLOBAL_FILE, global_row_changes
from binlake.globalbinlog.merge import merge_nodes
from binlake.schema import SchemaHistory
from binlake.shardsim import ScriptedCluster, simulate


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


def test_the_merged_stream_carries_ddl_name_changes_once_per_logical_change(tmp_path: Path) -> None:
    """A logical DDL run on every shard (2 nodes x 2 groups) reaches the change log once, with its
    logical names, where its first physical DDL was: a column rename between transfers and an added
    column with a default after them (what a sink fills the existing rows with)."""
    from binlake.globalbinlog.logical import LogicalNames, LogicalView

    c = ScriptedCluster(tmp_path / "nodes", nodes=2, shard_tables=True)
    transfer = [(0, "G0", {1: -5}), (1, "G1", {2: 5})]
    c.two_phase_commit(c.txn("GLOBAL_TSO", transfer))
    c.ddl("ALTER TABLE {table} RENAME COLUMN bal TO balance")
    c.two_phase_commit(c.txn("GLOBAL_TSO", transfer))
    c.ddl("ALTER TABLE {table} ADD COLUMN note VARCHAR(8) NOT NULL DEFAULT 'x'")
    res = c.finish()
    merged, _ = merge_nodes(res.node_files, view=LogicalView(LogicalNames(derive=True)))
    schema = SchemaHistory.from_ddl_script("CREATE TABLE db.acct (id BIGINT PRIMARY KEY, bal BIGINT)")
    changes = list(global_row_changes(merged, schema=schema))
    assert [c.op for c in changes] == [
        *[Op.UPDATE] * 2, Op.RENAME_COLUMN, *[Op.UPDATE] * 2, Op.ADD_COLUMN
    ]  # fmt: skip
    assert {(c.db, c.table, c.file) for c in changes} == {("db", "acct", GLOBAL_FILE)}
    keys = [c.order_key for c in changes]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    rename, add = changes[2], changes[5]
    assert (rename.before, rename.after) == (("bal",), ("balance",))
    assert add.layout is not None and [col.name for col in add.layout] == ["note"] and add.after == ("x",)
    # the rows after the rename carry the new name (the schema followed the logical DDL)
    assert [col.name for col in changes[3].layout or ()] == ["id", "balance"]


def test_without_logical_names_a_ddl_on_every_node_is_passed_over(tmp_path: Path) -> None:
    """Nodes whose tables have one name (no logical names to collapse their copies): each node's
    copy of an ALTER is in the merged stream, so replaying them would add the column once per node;
    with ``ddl=False`` (what a merged read without logical names passes) none is applied."""
    c = ScriptedCluster(tmp_path / "nodes", nodes=2)
    c.two_phase_commit(c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G1", {2: 5})]))
    c.ddl("ALTER TABLE {table} ADD COLUMN note VARCHAR(8) NOT NULL DEFAULT 'x'")
    res = c.finish()
    merged, _ = merge_nodes(res.node_files)
    ddl = "CREATE TABLE db.acct (id BIGINT PRIMARY KEY, bal BIGINT)"
    copies = list(global_row_changes(merged, schema=SchemaHistory.from_ddl_script(ddl)))
    assert [c.op for c in copies].count(Op.ADD_COLUMN) == 2  # the reason for the flag
    schema = SchemaHistory.from_ddl_script(ddl)
    changes = list(global_row_changes(merged, schema=schema, ddl=False))
    assert {c.op for c in changes} == {Op.UPDATE}
    table = schema.table("db", "acct")
    assert table is not None and [col.name for col in table.columns] == ["id", "bal"]
