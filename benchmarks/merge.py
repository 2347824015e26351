"""Global binlog merge speed: merged transactions per CPU-second for 4 and 16 data nodes.

    python benchmarks/merge.py [--transactions 20000] [--spark]

The shard simulator writes the nodes' binlogs once (cached in out/bench/merge-N); then one process
reads them (decoding and grouping transactions: read+group), sorts per node and merges (sort+merge),
streaming as ``binlake merge`` does: the nodes round-robin, ``CHUNK`` transactions at a time, merged
transactions emitted as they become final and dropped (nothing holds every node transaction: the
cycle collector would walk them all, a cost of the benchmark, not of the merge). Each phase is
measured in CPU seconds of this process (``time.process_time`` around each chunk: what the phase
costs, whatever else the machine runs) and reported as merged transactions per CPU-second. The
digest (SHA-256 of every merged transaction's vtso, kind and pieces) shows the output unchanged. ``--spark``:
also the same merge on Spark (``local[2]``: one task per node, a range-partitioned sort on the
vtso), checked equal, in wall-clock seconds (its work is in the JVM and the Python workers).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from itertools import islice
from pathlib import Path

from binlake.globalbinlog.merge import GlobalMerger, node_transactions
from binlake.shardsim import simulate

ROOT = Path("out/bench")
CHUNK = 1000  # node transactions read per node and round


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
        merger = GlobalMerger.for_nodes([f"dn{i}" for i in range(n)])
        streams = [node_transactions(files) for files in nodes]
        live = list(range(n))
        read = merge = 0.0
        node_txns = merged = pieces = 0
        digest = hashlib.sha256()
        vtsos: list[str] = []
        while live:
            for i in list(live):
                c0 = time.process_time()
                batch = list(islice(streams[i], CHUNK))
                c1 = time.process_time()
                for t in batch:
                    merger.feed(i, t)
                if len(batch) < CHUNK:
                    merger.finish(i)
                    live.remove(i)
                node_txns += len(batch)
                del batch
                read, merge = read + c1 - c0, merge + time.process_time() - c1
            c1 = time.process_time()
            emitted = list(merger.emit())
            merge += time.process_time() - c1
            for g in emitted:  # not timed
                merged += 1
                pieces += len(g.pieces)
                vtsos.append(g.vtso)
                digest.update(f"{g.vtso} {g.kind} {[(p.node, p.key, len(p.events)) for p in g.pieces]}".encode())
            del emitted
        print(
            f"{n:2d} nodes, {mb:6.1f} MB, {node_txns} node transactions -> {merged} merged "
            f"({pieces} pieces): read+group {read:5.2f} CPU-s = {merged / read:7.0f} txn/CPU-s; "
            f"sort+merge {merge:5.2f} CPU-s = {merged / merge:7.0f} txn/CPU-s; "
            f"both {merged / (read + merge):7.0f} txn/CPU-s (read+group {read / merge:.2f}x sort+merge); "
            f"digest {digest.hexdigest()[:16]}"
        )
        if spark is not None:
            from binlake.globalbinlog.spark import merge_on_spark

            t3 = time.perf_counter()
            on_spark = merge_on_spark(spark, nodes)
            t4 = time.perf_counter()
            assert [g.vtso for g in on_spark] == vtsos
            print(f"    Spark local[2] end to end {t4 - t3:5.1f} s wall = {merged / (t4 - t3):7.0f} txn/s")


if __name__ == "__main__":
    main()
