"""Global binlog merge speed: merged transactions per CPU-second for 4 and 16 data nodes.

    python benchmarks/merge.py [--transactions 20000] [--spark]

The shard simulator writes the nodes' binlogs once (cached in out/bench/merge-N); then one process
reads them (decoding and grouping transactions: read+group), sorts per node and merges (sort+merge),
streaming as ``binlake merge`` does: the nodes round-robin, ``CHUNK`` transactions at a time, each
fed to the merger as it is read, merged transactions emitted as they become final and dropped
(nothing holds node transactions: the cycle collector would walk them all, a cost of the benchmark,
not of the merge). Each phase is measured in CPU seconds of this process (``time.process_time``
around each transaction's reading and feeding, about 0.4 µs a call: what the phase costs, whatever
else the machine runs) and reported as merged transactions per CPU-second, the cycle collector's
part of each shown apart. The digest (SHA-256 of every merged transaction's vtso, kind and pieces)
shows the output unchanged between versions. ``--spark``: also the same merge on Spark (``local[2]``: one task per node, a range-partitioned sort on the
vtso), checked equal, in wall-clock seconds (its work is in the JVM and the Python workers).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import time
from pathlib import Path

from binlake.globalbinlog.merge import GlobalMerger, node_transactions
from binlake.shardsim import simulate

ROOT = Path("out/bench")
READ, MERGE = "read+group", "sort+merge"


class Collector:
    """CPU seconds the cycle collector runs, by the phase it interrupts (it runs when allocations
    pile up, mostly while reading; how long it runs depends on everything alive, mostly the pieces
    the sorters hold back)."""

    def __init__(self) -> None:
        self.phase = READ
        self.spent = {READ: 0.0, MERGE: 0.0}
        self._start = 0.0

    def __call__(self, what: str, info: dict[str, int]) -> None:
        if what == "start":
            self._start = time.process_time()
        else:
            self.spent[self.phase] += time.process_time() - self._start


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
        spent = {READ: 0.0, MERGE: 0.0}
        node_txns = merged = pieces = 0
        digest = hashlib.sha256()
        vtsos: list[str] = []
        clock = time.process_time
        collector = Collector()
        gc.callbacks.append(collector)
        while live:
            for i in list(live):
                stream = streams[i]
                for _ in range(CHUNK):  # as ``IncrementalMerge.step``: each transaction fed as read
                    collector.phase = READ
                    c0 = clock()
                    t = next(stream, None)
                    c1 = clock()
                    spent[READ] += c1 - c0
                    collector.phase = MERGE
                    if t is None:
                        merger.finish(i)
                        live.remove(i)
                    else:
                        merger.feed(i, t)
                        node_txns += 1
                    spent[MERGE] += clock() - c1
                    if t is None:
                        break
            c1 = clock()
            emitted = list(merger.emit())
            spent[MERGE] += clock() - c1
            for g in emitted:  # not timed
                merged += 1
                pieces += len(g.pieces)
                vtsos.append(g.vtso)
                digest.update(
                    f"{g.vtso} {g.kind} {[(p.node, p.key, len(p.events)) for p in g.pieces]}".encode()
                )
            del emitted
        gc.callbacks.remove(collector)
        read, merge = spent[READ], spent[MERGE]
        own_read, own_merge = read - collector.spent[READ], merge - collector.spent[MERGE]
        print(
            f"{n:2d} nodes, {mb:6.1f} MB, {node_txns} node transactions -> {merged} merged ({pieces} pieces), "
            f"digest {digest.hexdigest()[:16]}\n"
            f"    read+group {read:5.2f} CPU-s = {merged / read:7.0f} txn/CPU-s "
            f"({own_read:5.2f} + collector {collector.spent[READ]:4.2f}); "
            f"sort+merge {merge:5.2f} CPU-s = {merged / merge:7.0f} txn/CPU-s "
            f"({own_merge:5.2f} + collector {collector.spent[MERGE]:4.2f}); "
            f"both {merged / (read + merge):7.0f} txn/CPU-s\n"
            f"    read+group / sort+merge: {read / merge:.2f}x, without the collector {own_read / own_merge:.2f}x"
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
