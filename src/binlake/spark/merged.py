"""``format("binlog").option("nodes", "true")``: the binlogs of a sharded database's data nodes,
merged on the fly into one globally ordered change log (the global binlog, ``binlake.globalbinlog``),
so ``binlake sync`` and the data source apply a sharded database into one set of tables.

The path is the node series, comma-separated, in a fixed order (each a directory, an index file
or a glob). The merge runs in one task, streaming: its order is global, by virtual TSO, so it cannot
be cut into independent ranges the way a single server's files are. Order keys are
``OrderKey.of_vtso`` in the one encoding every change log uses; a transaction's ``txn_position`` is
its rank in the merged stream (the version a sink records). Ranks are stable only over node series
that begin with their first binlog (a rerun over grown files then continues where the last one
stopped): a node whose first binlog was purged is refused — sync the directory ``binlake merge``
writes instead, whose file positions go on across purges. Options: ``schema`` (the logical tables'
DDL, for data nodes that write no column metadata), ``logicalMap`` (a rule file, see ``binlake merge
--logical-map``) or ``logicalNames`` (``polardbx``), ``final`` (``true``: the node files are
complete; by default they may still grow, so what a node may still precede is held back, as
``binlake merge`` does without ``--final``), ``source``. The selection options are not applied to a
merged read (refused): filter the DataFrame.

A merged stream to follow continuously is ``binlake merge --follow`` into a directory, which
``binlake sync --stream`` follows like any binlog directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import InputPartition

from binlake.spark.changelog import read_trim, to_batches


class MergedPartition(InputPartition):
    """Every node's files (absolute, resolved on the driver) and the nodes' names."""

    def __init__(self, nodes: list[list[str]], names: list[str]) -> None:
        super().__init__(0)
        self.nodes, self.names = nodes, names


def node_paths(path: str) -> list[str]:
    """The node series named by the ``path`` of a merged read."""
    nodes = [p.strip() for p in path.split(",") if p.strip()]
    if not nodes:
        raise ValueError("option nodes: the path names the data nodes' binlogs, comma-separated")
    return nodes


def plan_merged(options: dict[str, str]) -> list[InputPartition]:
    """One partition: every node's files, checked here on the driver (module docstring)."""
    from binlake.filters import Selection
    from binlake.globalbinlog.merge import node_names, starts_at_first_binlog
    from binlake.spark.source import resolve_files

    if Selection.from_options(options) != Selection():
        raise ValueError("a merged read (option nodes) takes no selection options: filter the DataFrame")
    nodes = node_paths(options["path"])
    files = [resolve_files(n) for n in nodes]
    for node, found in zip(nodes, files, strict=True):
        if not starts_at_first_binlog([Path(f) for f in found]):
            raise ValueError(
                f"node {node}: its binlogs do not begin with the first one (purged?), so transaction "
                "ranks would not match an earlier sync's; merge with `binlake merge` and sync its output"
            )
    return [MergedPartition(files, node_names(nodes))]


def read_merged(options: dict[str, str], part: MergedPartition) -> Iterator[Any]:
    """The merged change log as Arrow batches (see the module docstring)."""
    from binlake.globalbinlog.changelog import global_row_changes
    from binlake.schema import SchemaHistory

    schema = SchemaHistory.open(options["schema"]) if options.get("schema") else None
    source = options.get("source", options["path"])
    view = _logical_view(options)
    # DDL only where logical names collapse each shard's copy into one (else N copies of an ALTER)
    changes = global_row_changes(
        merged(options, part, view), source=source, schema=schema, ddl=view is not None
    )
    trim = read_trim(options)
    yield from trim.batches(to_batches(changes, trim=trim))


def merged(options: dict[str, str], part: MergedPartition, view: Any = None) -> Iterator[Any]:
    """The merged transactions, a step at a time (memory: what the merge holds back, not the whole)."""
    from binlake.globalbinlog.merge import IncrementalMerge

    final = options.get("final", "false").lower() == "true"
    nodes = [[Path(f) for f in files] for files in part.nodes]
    run = IncrementalMerge.start(nodes, part.names, view=view)
    while True:
        yield from run.step(STEP, final=final)
        if all(run.ended):
            return


STEP = 1000  # transactions read per node and step


def _logical_view(options: dict[str, str]) -> Any:
    """Logical names (``logicalMap``, ``logicalNames``), or None: physical names as written."""
    mapping, derive = options.get("logicalmap"), options.get("logicalnames")
    if mapping is None and derive is None:
        return None
    from binlake.globalbinlog.logical import LogicalNames, LogicalView

    if derive not in (None, "polardbx"):
        raise ValueError(f"option logicalNames: polardbx is the one naming rule known, not {derive!r}")
    return LogicalView(LogicalNames.load(mapping, derive=derive == "polardbx"))
