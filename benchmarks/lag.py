"""End-to-end lag: how long after a commit on the source its row is visible in the Delta target,
with ``binlake mirror`` (a replica writing the server's files) feeding ``binlake sync --stream``.

    python benchmarks/lag.py [--rate 100] [--seconds 60] [--interval "1 second"] [--master local[2]]

A private MariaDB runs a workload of ``--rate`` single-row transactions a second; every half second
a probe row records its commit time. The probe's lag is split where it can be measured from
outside: *mirror* (commit -> its bytes in the mirrored file: the server's dump and the replica)
and *apply* (mirrored -> visible in Delta: waiting for the trigger, the Spark job, the Delta
commit). Prints p50/p90/p99/max of each, in seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from binlake.sandbox import PrivateMariaDB

ROOT = Path("out/bench/lag")


def quantiles(xs: list[float]) -> str:
    if not xs:
        return "no samples"
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=100, method="inclusive") if len(xs) > 1 else xs * 99
    return f"p50 {q[49]:6.2f}  p90 {q[89]:6.2f}  p99 {q[98]:6.2f}  max {xs[-1]:6.2f}  (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=100.0, help="workload transactions per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", default="1 second", help="sync --interval (the trigger)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    shutil.rmtree(ROOT, ignore_errors=True)
    mirror_dir, lake = ROOT / "mirror", ROOT / "lake"
    binlake = [sys.executable, "-m", "binlake"]
    with PrivateMariaDB(ROOT / "server") as db:
        db.execute(
            "CREATE DATABASE lag",
            "CREATE TABLE lag.probe (id INT PRIMARY KEY, sent DOUBLE)",
            "CREATE TABLE lag.work (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40))",
        )
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        logs = [open(ROOT / name, "w") for name in ("mirror.log", "sync.log")]
        mirror = subprocess.Popen(
            [*binlake, "mirror", "--socket", db.socket, "--user", "root", "--no-ssl", "--to", str(mirror_dir),
             "--start-file", db.binlog_files()[0].name],
            stdout=logs[0], stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        while not any(mirror_dir.glob("mariadb-bin.0*")):
            time.sleep(0.1)
        sync = subprocess.Popen(
            [*binlake, "sync", str(mirror_dir), "--to", f"delta:{lake}", "--stream", "--interval", args.interval,
             "--master", args.master],
            stdout=logs[1], stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        stop = threading.Event()
        sent: dict[int, tuple[float, str, int]] = {}  # probe -> (commit time, binlog file, end position)

        def workload() -> None:
            conn = db.connect("lag")
            cur = conn.cursor()
            n, start, probe = 0, time.monotonic(), 0
            while not stop.is_set():
                n += 1
                cur.execute("INSERT INTO work (v) VALUES (%s)", (f"row {n}",))
                if n % max(1, int(args.rate / 2)) == 0:
                    probe += 1
                    cur.execute("INSERT INTO probe VALUES (%s, %s)", (probe, time.time()))
                    t = time.time()
                    cur.execute("SHOW MASTER STATUS")
                    f, pos = cur.fetchone()[:2]
                    sent[probe] = (t, f, int(pos))
                delay = start + n / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            conn.close()

        mirrored: dict[int, float] = {}
        visible: dict[int, float] = {}

        def watch() -> None:
            from deltalake import DeltaTable

            path = None
            while not stop.is_set() or len(visible) < len(sent):
                now = time.time()
                for p, (_, f, pos) in list(sent.items()):
                    if (
                        p not in mirrored
                        and (mirror_dir / f).exists()
                        and (mirror_dir / f).stat().st_size >= pos
                    ):
                        mirrored[p] = now
                if path is None:
                    path = next((d for d in lake.glob("*probe*") if (d / "_delta_log").exists()), None)
                if path is not None:
                    try:
                        ids = DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
                    except Exception:
                        ids = []
                    for p in ids:
                        visible.setdefault(p, time.time())
                if stop.is_set() and time.time() > deadline + 60:
                    break
                time.sleep(0.05)

        deadline = time.time() + args.seconds
        threads = [threading.Thread(target=workload), threading.Thread(target=watch)]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        for proc in (sync, mirror):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
        warm = 10.0  # the first seconds include Spark's start-up
        first = min((t for t, _, _ in sent.values()), default=0) + warm
        total = [visible[p] - t for p, (t, _, _) in sent.items() if p in visible and t >= first]
        mirror_lag = [mirrored[p] - t for p, (t, _, _) in sent.items() if p in mirrored and t >= first]
        apply_lag = [visible[p] - mirrored[p] for p in visible if p in mirrored and sent[p][0] >= first]
        missing = [p for p in sent if p not in visible]
        print(f"workload {args.rate:g} txn/s for {args.seconds:g} s, trigger {args.interval}, {args.master}; "
              f"probes {len(sent)}, not visible at the end {len(missing)}; first {warm:g} s left out")  # fmt: skip
        print(f"commit -> visible in Delta  {quantiles(total)}")
        print(f"commit -> mirrored          {quantiles(mirror_lag)}")
        print(f"mirrored -> visible         {quantiles(apply_lag)}")


if __name__ == "__main__":
    main()
