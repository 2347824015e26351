"""``binlake merge --follow``: merge node directories that keep growing (each fed by ``binlake
mirror``) into the global binlog, continuously (issue #17 item 11).

Each round reads what the nodes wrote since the last one, writes what the nodes' watermarks now
vouch for (an idle node holds the merge back until its next heartbeat transaction, design §2.9),
makes it durable, then saves a checkpoint: the merge's state with held-back pieces as references
into the node binlogs (``spill.py``), never their rows. Killed at any point and started again, it
continues from the checkpoint; the output is cut back to its last complete transaction and what
the checkpoint re-emits below it is skipped — the bytes of one uninterrupted run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from binlake.globalbinlog.merge import IncrementalMerge, View
from binlake.globalbinlog.output import GLOBAL_UUID, GlobalBinlogWriter

CHECKPOINT = "merge.checkpoint"


@dataclass
class FollowStats:
    rounds: int = 0
    written: int = 0
    watermark: str = ""


def save_checkpoint(path: Path, data: bytes) -> None:
    """Atomically: a crash leaves the old checkpoint or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def follow(
    list_nodes: Callable[[], list[list[Path]]],
    output: Path,
    names: list[str],
    *,
    require_fde: bool = True,
    view: View | None = None,
    max_file_size: int | None = 256 << 20,
    per_round: int = 10_000,
    poll: float = 0.5,
    idle_exit: float = 0.0,
    report: Callable[[FollowStats], None] | None = None,
    server_uuid: str = GLOBAL_UUID,
) -> FollowStats:
    """Follow the nodes until none has grown for ``idle_exit`` seconds (0: forever).
    ``list_nodes`` lists each node's files now (new files appear as the nodes rotate)."""
    output.mkdir(parents=True, exist_ok=True)
    ck = output / CHECKPOINT
    writer = GlobalBinlogWriter(output, max_file_size=max_file_size, server_uuid=server_uuid)
    if ck.exists():
        run = IncrementalMerge.restore(list_nodes(), ck.read_bytes())
    else:
        run = IncrementalMerge.start(list_nodes(), names, require_fde=require_fde, view=view, spill=True)
    stats = FollowStats()
    idle_since = time.monotonic()
    try:
        while True:
            run.nodes = list_nodes()
            before = list(run.positions)
            for g in run.step(per_round):
                stats.written += writer.write(g)
            writer.flush()  # the output first: a checkpoint never runs ahead of it
            save_checkpoint(ck, run.checkpoint())
            stats.rounds += 1
            stats.watermark = run.merger.watermark
            if report:
                report(stats)
            if run.positions != before or not all(run.ended):
                idle_since = time.monotonic()
            elif idle_exit and time.monotonic() - idle_since >= idle_exit:
                return stats
            else:
                time.sleep(poll)
    finally:
        writer.close()
