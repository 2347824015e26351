"""``binlake merge``: the binlogs of N data nodes into one global binlog ordered by commit TSO."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from binlake.cli.common import Command, Options, size_arg
from binlake.series import SeriesError, series_files

if TYPE_CHECKING:
    from binlake.globalbinlog.logical import LogicalView


@dataclass(frozen=True)
class MergeOptions(Options):
    node: tuple[str, ...]
    output: str
    jsonl: str | None = None
    max_file_size: int = 256 * 10**6
    require_fde: bool = True
    final: bool = False
    logical_map: str | None = None
    logical_names: str | None = None  # "polardbx": the PolarDB-X naming rule
    follow: bool = False
    poll: float = 0.5
    idle_exit: float = 0.0
    server_uuid: str | None = None


def cmd_merge(o: MergeOptions) -> int:
    from binlake.globalbinlog.merge import merge_nodes, node_names
    from binlake.globalbinlog.output import write_binlog, write_jsonl

    nodes = [series_files(d) for d in o.node]
    for d, files in zip(o.node, nodes, strict=True):
        if not files:
            raise SeriesError(f"no binlog files match {d}")
    view = logical_view(o)
    if o.follow:
        return cmd_follow(o, view)
    out, merger = merge_nodes(nodes, node_names(o.node), final=o.final, require_fde=o.require_fde, view=view)
    files = write_binlog(out, o.output, max_file_size=o.max_file_size, server_uuid=server_uuid(o))
    if o.jsonl:
        write_jsonl(out, o.jsonl)
    kinds = Counter(g.kind for g in out)
    print(
        f"merged {len(out)} transactions ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) "
        f"from {len(nodes)} nodes into {len(files)} file(s) under {o.output}"
    )
    if merger.held_back:
        print(
            f"held back: {merger.held_back} committed piece(s) a node may still precede (its binlog may grow): "
            "rerun when the nodes have written more (the rerun continues exactly), or give --final "
            "when every node's files are complete",
            file=sys.stderr,
        )
    if merger.pending:
        print(
            f"held back: {len(merger.pending)} prepared branch(es) never committed or rolled back "
            f"(everything that may follow them waits): "
            + ", ".join(f"{p.node}@{p.start[1]} {p.branch}" for p in merger.pending[:5]),
            file=sys.stderr,
        )
    if merger.dropped:
        late = ", ".join(s.name for s in merger.sorters if not s.complete_from_start)
        print(
            f"aligned start: {late} does not begin at its first binlog: {merger.dropped} piece(s) at or "
            f"below vtso {merger.start_floor()} left out (a branch of theirs on {late} may be missing)",
            file=sys.stderr,
        )
    if view is not None and view.ddl.collapsed:
        print(
            f"logical DDL: {view.ddl.collapsed} physical DDL(s) folded into their logical statement",
            file=sys.stderr,
        )
    orphans = [(s.name, orphan) for s in merger.sorters for orphan in s.orphans]
    if orphans:
        print(
            f"skipped {len(orphans)} XA COMMIT/ROLLBACK without their prepare in the input", file=sys.stderr
        )
    return 0


def cmd_follow(o: MergeOptions, view: LogicalView | None) -> int:
    from binlake.globalbinlog.follow import follow
    from binlake.globalbinlog.merge import node_names

    if o.final or o.jsonl:
        raise SeriesError("--follow runs until stopped: --final and --jsonl do not go with it")
    stats = follow(
        lambda: [series_files(d) for d in o.node],
        Path(o.output),
        node_names(o.node),
        require_fde=o.require_fde,
        view=view,
        max_file_size=o.max_file_size,
        poll=o.poll,
        idle_exit=o.idle_exit,
        server_uuid=server_uuid(o),
    )
    print(
        f"followed {len(o.node)} nodes for {stats.rounds} rounds: {stats.written} transactions written "
        f"under {o.output}, watermark {stats.watermark or '-'}"
    )
    return 0


def logical_view(o: MergeOptions) -> LogicalView | None:
    """Logical names (``--logical-map``, ``--logical-names``), or None: physical names as written."""
    from binlake.globalbinlog.logical import LogicalNames, LogicalView

    if o.logical_map is None and o.logical_names is None:
        return None
    return LogicalView(LogicalNames.load(o.logical_map, derive=o.logical_names == "polardbx"))


def server_uuid(o: MergeOptions) -> str:
    """The source id of the global binlog's GTIDs (checked: a replica compares them as UUIDs)."""
    import uuid

    from binlake.globalbinlog.output import GLOBAL_UUID

    if o.server_uuid is None:
        return GLOBAL_UUID
    try:
        return str(uuid.UUID(o.server_uuid))
    except ValueError:
        raise SeriesError(f"--server-uuid {o.server_uuid!r} is not a UUID") from None


def add_merge(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    m = sub.add_parser(
        "merge", help="merge the binlogs of sharded data nodes into one global binlog by commit TSO"
    )
    m.add_argument(
        "--node",
        action="append",
        required=True,
        help="a data node's binlogs: a directory, an index file, a file or a glob (repeat per node)",
    )
    m.add_argument("-o", "--output", required=True, help="directory of the global binlog series")
    m.add_argument("--jsonl", help="also write one JSON line per merged transaction here")
    m.add_argument("--max-file-size", type=size_arg, default="256MB", help="rotate output files at this size")
    m.add_argument(
        "--no-require-fde",
        dest="require_fde",
        action="store_false",
        default=True,
        help="node files may be fragments without a FORMAT_DESCRIPTION event (read as v4 events)",
    )
    m.add_argument(
        "--final",
        action="store_true",
        help="every node's files are complete (no node writes more): merge everything, hold nothing back",
    )
    m.add_argument(
        "--follow",
        action="store_true",
        help="keep merging as the nodes' directories grow (e.g. fed by binlake mirror); restartable: "
        "a checkpoint beside the output (merge.checkpoint) continues exactly",
    )
    m.add_argument("--poll", type=float, default=0.5, help="--follow: seconds between looks at idle nodes")
    m.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="--follow: stop when no node has grown for this long (default: never)",
    )
    m.add_argument(
        "--server-uuid",
        metavar="UUID",
        help="the source id of the GTIDs written (GTID UUID:1, UUID:2, ... one per transaction; "
        "default: a fixed binlake UUID); a series is always continued with the one it was written with",
    )
    m.add_argument(
        "--logical-map",
        metavar="FILE",
        help="show physical shard tables as logical ones: lines 'physical_db.table logical_db.table "
        "[drop=col,@N]' (globs; first match wins; see the README)",
    )
    m.add_argument(
        "--logical-names",
        choices=["polardbx"],
        help="derive logical names from the physical ones: PolarDB-X <db>_p<NNNNN> databases, "
        "<table>_<xxxx>[_<NNNNN>] tables, _drds_implicit_id_ dropped (after --logical-map's rules)",
    )
    m.set_defaults(handler=Command(MergeOptions, cmd_merge))
