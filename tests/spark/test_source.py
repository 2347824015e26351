"""The batch ``binlog`` source: big files split at transaction boundaries read the same change log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.generate import generate

pytestmark = pytest.mark.slow


def comparable(df: Any) -> Any:
    """The change log with its VARIANT columns as JSON text (Spark's VariantVal has no equality)."""
    from pyspark.sql import functions as F

    return df.select(*[F.to_json(c).alias(c) if t == "variant" else F.col(c) for c, t in df.dtypes])


def test_split_files_give_the_same_change_log(spark: Any, tmp_path: Path) -> None:
    generate(tmp_path / "bin", seed=5, target_bytes=400_000, max_file_size=250_000, ddl_every=0)
    whole = comparable(spark.read.format("binlog").option("splitSize", "0").load(str(tmp_path / "bin")))
    split = comparable(spark.read.format("binlog").option("splitSize", "40KB").load(str(tmp_path / "bin")))
    assert whole.rdd.getNumPartitions() == 2
    assert split.rdd.getNumPartitions() >= 8
    rows = sorted(tuple(r) for r in whole.collect())
    assert len(rows) > 1000
    assert sorted(tuple(r) for r in split.collect()) == rows
    keys = [r["order_key"] for r in split.select("order_key").collect()]
    assert len(keys) == len(set(keys)) == len(rows)  # order keys are unique per row: nothing doubled


def test_selection_options_match_filtering_the_whole_change_log(spark: Any, tmp_path: Path) -> None:
    """databases/tables/operations/startDatetime read the same rows as filtering everything by hand."""
    import datetime as dt

    generate(tmp_path / "bin", seed=8, target_bytes=200_000, max_file_size=100_000, ddl_every=0)
    whole = comparable(spark.read.format("binlog").load(str(tmp_path / "bin"))).collect()
    times = sorted({r["commit_ts"] for r in whole})
    cut = times[len(times) // 2]
    expected = sorted(
        tuple(r)
        for r in whole
        if r["table"] == "orders" and r["op"] in ("update", "delete") and r["commit_ts"] >= cut
    )
    got = comparable(
        spark.read.format("binlog")
        .option("tables", "shop.ord*")
        .option("operations", "update,delete")
        .option("startDatetime", cut.astimezone(dt.UTC).isoformat())
        .load(str(tmp_path / "bin"))
    ).collect()
    assert len(expected) > 20
    assert sorted(tuple(r) for r in got) == expected
    only_db = spark.read.format("binlog").option("databases", "nosuchdb").load(str(tmp_path / "bin"))
    assert only_db.count() == 0


def test_streaming_ranges_split_like_batch_ones(tmp_path: Path) -> None:
    """The stream reader cuts a big micro-batch range at transaction boundaries too; the ranges'
    change log is the unsplit one, row for row."""
    from binlake.spark.stream import BinlogStreamReader

    generate(tmp_path / "bin", seed=6, target_bytes=300_000, max_file_size=200_000, ddl_every=0)

    def rows(split: str) -> tuple[int, list[dict]]:
        reader = BinlogStreamReader({"path": str(tmp_path / "bin"), "splitsize": split})
        parts = reader.partitions(reader.initialOffset(), reader.latestOffset())
        out = [r for p in parts for batch in reader.read(p) for r in batch.to_pylist()]
        return len(parts), out

    n_whole, whole = rows("0")
    n_split, split = rows("30KB")
    assert n_whole == 2 and n_split >= 8
    assert len(whole) > 500 and split == whole


def test_pushed_filters_prune_at_the_source_and_read_the_same(spark: Any, tmp_path: Path) -> None:
    """Spark filters on db/table/op/commit_ts reach the reader (only matching rows are built there)
    and the query reads exactly what filtering the whole change log gives."""
    import datetime as dt

    from pyspark.sql import functions as F
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In

    from binlake.spark.source import BinlogReaderSpark

    generate(tmp_path / "bin", seed=9, target_bytes=200_000, max_file_size=100_000, ddl_every=0)
    path = str(tmp_path / "bin")
    df = comparable(spark.read.format("binlog").load(path))
    whole = df.collect()
    tables = sorted({r["table"] for r in whole})
    assert len(tables) >= 3
    times = sorted({r["commit_ts"] for r in whole})
    cut = times[len(times) // 3]
    queries = [
        (F.col("table") == tables[0], lambda r: r["table"] == tables[0]),
        (F.col("op").isin("update", "delete"), lambda r: r["op"] in ("update", "delete")),
        (
            (F.col("table").isin(tables[0], tables[1]))
            & (F.col("commit_ts") >= cut)
            & (F.col("op") != "insert"),
            lambda r: r["table"] in tables[:2] and r["commit_ts"] >= cut and r["op"] != "insert",
        ),
        (
            (F.col("commit_ts") <= cut) & (F.col("commit_ts") > times[2]),
            lambda r: times[2] < r["commit_ts"] <= cut,
        ),
        ((F.col("table") == tables[0]) & (F.col("table") == tables[1]), lambda r: False),
        (F.col("db") == "nowhere", lambda r: False),
    ]
    for condition, keep in queries:
        got = sorted(tuple(r) for r in df.where(condition).collect())
        assert got == sorted(tuple(r) for r in whole if keep(r)), condition

    # the reader itself, given the pushed filters, builds only the selected rows
    reader = BinlogReaderSpark({"path": path})
    pushed = [
        EqualTo(("table",), tables[0]),
        In(("op",), ("update",)),
        GreaterThanOrEqual(("commit_ts",), cut),
    ]
    assert list(reader.pushFilters(pushed)) == pushed  # every filter is still evaluated by Spark too
    built = [row for part in reader.partitions() for batch in reader.read(part) for row in batch.to_pylist()]
    want = [r for r in whole if r["table"] == tables[0] and r["op"] == "update" and r["commit_ts"] >= cut]
    assert built and len(built) == len(want)
    assert {(r["table"], r["op"]) for r in built} == {(tables[0], "update")}
    cut_utc = cut if cut.tzinfo else cut.astimezone(dt.UTC)  # Spark gives local naive times
    assert min(r["commit_ts"] for r in built) >= cut_utc


def _cuts_in_last_file(last: Path) -> dict[str, int]:
    """Two places a server can be at in its active file: inside a row event's body (the
    transaction's commit not yet written), and inside the header of a later transaction's GTID."""
    from binlake.reader import BinlogReader

    events = list(BinlogReader(last, decode_rows=False))
    rows = [e for e in events if e.type_name.endswith("ROWS_V2") and e.offset > last.stat().st_size // 2]
    gtid = next(e for e in events if e.type_name == "GTID" and e.offset > rows[0].offset)
    return {"row body": rows[0].offset + rows[0].header.event_size // 2, "event header": gtid.offset + 5}


def test_a_live_last_file_reads_exactly_its_complete_transactions(spark: Any, tmp_path: Path) -> None:
    """The last file of a series cut where a writing server can leave it: the source (split into
    small ranges, so the header-only planning meets the tail too) reads the complete transactions,
    row for row those of the whole series, and nothing of the unfinished one."""
    from binlake.position import transaction_ends

    result = generate(tmp_path / "bin", seed=3, target_bytes=120_000, max_file_size=50_000, ddl_every=0)
    last = result.files[-1]
    whole = last.read_bytes()

    def rows() -> list[Any]:
        df = spark.read.format("binlog").option("splitSize", "6KB").load(str(tmp_path / "bin"))
        return sorted(comparable(df).collect())  # Rows are tuples; order_key is unique, so they sort

    everything = rows()
    ends = list(transaction_ends(last))
    for where, cut in _cuts_in_last_file(last).items():
        last.write_bytes(whole[:cut])
        boundary = max(e for e in ends if e <= cut)
        expected = [r for r in everything if r.file != last.name or r.txn_position < boundary]
        assert 0 < len(expected) < len(everything)
        assert rows() == expected, where


def test_planning_a_live_series_warns_once_and_refuses_a_cut_rotated_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from binlake.errors import IncompleteTailError
    from binlake.spark.source import plan_ranges

    result = generate(tmp_path / "bin", seed=3, target_bytes=120_000, max_file_size=50_000, ddl_every=0)
    files = [str(f) for f in result.files]
    whole = plan_ranges(files, 6_000)
    assert capsys.readouterr().err == ""
    last = result.files[-1]
    cut = _cuts_in_last_file(last)["row body"]
    last.write_bytes(last.read_bytes()[:cut])
    live = plan_ranges(files, 6_000)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"binlake: warning: {last} is still being written")
    stop = live[-1].end
    assert stop is not None and stop < cut and f"reading up to offset {stop}," in err[0]
    # the same ranges as the whole file's up to the stop: only the last one shortened
    assert [(p.path, p.start) for p in live] == [
        (p.path, p.start) for p in whole if p.start < stop or p.path != str(last)
    ]
    first = result.files[0]
    first.write_bytes(first.read_bytes()[:-10])
    with pytest.raises(IncompleteTailError, match=f"{first}, offset .*a rotated file never grows"):
        plan_ranges(files, 0)


def test_a_live_series_batch_position_is_its_last_complete_transaction(spark: Any, tmp_path: Path) -> None:
    """What a sink commits as the batch's position (``batch_head``, the SyncReport's position) while
    the server is inside a transaction: the last complete transaction with rows."""
    from binlake.position import last_boundary
    from binlake.reader import BinlogReader
    from binlake.spark.apply import change_log
    from binlake.spark.plan import batch_head
    from binlake.txn import TransactionGrouper

    generate(tmp_path / "bin", seed=4, target_bytes=80_000, max_file_size=50_000, ddl_every=0)
    last = sorted((tmp_path / "bin").glob("binlog.0*"))[-1]
    last.write_bytes(last.read_bytes()[: _cuts_in_last_file(last)["row body"]])
    g = TransactionGrouper(keep_events=False)
    reader = BinlogReader(last, stop_position=last_boundary(last))
    done = [t for ev in reader for t in g.feed(0, ev) if t.rows]
    report, _ = batch_head(change_log(spark, str(tmp_path / "bin")), str(tmp_path / "bin"))
    assert report.position == f"{last.name}:{done[-1].start}"
