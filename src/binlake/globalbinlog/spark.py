"""The global merge on Spark: one task per data node reads and sorts it (the first-level sorter),
a range-partitioned sort on the virtual TSO orders every piece, and equal vtsos — the pieces of
one distributed transaction — come out adjacent and are merged. Same result as ``merge_nodes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from binlake.globalbinlog.merge import GlobalMerger, GlobalTxn, merge_nodes, node_transactions
from binlake.globalbinlog.sorter import NodeSorter

PIECE_DDL = "vtso STRING, node_seq STRING, branch STRING, node STRING, piece BINARY"


def _sort_node(index: int, name: str, files: list[str]) -> tuple[list[tuple[str, str, str, str, bytes]], str]:
    import pickle

    s = NodeSorter(name, f"{index + 1:06d}")
    for t in node_transactions([Path(f) for f in files]):
        s.feed(t)
    s.finish()
    rows = [(p.vtso or "", p.node_seq, p.branch, p.node, pickle.dumps(p)) for p in s.drain()]
    return rows, s.watermark


def merge_on_spark(spark: Any, nodes: list[list[Path]], names: list[str] | None = None) -> list[GlobalTxn]:
    """Merge node series with Spark; the result equals ``merge_nodes(nodes)``."""
    import pickle

    names = names or [f"dn{i}" for i in range(len(nodes))]
    jobs = [(i, names[i], [str(f) for f in files]) for i, files in enumerate(nodes)]
    sorted_nodes = spark.sparkContext.parallelize(jobs, len(jobs)).map(lambda j: _sort_node(*j)).cache()
    limit = min(sorted_nodes.map(lambda r: r[1]).collect())  # the slowest node's watermark
    pieces = spark.createDataFrame(sorted_nodes.flatMap(lambda r: r[0]), PIECE_DDL)
    ordered = pieces.where(pieces.vtso <= limit).orderBy("vtso", "node_seq", "branch")  # range partitioned
    check = GlobalMerger([])  # the same checks as the single-process merge
    out: list[GlobalTxn] = []
    group: list[Any] = []
    for row in ordered.toLocalIterator():
        if group and row["vtso"] != group[0].vtso:
            out.append(check.merged(group[0].vtso, group))
            group = []
        group.append(pickle.loads(row["piece"]))
    if group:
        out.append(check.merged(group[0].vtso, group))
    sorted_nodes.unpersist()
    return out


__all__ = ["merge_nodes", "merge_on_spark"]
