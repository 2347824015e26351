"""Issue #17 item 11: held-back transactions kept as references into the node binlogs (bounded
memory, small checkpoints), and ``binlake merge --follow`` over growing node directories, killed
and restarted, writing the bytes of one run."""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from binlake.events.control import Xid
from binlake.events.rows import Rows
from binlake.events.types import EventType
from binlake.globalbinlog.merge import GlobalTxn, IncrementalMerge, merge_nodes
from binlake.globalbinlog.output import write_binlog
from binlake.series import BinlogSeries
from binlake.shardsim import ScriptedCluster, simulate

BIG = 40_000


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.name.startswith("binlog.")}


def test_spilled_pieces_write_the_same_bytes(tmp_path: Path) -> None:
    res = simulate(tmp_path / "nodes", seed=21, transactions=200, nodes=3, pending_at_end=0)
    write_binlog(merge_nodes(res.node_files)[0], tmp_path / "a", max_file_size=20_000)
    spilled, _ = merge_nodes(res.node_files, chunk=7, spill=True)
    write_binlog(spilled, tmp_path / "b", max_file_size=20_000)
    assert _snapshot(tmp_path / "a") == _snapshot(tmp_path / "b")


def _cluster_with_a_big_held_back_transaction(root: Path) -> list[list[Path]]:
    """Node 0 commits a 40,000-row local transaction; node 1 says nothing (no heartbeat): the
    transaction is held back until node 1 is known to be done."""
    c = ScriptedCluster(root, nodes=2)
    c.two_phase_commit(c.txn("GLOBAL_TSO", [(0, "G0", {1: -5}), (1, "G0", {2: 5})]))
    c.tick()
    c._anon_gtid(0)
    c._q(0, "BEGIN")
    for k in range(0, BIG, 1000):
        c._rows(0, c.table, [(100_000 + i, 0, i) for i in range(k, k + 1000)])
    c._ev(0, EventType.XID, Xid(99))
    return c.finish().node_files


def _held_back(nodes: list[list[Path]], spill: bool) -> tuple[IncrementalMerge, list[GlobalTxn], int, int]:
    gc.collect()
    tracemalloc.start()
    run = IncrementalMerge.start(nodes, spill=spill)
    out = run.step(1_000_000)
    ck = run.checkpoint()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return run, out, len(ck), peak


def test_a_large_held_back_transaction_is_not_in_memory_nor_in_the_checkpoint(tmp_path: Path) -> None:
    nodes = _cluster_with_a_big_held_back_transaction(tmp_path / "nodes")
    kept, _, kept_size, kept_peak = _held_back(nodes, spill=False)
    run, first, size, peak = _held_back(nodes, spill=True)
    assert kept.merger.held_back == run.merger.held_back == 1
    assert kept_size > 1_000_000 and size < 5_000  # the rows pickled vs. where they are
    # one rows event at a time, not 40,000 rows (held in memory, even as their undecoded bytes)
    assert peak < kept_peak / 4 and peak < 3_000_000
    # restored and finished, it writes the bytes of a batch run, all 40,000 rows
    again = IncrementalMerge.restore(nodes, run.checkpoint())
    out = first + again.step(1_000_000, final=True)
    files = write_binlog(out, tmp_path / "spilled")
    write_binlog(merge_nodes(nodes)[0], tmp_path / "batch")
    assert _snapshot(tmp_path / "spilled") == _snapshot(tmp_path / "batch")
    rows = sum(len(e.body.rows) for _, e in BinlogSeries.open(*files).events() if isinstance(e.body, Rows))
    assert rows == BIG + 2


# ---- --follow --------------------------------------------------------------------------------------


class Feeder:
    """Copies node binlogs into live directories a few bytes at a time, as ``binlake mirror`` would
    (a file is named in the index once it exists; its last event is often cut)."""

    def __init__(self, nodes: list[list[Path]], live: Path, rng: random.Random) -> None:
        self.rng = rng
        self.todo = []
        for files in nodes:
            d = live / files[0].parent.name
            d.mkdir(parents=True)
            self.todo.append([(f, d / f.name, f.read_bytes()) for f in files])
        self.at = [[0] * len(files) for files in nodes]

    @property
    def done(self) -> bool:
        return all(
            a == len(data)
            for node, at in zip(self.todo, self.at, strict=True)
            for (_, _, data), a in zip(node, at, strict=True)
        )

    def feed(self, size: int) -> None:
        for n, node in enumerate(self.todo):
            for i, (_, dst, data) in enumerate(node):
                if self.at[n][i] == len(data):
                    continue
                if self.at[n][i] == 0:
                    dst.touch()
                    with open(dst.parent / "binlog.index", "a") as ix:
                        ix.write(f"./{dst.name}\n")
                step = self.rng.randint(1, size)
                with open(dst, "ab") as f:
                    f.write(data[self.at[n][i] : self.at[n][i] + step])
                self.at[n][i] = min(len(data), self.at[n][i] + step)
                break


def _follow(nodes: list[Path], out: Path, idle: float) -> subprocess.Popen[bytes]:
    args = [a for d in nodes for a in ("--node", str(d))]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    return subprocess.Popen(
        [sys.executable, "-m", "binlake", "merge", "--follow", "--poll", "0.05", "--idle-exit", str(idle),
         "--max-file-size", "15000", *args, "-o", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def test_follow_over_growing_nodes_killed_and_restarted_writes_one_runs_bytes(tmp_path: Path) -> None:
    res = simulate(tmp_path / "src", seed=4, transactions=150, nodes=3, pending_at_end=0, heartbeat_every=10)
    from binlake.cli import main

    # what one merge of the complete nodes writes, holding back what a node may still precede
    nodes = [a for files in res.node_files for a in ("--node", str(files[0].parent))]
    assert main(["merge", "--max-file-size", "15000", *nodes, "-o", str(tmp_path / "once")]) == 0

    rng = random.Random(7)
    live = tmp_path / "live"
    feeder = Feeder(res.node_files, live, rng)
    feeder.feed(64)  # every node has begun its first file
    dirs = [live / f[0].parent.name for f in res.node_files]
    out = tmp_path / "followed"
    proc = _follow(dirs, out, idle=30)
    kills, kill_at = 0, time.monotonic() + rng.uniform(0.5, 1.2)
    while not feeder.done:
        feeder.feed(600)
        time.sleep(rng.uniform(0.005, 0.03))
        if kills < 3 and time.monotonic() > kill_at:  # SIGKILL wherever it is: reading, writing
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            kill_at = time.monotonic() + rng.uniform(0.5, 1.2)
            proc = _follow(dirs, out, idle=30)
    proc.send_signal(signal.SIGKILL)  # and a last restart that sees everything, then goes idle
    proc.wait()
    proc = _follow(dirs, out, idle=1)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()
    assert kills == 3
    assert _snapshot(out) == _snapshot(tmp_path / "once")
    assert (out / "merge.checkpoint").stat().st_size < 50_000
