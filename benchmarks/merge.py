"""Global binlog merge speed: merged transactions per CPU-second for 4 and 16 data nodes.

    python benchmarks/merge.py [--transactions 20000] [--spark]

The shard simulator writes the nodes' binlogs once (cached in out/bench/merge-N); then one process
reads them (decoding and grouping transactions: read+group), sorts per node and merges (sort+merge).
Each phase is measured in CPU seconds of this process (``time.process_time``: what the phase costs,
whatever else the machine runs) and reported as merged transactions per CPU-second. ``--spark``:
also the same merge on Spark (``local[2]``: one task per node, a range-partitioned sort on the
vtso), checked equal, in wall-clock seconds (its work is in the JVM and the Python workers).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from binlake.globalbinlog.merge import GlobalMerger, node_transactions
from binlake.shardsim import simulate

ROOT = Path("out/bench")


def nodes_for(n: int, transactions: int) -> list[list[Path]]:
    out = ROOT / f"merge-{n}-{transactions}"
    if not (out / "truth.jsonl").exists():
        simulate(
            out,
            seed=1,
            nodes=n,
            transactions=transactions,
            sessions=2 * n,
            pending_at_end=0,
            max_file_size=8 << 20,
        )
    return [sorted((out / f"dn{i}").glob("binlog.0*")) for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--transactions", type=int, default=20_000)
    ap.add_argument("--spark", action="store_true", help="also merge on Spark local[2] (wall clock)")
    args = ap.parse_args()
    spark = None
    if args.spark:
        from binlake.spark.session import spark_session

        spark = spark_session("local[2]")
        spark.range(1).count()  # start-up excluded
    for n in (4, 16):
        nodes = nodes_for(n, args.transactions)
        mb = sum(f.stat().st_size for files in nodes for f in files) / 1e6
        c0 = time.process_time()
        grouped = [list(node_transactions(files)) for files in nodes]
        c1 = time.process_time()
        merger = GlobalMerger.for_nodes([f"dn{i}" for i in range(n)])
        for i, txns in enumerate(grouped):
            for t in txns:
                merger.feed(i, t)
            merger.finish(i)
        out = list(merger.emit())
        c2 = time.process_time()
        pieces = sum(len(g.pieces) for g in out)
        read, merge = c1 - c0, c2 - c1
        print(
            f"{n:2d} nodes, {mb:6.1f} MB, {sum(map(len, grouped))} node transactions -> {len(out)} merged "
            f"({pieces} pieces): read+group {read:5.2f} CPU-s = {len(out) / read:7.0f} txn/CPU-s; "
            f"sort+merge {merge:5.2f} CPU-s = {len(out) / merge:7.0f} txn/CPU-s; "
            f"both {len(out) / (read + merge):7.0f} txn/CPU-s (read+group {read / merge:.1f}x sort+merge)"
        )
        if spark is not None:
            from binlake.globalbinlog.spark import merge_on_spark

            t3 = time.perf_counter()
            on_spark = merge_on_spark(spark, nodes)
            t4 = time.perf_counter()
            assert [g.vtso for g in on_spark] == [g.vtso for g in out]
            print(f"    Spark local[2] end to end {t4 - t3:5.1f} s wall = {len(out) / (t4 - t3):7.0f} txn/s")


if __name__ == "__main__":
    main()
