"""The Spark pipeline end to end against the generator's truth: the binlog data source, the change
log, the last change per key, the guarded MERGE into Delta tables; replays and crashes mid-run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.demo import compare_to_truth
from binlake.generate import generate
from binlake.spark import resume
from binlake.spark.apply import sync
from binlake.spark.sinks import delta as delta_sink
from binlake.spark.sinks import delta_renames
from binlake.spark.sinks.delta import delta_tables, read_delta
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


def final_tables(result: Any, target: Path) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """(synced, truth) per table of the generator's truth, under final names, on the truth's columns."""
    compared = compare_to_truth(result.truth_dir, target)
    return {n: got for n, (got, _) in compared.items()}, {n: want for n, (_, want) in compared.items()}


def ddl_series(tmp_path: Path, flavor: str) -> tuple[Any, dict[str, str]]:
    """A generated series with DDL every 20 transactions (ADD / DROP / RENAME COLUMN, RENAME TABLE
    back and forth); for MySQL 5.7 (no column names in the binlog) with its schema history."""
    from binlake.reader import BinlogReader
    from binlake.schema import SchemaHistory, SchemaTracker

    result = generate(
        tmp_path / "bin", seed=12, target_bytes=300_000, max_file_size=75_000, ddl_every=15, flavor=flavor
    )
    if flavor != "mysql57":
        return result, {}
    tracker = SchemaTracker(SchemaHistory())
    for f in result.files:
        for _ in BinlogReader(f, observers=[tracker]):
            pass
    tracker.history.save(tmp_path / "history.json")
    return result, {"schema": str(tmp_path / "history.json")}


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
    report = sync(spark, str(workload.files[0].parent), target)
    assert set(report.tables) == {"shop.customers", "shop.orders", "shop.alltypes"}
    assert synced(target) == truth_tables(workload, target)
    # run again, it resumes at the last transaction it applied, read again and skipped
    again = sync(spark, str(workload.files[0].parent), target)
    assert again.resumed.startswith(f"resumed at {report.position},") and again.position == report.position
    assert not again.tables and again.skipped and set(again.skipped) <= set(report.tables)
    last = spark.read.format("binlog").load(str(workload.files[0].parent))
    last = last.where((last.file == report.file) & (last.txn_position == report.txn_position))
    assert again.changes == last.where(last.op.isin("insert", "update", "delete")).count() > 0
    assert synced(target) == truth_tables(workload, target)
    # without the record, the whole series again: every table is at that position already
    assert resume.FileRecords(target).forget(None) == 1
    replay = sync(spark, str(workload.files[0].parent), target)
    assert not replay.resumed and replay.changes == report.changes
    assert sorted(replay.skipped) == sorted(report.tables) and not replay.tables
    assert synced(target) == truth_tables(workload, target)


def test_incremental_runs_equal_one_run(spark: Any, workload: Any, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    for f in workload.files[:2]:
        shutil.copy(f, partial / f.name)
    target = tmp_path / "delta"
    sync(spark, str(partial), target)
    for f in workload.files[2:]:
        shutil.copy(f, partial / f.name)
    # the driver takes a table's rows 60 at a time (order-key slices): the same tables
    sync(spark, str(partial), target, chunk_rows=60)
    assert synced(target) == truth_tables(workload, target)


def test_crash_between_tables_then_rerun(
    spark: Any, workload: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "delta"
    real, calls = delta_sink.merge_table, []

    def crashing(*args: Any, **kw: Any) -> None:
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt("killed mid-run")
        real(*args, **kw)

    monkeypatch.setattr(delta_sink, "merge_table", crashing)
    with pytest.raises(KeyboardInterrupt):
        sync(spark, str(workload.files[0].parent), target)
    monkeypatch.setattr(delta_sink, "merge_table", real)
    sync(spark, str(workload.files[0].parent), target)
    assert synced(target) == truth_tables(workload, target)


def test_change_log_rows(spark: Any, workload: Any) -> None:
    df = spark.read.format("binlog").load(str(workload.files[0].parent))
    assert df.rdd.getNumPartitions() == len(workload.files)
    rows = df.orderBy("order_key").collect()
    assert sum(t.rows for t in workload.transactions) == len(rows)
    assert [r["order_key"] for r in rows] == sorted(r["order_key"] for r in rows)
    assert {r["op"] for r in rows} == {"insert", "update", "delete"}


def write_keyless_log(out: Path) -> None:
    """A series of one table without a key, ``d.log``: the same row inserted twice, then deleted."""
    from binlake.events.control import Xid
    from binlake.events.gtid import Gtid
    from binlake.events.query import Query
    from binlake.events.rows import Rows
    from binlake.events.table_map import TableMap
    from binlake.events.types import EventType
    from binlake.values.columns import ColumnDef
    from binlake.values.types import ColumnType
    from binlake.writer import BinlogWriter

    w = BinlogWriter(out, flavor="mysql80")
    cols = [
        ColumnDef(0, ColumnType.LONG, 0, True, name="a", unsigned=False),
        ColumnDef(1, ColumnType.VARCHAR, 40, True, name="b", collation=45),
    ]
    tm = TableMap(5, 1, "d", "log", cols, has_optional_metadata=True)
    for i, (op, b, a) in enumerate(
        [("insert", None, [1, "x"]), ("insert", None, [1, "x"]), ("delete", [1, "x"], None)]
    ):
        r = Rows(op, 2, 5, 1, 2, 3 if b else 0, 3 if a else 0, table=tm)
        r.rows = [(b, a)]
        code = {"insert": EventType.WRITE_ROWS_V2, "delete": EventType.DELETE_ROWS_V2}[op]
        w.transaction(
            [
                (
                    EventType.GTID,
                    Gtid(
                        0,
                        "3e11fa47-71ca-11e1-9e33-c80aa9429562",
                        i + 1,
                        last_committed=i,
                        sequence_number=i + 1,
                        immediate_commit_timestamp=1_700_000_000_000_000 + i,
                    ),
                    1,
                ),
                (EventType.QUERY, Query(1, 0, 0, "d", "BEGIN", {}), 1),
                (EventType.TABLE_MAP, tm, 1),
                (code, r, 1),
                (EventType.XID, Xid(i), 1),
            ]
        )
    w.close()


def test_table_without_key_is_an_append_only_change_table(spark: Any, tmp_path: Path) -> None:
    write_keyless_log(tmp_path / "bin")
    sync(spark, str(tmp_path / "bin"), tmp_path / "delta")
    from deltalake import DeltaTable

    rows = (
        DeltaTable(str(tmp_path / "delta" / "d.log"))
        .to_pyarrow_table()
        .sort_by("_binlake_order_key")
        .to_pylist()
    )
    assert [(r["a"], r["b"], r["_binlake_op"]) for r in rows] == [
        (1, "x", "insert"),
        (1, "x", "insert"),
        (1, "x", "delete"),
    ]
    again = sync(spark, str(tmp_path / "bin"), tmp_path / "delta")
    assert (
        again.skipped == ["d.log"]
        and len(DeltaTable(str(tmp_path / "delta" / "d.log")).to_pyarrow_table()) == 3
    )


@pytest.mark.parametrize("reads", ["tasks", "driver"])
def test_streaming_follows_a_growing_directory(spark: Any, tmp_path: Path, reads: str) -> None:
    """Files arrive one by one, the last one cut inside a transaction: the stream waits for the tail
    and, once everything is there and it has caught up, the tables equal the truth — with DDL on, so
    tables and columns renamed between micro-batches are followed. Decoded by Spark tasks, or on the
    driver in micro-batches of at most 40 kB of binlog (cut inside files)."""
    from binlake.spark.apply import stream_to

    options = {"reads": reads, "maxBatchBytes": "40KB"}

    result, _ = ddl_series(tmp_path, "mysql80")
    live = tmp_path / "live"
    live.mkdir()
    target, ckpt = tmp_path / "delta", tmp_path / "ckpt"
    files, batches = result.files, 0
    for i, f in enumerate(files):
        data = f.read_bytes()
        (live / f.name).write_bytes(data[: len(data) * 2 // 3])  # a server still writing it
        batches += len(stream_to(spark, str(live), target, ckpt, options=options).reports)
        (live / f.name).write_bytes(data)
        if i == len(files) - 1:
            batches += len(stream_to(spark, str(live), target, ckpt, options=options).reports)
    if reads == "driver":  # bounded batches: the driver's reader read them
        assert batches >= sum(f.stat().st_size for f in files) // 40_000
    else:
        assert batches <= 2 * len(files)
    got, want = final_tables(result, target)
    assert got == want
    assert sorted(delta_tables(target)) == sorted(want)


def test_killed_again_and_again_then_finished(tmp_path: Path) -> None:
    """`binlake sync` killed (SIGKILL) at random moments — starting, reading, between and inside
    Delta commits — then run to the end: the tables equal the truth (DDL on: final names), nothing
    lost, nothing doubled."""
    import sys

    from tests.support.killloop import kill_then_finish

    workload = generate(tmp_path / "bin", seed=33, target_bytes=500_000, max_file_size=120_000, ddl_every=25)
    target = tmp_path / "delta"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from binlake.spark.session import spark_session; from binlake.spark.apply import sync; "
        f"sync(spark_session('local[1]'), {str(tmp_path / 'bin')!r}, {'delta:' + str(target)!r}, chunk_rows=40)",
    ]
    kills = kill_then_finish(cmd, runs=3, window=(6, 20))
    assert kills >= 1
    got, want = final_tables(workload, target)
    assert got == want


def test_parquet_snapshot_export(spark: Any, workload: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from binlake.spark.sinks.parquet import export_parquet

    target = tmp_path / "delta"
    sync(spark, str(workload.files[0].parent), target)
    counts = export_parquet(target, tmp_path / "pq")
    for name, rows in synced(target).items():
        snap = pq.read_table(tmp_path / "pq" / f"{name}.parquet").to_pylist()
        assert counts[name] == len(rows) and sorted(snap, key=lambda r: str(next(iter(r.values())))) == rows


@pytest.mark.parametrize("flavor", ["mysql80", "mysql57"])
def test_sync_with_ddl_equals_the_truth(spark: Any, tmp_path: Path, flavor: str) -> None:
    """DDL on: tables renamed back and forth and columns added, dropped and renamed — in one batch and
    across batches the targets follow, and equal the generator's truth under the final names."""
    result, options = ddl_series(tmp_path, flavor)
    renames = [
        r
        for r in spark.read.format("binlog").options(**options).load(str(tmp_path / "bin")).collect()
        if r["op"] in ("rename_table", "rename_column")
    ]
    assert {r["op"] for r in renames} == {"rename_table", "rename_column"}
    one = tmp_path / "one"
    sync(spark, str(tmp_path / "bin"), one, options=options)
    got, want = final_tables(result, one)
    assert got == want and len(want) == 3
    assert sorted(delta_tables(one)) == sorted(want)  # no table left behind under an old name

    partial, batches = tmp_path / "partial", tmp_path / "batches"
    partial.mkdir()
    for i, f in enumerate(result.files, 1):  # three batches: renames cross batch boundaries
        shutil.copy(f, partial / f.name)
        if i in (1, 3, len(result.files)):
            sync(spark, str(partial), batches, options=options)
    got, want = final_tables(result, batches)
    assert got == want
    assert sorted(delta_tables(batches)) == sorted(want)


