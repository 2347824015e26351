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
    ddl = "CREATE TABLE db.acct (id BIGINT PRIMARY KEY, bal BIGINT)"  # the 5.7 nodes write no names
    batches = list(changelog_batches(global_row_changes(out, schema=SchemaHistory.from_ddl_script(ddl))))
    df = spark.createDataFrame(pa.Table.from_batches(batches))
    apply_changes(df, tmp_path / "delta", source="global")
    table = read_delta(tmp_path / "delta", "db.acct")
    assert table.column_names == ["id", "bal"]
    got = {r["id"]: r["bal"] for r in table.to_pylist()}
    touched = {a for t in res.committed() for b in t.branches for a, _, _ in b.changes if a}
    assert got == {a: res.balances[a] for a in touched}
    assert sum(got.values()) + 1000 * (len(res.balances) - len(touched)) == res.total
