"""The Spark pipeline end to end against the generator's truth: the binlog data source, the change
log, the last change per key, the guarded MERGE into Delta tables; replays and crashes mid-run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.generate import generate
from binlake.spark import apply as apply_mod
from binlake.spark.apply import delta_tables, read_delta, sync_to_delta
from binlake.spark.typed import arrow_type, convert

pytestmark = pytest.mark.slow


def truth_tables(result: Any, target: Path) -> dict[str, list[dict]]:
    """The generator's final tables, typed the way the Delta tables are."""
    out = {}
    for name in delta_tables(target):
        cols = json.loads(read_columns(target, name))
        rows = [json.loads(line) for line in (result.truth_dir / f"{name}.jsonl").read_text().splitlines()]
        out[name] = sorted(
            ({c["name"]: convert(r.get(c["name"]), c, arrow_type(c)) for c in cols} for r in rows),
            key=lambda r: str(r[cols[0]["name"]]),
        )
    return out


def read_columns(target: Path, name: str) -> str:
    from deltalake import DeltaTable

    # the change log's column description travels in the table's first commit metadata
    return DeltaTable(str(target / name)).history()[-1]["binlake.columns"]


def synced(target: Path) -> dict[str, list[dict]]:
    out = {}
    for name in delta_tables(target):
        rows = read_delta(target, name).to_pylist()
        key = next(iter(rows[0])) if rows else None
        out[name] = sorted(rows, key=lambda r: str(r[key]))
    return out


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(
        tmp_path_factory.mktemp("wl") / "bin",
        seed=21,
        target_bytes=600_000,
        max_file_size=150_000,
        ddl_every=0,
    )


def test_sync_equals_the_truth_and_replays_change_nothing(spark: Any, workload: Any, tmp_path: Path) -> None:
    target = tmp_path / "delta"
    report = sync_to_delta(spark, str(workload.files[0].parent), target)
    assert set(report.tables) == {"shop.customers", "shop.orders", "shop.alltypes"}
    assert synced(target) == truth_tables(workload, target)
    again = sync_to_delta(spark, str(workload.files[0].parent), target)
    assert sorted(again.skipped) == sorted(report.tables) and not again.tables
    assert synced(target) == truth_tables(workload, target)


def test_incremental_runs_equal_one_run(spark: Any, workload: Any, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    for f in workload.files[:2]:
        shutil.copy(f, partial / f.name)
    target = tmp_path / "delta"
    sync_to_delta(spark, str(partial), target)
    for f in workload.files[2:]:
        shutil.copy(f, partial / f.name)
    sync_to_delta(spark, str(partial), target)
    assert synced(target) == truth_tables(workload, target)


def test_crash_between_tables_then_rerun(
    spark: Any, workload: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "delta"
    real, calls = apply_mod.merge_table, []

    def crashing(*args: Any, **kw: Any) -> None:
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt("killed mid-run")
        real(*args, **kw)

    monkeypatch.setattr(apply_mod, "merge_table", crashing)
    with pytest.raises(KeyboardInterrupt):
        sync_to_delta(spark, str(workload.files[0].parent), target)
    monkeypatch.setattr(apply_mod, "merge_table", real)
    sync_to_delta(spark, str(workload.files[0].parent), target)
    assert synced(target) == truth_tables(workload, target)


def test_change_log_rows(spark: Any, workload: Any) -> None:
    df = spark.read.format("binlog").load(str(workload.files[0].parent))
    assert df.rdd.getNumPartitions() == len(workload.files)
    rows = df.orderBy("order_key").collect()
    assert sum(t.rows for t in workload.transactions) == len(rows)
    assert [r["order_key"] for r in rows] == sorted(r["order_key"] for r in rows)
    assert {r["op"] for r in rows} == {"insert", "update", "delete"}
