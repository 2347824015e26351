"""A prototype's measurement for issue #14: what a sync's read and its last change per key cost if the
plan ran on the driver from the read's Arrow, without JVM rows, a kept batch or a Spark job reading it.

    python benchmarks/driver_plan.py [--size-mb 1000] [--file-mb 1100]

The sync's read (the ``binlog`` source's own ranges and ``read_range`` with ``apply.SYNC_READ``) runs
as an RDD on ``local[2]``, each range's batches returned as Arrow IPC bytes and collected on the
driver; then the last change per (db, table, key) across ranges in pyarrow (by order key; renames
and tombstones left out, so a lower bound of the plan's work). Prints each step's wall seconds.
Compare with ``trace_sync.py``'s ``batch_head`` and ``table_plans`` steps on the same series.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).parent))

from spark import series  # noqa: E402 - the benchmark's own series, cached under out/bench


def read_ranges(options: dict[str, str], parts: Iterable[Any]) -> Iterator[bytes]:
    """Each range's change-log batches as one Arrow IPC stream (in a Python worker)."""
    from binlake.spark.source import read_range

    for part in parts:
        sink, writer = io.BytesIO(), None
        for batch in read_range(options, part):
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
        if writer is not None:
            writer.close()
            yield sink.getvalue()


def last_per_key(t: pa.Table) -> pa.Table:
    """The last keyed change per (db, table, key) of ``t`` by order key."""
    rows = t.filter(pc.is_valid(t["pk"]))
    keys = pa.table(
        {
            "db": rows["db"],
            "table": rows["table"],
            "value": pc.struct_field(rows["pk"], "value"),
            "metadata": pc.struct_field(rows["pk"], "metadata"),
            "i": pa.array(range(rows.num_rows), pa.int64()),
        }
    ).take(pc.sort_indices(rows["order_key"]))
    last = keys.group_by(["db", "table", "value", "metadata"], use_threads=False).aggregate([("i", "last")])
    return rows.take(last["i_last"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--file-mb", type=int, default=1100)
    args = ap.parse_args()
    src = series(args.size_mb, args.file_mb)

    from binlake.spark.apply import SYNC_READ
    from binlake.spark.session import spark_session
    from binlake.spark.source import BinlogReaderSpark

    spark = spark_session("local[2]")
    options = {**SYNC_READ, "path": str(src.absolute())}
    t0 = time.time()
    parts = BinlogReaderSpark(options).partitions()
    t1 = time.time()
    print(f"planning: {t1 - t0:.1f} s, {len(parts)} ranges")
    blobs = (
        spark.sparkContext.parallelize(parts, len(parts))
        .mapPartitions(lambda it: read_ranges(options, it))
        .collect()
    )
    t2 = time.time()
    print(f"read and collected on the driver: {t2 - t1:.1f} s, {sum(map(len, blobs)) / 1e6:.0f} MB of Arrow")
    t = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs])
    kept = last_per_key(t)
    print(
        f"last change per key on the driver: {time.time() - t2:.2f} s, {t.num_rows:,} rows -> {kept.num_rows:,}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
