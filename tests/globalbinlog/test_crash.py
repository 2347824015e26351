"""Issue #17 item 5: `binlake merge` killed (SIGKILL) anywhere while it writes the global binlog —
inside a transaction, inside a new file's header, between a file and its index line, inside a
ROTATE — and run again writes exactly the bytes of one uninterrupted run: no transaction lost or
twice, XIDs without gaps or repeats, no extra file per rerun; mariadb-binlog reads every file."""

from __future__ import annotations

import builtins
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.events.control import Xid
from binlake.reader import read_events
from binlake.shardsim import simulate

MAX_FILE = "15000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """A simulated 4-node cluster, and its global binlog written by one uninterrupted run."""
    root = tmp_path_factory.mktemp("crash")
    res = simulate(root / "nodes", seed=11, transactions=200, nodes=4, pending_at_end=0)
    nodes = [a for files in res.node_files for a in ("--node", str(files[0].parent))]
    assert _merge(nodes, root / "clean") == 0
    return nodes, root / "clean"


def _merge(nodes: list[str], out: Path) -> int:
    from binlake.cli import main

    return main(["merge", "--final", "--max-file-size", MAX_FILE, *nodes, "-o", str(out)])


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir())}


class _Crashing:
    """A file that lets ``left[0]`` more bytes through, then writes part of the next write and kills
    the process (flushed or not: what a real crash leaves depends on what reached the OS)."""

    def __init__(self, f: Any, left: list[int], flush: bool) -> None:
        self._f, self._left, self._flush = f, left, flush

    def write(self, data: bytes | str) -> int:
        if len(data) > self._left[0]:
            self._f.write(data[: self._left[0]])
            if self._flush:
                self._f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        self._left[0] -= len(data)
        return int(self._f.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _Crashing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def _killed_after(nodes: list[str], out: Path, budget: int, flush: bool) -> None:
    """Run the merge in a child process that is SIGKILLed once the writer wrote ``budget`` bytes
    (binlog files and index together)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            import binlake.writer

            left = [budget]

            def crashing_open(path: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
                f = builtins.open(path, mode, *a, **k)
                return f if mode in ("r", "rb") else _Crashing(f, left, flush)

            binlake.writer.open = crashing_open  # type: ignore[attr-defined]
            with open(os.devnull, "w") as sys.stdout, open(os.devnull, "w") as sys.stderr:
                _merge(nodes, out)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"not killed at {budget}"


def _kill_points(clean: Path) -> list[int]:
    """Byte counts of the writer's output stream to die at: around every new file (its header, its
    index line, the ROTATE before it) and a spread of points inside transactions."""
    files = sorted(clean.glob("binlog.0*"))
    header = next(e for e in read_events(files[0]) if e.type_name == "PREVIOUS_GTIDS").end_offset
    index_line = len("./binlog.000001\n")
    total = sum(f.stat().st_size for f in files) + index_line * len(files)
    points: set[int] = set()
    at = 0
    for f in files:
        points.update(at + d for d in (-1, 0, 4, header - 1, header + 5, header + index_line + 1))
        at += f.stat().st_size + index_line
    points.update(random.Random(17).sample(range(total), 8))
    return sorted(p for p in points if 0 <= p < total)


def test_a_merge_killed_at_any_byte_reruns_to_the_bytes_of_one_run(
    cluster: tuple[list[str], Path], tmp_path: Path
) -> None:
    nodes, clean = cluster
    expected = _snapshot(clean)
    assert len([n for n in expected if n.startswith("binlog.0")]) >= 3
    for i, budget in enumerate(_kill_points(clean)):
        out = tmp_path / f"k{i}"
        _killed_after(nodes, out, budget, flush=i % 2 == 0)
        assert _merge(nodes, out) == 0
        assert _snapshot(out) == expected, f"killed after {budget} bytes"
        shutil.rmtree(out)


def test_killed_twice_before_finishing(cluster: tuple[list[str], Path], tmp_path: Path) -> None:
    """A restart killed again (also while it recovers) still ends at the bytes of one run."""
    nodes, clean = cluster
    out = tmp_path / "g"
    for budget in (20_000, 5, 12_000, 3, 9_000):  # each less than what is left to write
        _killed_after(nodes, out, budget, flush=True)
    assert _merge(nodes, out) == 0
    assert _snapshot(out) == _snapshot(clean)


def test_real_kills_at_random_times(cluster: tuple[list[str], Path], tmp_path: Path) -> None:
    """The real command, SIGKILLed from outside at random moments, over and over on one output."""
    nodes, clean = cluster
    out = tmp_path / "g"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "binlake", "merge", "--final", "--max-file-size", MAX_FILE, *nodes]
    rng = random.Random(5)
    for _ in range(6):
        p = subprocess.Popen([*cmd, "-o", str(out)], env=env, stdout=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.5))
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert subprocess.run([*cmd, "-o", str(out)], env=env, capture_output=True).returncode == 0
    assert _snapshot(out) == _snapshot(clean)


def test_a_rerun_adds_nothing_and_xids_have_no_gaps(cluster: tuple[list[str], Path], tmp_path: Path) -> None:
    """Rerunning a finished merge leaves its bytes alone (before: a ROTATE and an empty file per
    rerun); the XIDs of the series are 1, 2, 3, ... across files."""
    nodes, clean = cluster
    out = tmp_path / "g"
    shutil.copytree(clean, out)
    assert _merge(nodes, out) == 0 and _merge(nodes, out) == 0
    assert _snapshot(out) == _snapshot(clean)
    files = sorted(clean.glob("binlog.0*"))
    xids = [e.body.xid for f in files for e in read_events(f) if isinstance(e.body, Xid)]
    assert xids == list(range(1, len(xids) + 1)) and len(xids) > 100


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="mariadb-binlog is not installed")
def test_mariadb_binlog_reads_every_file_of_a_restarted_merge(
    cluster: tuple[list[str], Path], tmp_path: Path
) -> None:
    nodes, clean = cluster
    out = tmp_path / "g"
    _killed_after(nodes, out, 33_333, flush=False)
    assert _merge(nodes, out) == 0
    files = sorted(out.glob("binlog.0*"))
    run = subprocess.run(["mariadb-binlog", *map(str, files)], capture_output=True, text=True)
    assert run.returncode == 0 and not run.stderr, run.stderr
    xids = sum(1 for f in files for e in read_events(f) if isinstance(e.body, Xid))
    assert run.stdout.count("\tXid = ") == xids
    assert run.stdout.count("Rotate to binlog.") == len(files) - 1