def flaky_renames(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Renaming Delta targets killed again and again: before a step, or after it but before the
    journal notes it (every other step). The steps tried, by kind, as they are."""
    calls: list[str] = []

    def flaky(real: Any) -> Any:
        def step(*args: Any, **kw: Any) -> None:
            calls.append(real.__name__)
            if len(calls) % 4 == 1:
                raise KeyboardInterrupt("killed before the step")
            real(*args, **kw)
            if len(calls) % 4 == 2:
                raise KeyboardInterrupt("killed after the step")

        return step

    monkeypatch.setattr(delta_renames, "_move_table", flaky(delta_renames._move_table))
    monkeypatch.setattr(delta_renames, "_rename_columns", flaky(delta_renames._rename_columns))
    return calls


def sync_until_done(spark: Any, source: Path, target: Path, options: dict[str, str]) -> int:
    """``sync`` run again until a run is not killed; how many were."""
    kills = 0
    while True:
        try:
            sync(spark, str(source), target, options=options)
            return kills
        except KeyboardInterrupt:
            kills += 1


def test_renames_killed_at_every_step_then_rerun(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch by batch over a series with DDL, renaming the targets fails again and again — before a
    step, or after it but before the journal notes it — and each batch is simply run again: the
    tables equal the truth under their final names, none renamed twice."""
    result, options = ddl_series(tmp_path, "mysql80")
    calls = flaky_renames(monkeypatch)
    partial, target = tmp_path / "partial", tmp_path / "delta"
    partial.mkdir()
    kills = 0
    for f in result.files:
        shutil.copy(f, partial / f.name)
        kills += sync_until_done(spark, partial, target, options)
    assert kills >= 4 and {"_move_table", "_rename_columns"} <= set(calls)
    got, want = final_tables(result, target)
    assert got == want
    assert sorted(delta_tables(target)) == sorted(want)


def test_rows_reach_the_driver_in_bounded_slices_in_order(spark: Any) -> None:
    import pyarrow as pa

    from binlake.spark.typedrows import ORDER, arrow_batches

    keys = [i.to_bytes(4, "big") for i in range(1000)]
    df = spark.createDataFrame(
        [(k, i) for i, k in enumerate(reversed(keys))], f"{ORDER} BINARY, n INT"
    ).repartition(3)
    schema = pa.schema([(ORDER, pa.binary()), ("n", pa.int32())])
    batches = list(arrow_batches(df.orderBy(ORDER), schema, slice_rows=150))
    got = pa.Table.from_batches(batches, schema)
    assert got.column(ORDER).to_pylist() == keys  # every row once, in order-key order
    assert sum(b.num_rows for b in batches) == 1000 and max(b.num_rows for b in batches) < 400


def test_driver_reads_replay_a_failed_micro_batch(spark: Any, workload: Any, tmp_path: Path) -> None:
    """A micro-batch decoded on the driver whose apply fails is in Spark's write-ahead log, not
    committed: the restarted query reads that range again (``readBetweenOffsets``, in a task) and
    then the rest; the tables equal the truth."""
    from binlake.spark.apply import apply_changes, stream_changes

    target, ckpt = tmp_path / "delta", tmp_path / "ckpt"
    options = {"reads": "driver", "maxBatchBytes": "100KB"}
    seen: list[int] = []

    def fail_second(batch: Any) -> Any:
        seen.append(batch.count())
        if len(seen) == 2:
            raise RuntimeError("the sink failed")
        return apply_changes(batch, target, source=str(workload.files[0].parent))

    with pytest.raises(Exception, match="the sink failed"):
        stream_changes(spark, str(workload.files[0].parent), ckpt, fail_second, options=options)
    query = stream_changes(spark, str(workload.files[0].parent), ckpt, fail_second, options=options)
    assert len(seen) > 3 and seen[2] == seen[1]  # the failed batch read again, whole
    assert len(query.reports) == len(seen) - 2
    assert synced(target) == truth_tables(workload, target)
