"""The CLI end to end, as a DBA runs it, in one run on the same files:

- ``binlake dump --format text`` vs ``mariadb-binlog --base64-output=decode-rows -vv`` (TZ=UTC) on a
  series written by a private MariaDB (benchmarks/bench_binlog.py, cached under out/bench);
- ``binlake dump --format json``, ``changes``, ``sql``, ``sql --flashback`` and ``stats`` on a generated
  MySQL 8 series (``binlake generate``: every column type, full metadata, JSON, DDL), beside plain
  decoding of the same files with a schema history (what every command costs at least).

    python benchmarks/cli.py [--mariadb-mb 10] [--mysql8-mb 10] [--repeat 1] [--before DIR] [--pure]

Each command runs as a subprocess writing to /dev/null; prints wall seconds, CPU seconds (user+sys
of the child) and MB/s of binlog by CPU time (the machine may be shared: CPU is the steadier figure).
The library path (``binlake.txn`` transactions with their row images) is measured beside plain
decoding. ``--before DIR``: also run every command with ``DIR`` (the ``src`` of an earlier checkout,
e.g. ``git archive HEAD~3 src | tar -x -C /tmp/before``) first on PYTHONPATH, interleaved with the
current tree, and print both: before/after figures of one run on one machine. ``--pure``: also run
every command with ``BINLAKE_PURE=1`` (the compiled row decoder off), interleaved, and print the ratio.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binlog import ensure_binlog  # noqa: E402
from decode import mysql8_series  # noqa: E402

BINLAKE = [sys.executable, "-m", "binlake.cli"]
DECODE_ONLY = [
    sys.executable,
    "-c",
    "import sys\n"
    "from binlake.cli.common import SchemaOptions\n"
    "from binlake.reader import BinlogReader\n"
    "tracker = SchemaOptions().tracker()\n"
    "for f in sys.argv[1:]:\n"
    "    for ev in BinlogReader(f, observers=[tracker]): pass\n",
]
TRANSACTIONS = [
    sys.executable,
    "-c",
    "import sys\n"
    "from binlake.cli.common import SchemaOptions\n"
    "from binlake.reader import BinlogReader\n"
    "from binlake.txn import iter_transactions\n"
    "tracker = SchemaOptions().tracker()\n"
    "events = ((seq, ev) for seq, f in enumerate(sys.argv[1:]) for ev in BinlogReader(f, observers=[tracker]))\n"
    "for t in iter_transactions(events): pass\n",
]


def timed(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, cpu) seconds of the best of ``repeat`` runs, output to /dev/null."""
    best: tuple[float, float] | None = None
    for _ in range(max(repeat, 1)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = (wall, cpu) if best is None or cpu < best[1] else best
    assert best is not None
    return best


# issue #18's goals, MB/s of binlog per core (dump text's goal is a ratio, printed beside it)
GOALS = {
    "binlake dump --format json": 15.0,
    "binlake sql": 20.0,
    "binlake sql --flashback": 20.0,
    "binlake stats": 20.0,
}


def report(name: str, mb: float, wall: float, cpu: float) -> None:
    goal = GOALS.get(name.split(" [")[0])
    aim = f"  (goal >= {goal:.0f})" if goal else ""
    print(f"{name:<44} {wall:>7.2f} s wall {cpu:>7.2f} s cpu {mb / cpu:>7.1f} MB/s{aim}", flush=True)


def compile_bytecode(*src_dirs: str) -> None:
    """Write the ``.pyc`` files of the trees measured: with PYTHONDONTWRITEBYTECODE set (as in
    some shells and CI jobs) none is written, and every command would compile each module it
    imports from source (about 0.05 s of its start-up), which an installed package never does."""
    for d in src_dirs:
        compileall.compile_dir(d, quiet=1)


class Trees:
    """The source trees to run: the current one (PYTHONPATH as given) and optionally a 'before'."""

    def __init__(self, before: str | None, pure: bool = False) -> None:
        here = os.environ.get("PYTHONPATH", "")
        self.envs: list[tuple[str, dict[str, str]]] = []
        if before:
            self.envs.append(("before", {**os.environ, "PYTHONPATH": os.pathsep.join([before, here])}))
        if pure:  # the same tree with the compiled row decoder switched off
            self.envs.append(("pure", {**os.environ, "BINLAKE_PURE": "1"}))
        now = {k: v for k, v in os.environ.items() if k != "BINLAKE_PURE"}
        self.envs.append(("compiled" if pure else "after" if before else "", now))

    def run(self, name: str, cmd: list[str], mb: float, repeat: int) -> dict[str, float]:
        cpus = {}
        for tag, env in self.envs:
            wall, cpu = timed(cmd, repeat, env)
            report(f"{name} [{tag}]" if tag else name, mb, wall, cpu)
            cpus[tag] = cpu
        if "pure" in cpus:
            print(f"{'  pure / compiled':<44} {cpus['pure'] / cpus['compiled']:>7.2f}x cpu", flush=True)
        return cpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mariadb-mb", type=int, default=10, help="MariaDB series size (0: skip)")
    ap.add_argument("--mysql8-mb", type=int, default=10, help="generated MySQL 8 series size (0: skip)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs of each command")
    ap.add_argument("--before", help="src directory of an earlier tree to run too (before/after)")
    ap.add_argument("--pure", action="store_true", help="also run each command with BINLAKE_PURE=1")
    args = ap.parse_args()
    trees = Trees(args.before, args.pure)
    import binlake

    compile_bytecode(
        str(Path(binlake.__file__).resolve().parents[1]), *([args.before] if args.before else [])
    )
    if args.mariadb_mb:
        files = [str(f) for f in ensure_binlog(args.mariadb_mb)]
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"MariaDB series: {len(files)} file(s), {mb:.1f} MB")
        ours = trees.run(
            "binlake dump --format text", [*BINLAKE, "dump", "--format", "text", *files], mb, args.repeat
        )
        trees.run("plain decoding + schema history (floor)", [*DECODE_ONLY, *files], mb, args.repeat)
        exe = shutil.which("mariadb-binlog")
        if exe:
            env = {**os.environ, "TZ": "UTC"}
            theirs = timed([exe, "--base64-output=decode-rows", "-vv", *files], args.repeat, env)
            report("mariadb-binlog --base64-output=decode-rows -vv", mb, *theirs)
            for tag, cpu in ours.items():
                label = f"dump text / mariadb-binlog{f' [{tag}]' if tag else ''}"
                print(f"{label:<44} {cpu / theirs[1]:>7.1f}x cpu  (goal <= 1.5x)")
    if args.mysql8_mb:
        files = [str(f) for f in mysql8_series(args.mysql8_mb)]
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"generated MySQL 8 series: {len(files)} file(s), {mb:.1f} MB")
        plain = trees.run("plain decoding + schema history (floor)", [*DECODE_ONLY, *files], mb, args.repeat)
        txn = trees.run(
            "library: binlake.txn transactions + row images", [*TRANSACTIONS, *files], mb, args.repeat
        )
        for tag, cpu in txn.items():
            label = f"txn / plain decoding{f' [{tag}]' if tag else ''}"
            print(f"{label:<44} {cpu / plain[tag]:>7.2f}x cpu  (goal <= 1.3x)")
        for name, extra in (
            ("binlake dump --format json", ["dump", "--format", "json"]),
            ("binlake changes", ["changes"]),
            ("binlake dump --format text", ["dump", "--format", "text"]),
            ("binlake sql", ["sql"]),
            ("binlake sql --flashback", ["sql", "--flashback"]),
            ("binlake stats", ["stats"]),
        ):
            trees.run(name, [*BINLAKE, *extra, *files], mb, args.repeat)


if __name__ == "__main__":
    main()
