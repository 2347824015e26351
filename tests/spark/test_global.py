"""The global merge on Spark equals the single-process merge, and the merged change log applied by
the pipeline gives one `acct` table equal to the simulator's final balances."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake.globalbinlog.changelog import global_row_changes
from binlake.globalbinlog.merge import merge_nodes
from binlake.globalbinlog.spark import merge_on_spark
from binlake.schema import SchemaHistory
from binlake.shardsim import simulate

pytestmark = pytest.mark.slow


def keys(out: list[Any]) -> list[tuple[str, list[Any]]]:
    return [(g.vtso, [(p.node, p.key) for p in g.pieces]) for g in out]


@pytest.mark.parametrize("pending", [0, 1])
def test_spark_merge_equals_the_single_process_merge(spark: Any, tmp_path: Path, pending: int) -> None:
    res = simulate(tmp_path, seed=21, transactions=200, nodes=4, pending_at_end=pending)
    local, merger = merge_nodes(res.node_files)
    assert bool(merger.pending) == bool(pending)
    assert keys(merge_on_spark(spark, res.node_files)) == keys(local)


def test_a_sharded_database_applied_into_one_table(spark: Any, tmp_path: Path) -> None:
    from binlake.spark.apply import apply_changes
    from binlake.spark.changelog import changelog_batches
    from binlake.spark.sinks.delta import read_delta

    res = simulate(tmp_path / "nodes", seed=22, transactions=300, nodes=3, pending_at_end=0)
    out, _ = merge_nodes(res.node_files)
    batches = list(changelog_batches(global_row_changes(out, schema=SchemaHistory.from_ddl_script(DDL))))
    df = spark.createDataFrame(pa.Table.from_batches(batches))
    apply_changes(df, tmp_path / "delta", source="global")
    table = read_delta(tmp_path / "delta", "db.acct")
    assert table.column_names == ["id", "bal"]
    balances(res, table)


DDL = "CREATE TABLE db.acct (id BIGINT PRIMARY KEY, bal BIGINT)"  # the 5.7 nodes write no names


def balances(res: Any, table: pa.Table) -> None:
    """``table`` holds every touched account at its final balance, and the bank total holds."""
    got = {r["id"]: r["bal"] for r in table.to_pylist()}
    touched = {a for t in res.committed() for b in t.branches for a, _, _ in b.changes if a}
    assert got == {a: res.balances[a] for a in touched}
    assert sum(got.values()) + 1000 * (len(res.balances) - len(touched)) == res.total


def test_node_binlogs_merged_on_the_fly_by_the_data_source(spark: Any, tmp_path: Path) -> None:
    """`format("binlog").option("nodes", "true")` reads the data nodes' binlogs as one merged change
    log with global order keys. Synced while the nodes had written only part of their files (what a
    node may still precede held back), then again over the grown files with `final`: the table
    equals the simulator's truth; a rerun is a no-op."""
    import shutil

    from binlake.spark.apply import apply_changes
    from binlake.spark.sinks.delta import read_delta

    res = simulate(
        tmp_path / "sim", seed=23, transactions=300, nodes=3, pending_at_end=0, max_file_size=15_000
    )
    assert all(len(files) >= 2 for files in res.node_files)
    (tmp_path / "ddl.sql").write_text(DDL + ";\n")
    dirs = [tmp_path / "nodes" / f"dn{i}" for i in range(len(res.node_files))]
    for d, files in zip(dirs, res.node_files, strict=True):
        d.mkdir(parents=True)
        shutil.copy(files[0], d)  # the first file only, for now
    nodes = ",".join(str(d) for d in dirs)

    def read(final: bool) -> Any:
        options = {"nodes": "true", "schema": str(tmp_path / "ddl.sql"), "final": str(final).lower()}
        return spark.read.format("binlog").options(**options).load(nodes)

    df = read(final=False)
    assert df.where("file != 'global'").count() == 0
    keys = [bytes(r["order_key"]) for r in df.select("order_key").collect()]
    assert len(keys) == len(set(keys)) and keys == sorted(keys)
    first = apply_changes(df, tmp_path / "delta", source=nodes)
    for d, files in zip(dirs, res.node_files, strict=True):
        for f in files[1:]:
            shutil.copy(f, d)
    rest = apply_changes(read(final=True), tmp_path / "delta", source=nodes)
    assert first.version < rest.version and rest.tables["db.acct"] > 0
    balances(res, read_delta(tmp_path / "delta", "db.acct"))
    again = apply_changes(read(final=True), tmp_path / "delta", source=nodes)
    assert again.skipped == ["db.acct"] and not again.tables


def test_sync_cli_reads_nodes_and_a_written_global_binlog_alike(spark: Any, tmp_path: Path) -> None:
    """`binlake sync --nodes DN0,DN1,DN2` (merged on the fly) and `binlake sync GLOBALDIR` (the
    directory `binlake merge` wrote) give the same table, equal to the truth."""
    from binlake.cli import main
    from binlake.spark.sinks.delta import read_delta

    res = simulate(tmp_path / "nodes", seed=24, transactions=150, nodes=2, pending_at_end=0)
    ddl = tmp_path / "ddl.sql"
    ddl.write_text(DDL + ";\n")
    dirs = [str(files[0].parent) for files in res.node_files]
    common = ["--schema", str(ddl), "--master", "local[2]"]
    to = f"delta:{tmp_path / 'a'}"
    assert main(["sync", ",".join(dirs), "--nodes", "--final", "--to", to, *common]) == 0
    nodes = [arg for d in dirs for arg in ("--node", d)]
    assert main(["merge", "--final", *nodes, "-o", str(tmp_path / "global")]) == 0
    assert main(["sync", str(tmp_path / "global"), "--to", f"delta:{tmp_path / 'b'}", *common]) == 0
    a, b = (read_delta(tmp_path / t, "db.acct").sort_by("id") for t in ("a", "b"))
    balances(res, a)
    assert a.equals(b)


def test_a_logical_ddl_of_the_merged_nodes_reaches_the_table(spark: Any, tmp_path: Path) -> None:
    """A merged read (physical shard tables, logical names derived) applies the logical DDL the
    shards ran: a column renamed between transfers, a column added with a default after them (its
    value filled into every row the table held): the table equals the truth."""
    from binlake.shardsim import ScriptedCluster
    from binlake.spark.apply import apply_changes
    from binlake.spark.sinks.delta import read_delta

    c = ScriptedCluster(tmp_path / "sim", nodes=2, shard_tables=True)
    c.two_phase_commit(c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G1", {2: 5})]))
    c.ddl("ALTER TABLE {table} RENAME COLUMN bal TO balance")
    c.two_phase_commit(c.txn("GLOBAL_TSO", [(0, "G0", {1: -7}), (1, "G1", {3: 7})]))
    c.ddl("ALTER TABLE {table} ADD COLUMN note VARCHAR(8) NOT NULL DEFAULT 'x'")
    res = c.finish()
    (tmp_path / "ddl.sql").write_text(DDL + ";\n")
    nodes = ",".join(str(files[0].parent) for files in res.node_files)
    options = {
        "nodes": "true",
        "final": "true",
        "schema": str(tmp_path / "ddl.sql"),
        "logicalNames": "polardbx",
    }
    report = apply_changes(
        spark.read.format("binlog").options(**options).load(nodes), tmp_path / "delta", source=nodes
    )
    assert report.filled and not report.warnings
    table = read_delta(tmp_path / "delta", "db.acct").sort_by("id")
    assert table.column_names == ["id", "balance", "note"]
    assert table.to_pylist() == [{"id": a, "balance": res.balances[a], "note": "x"} for a in (1, 2, 3)]
