"""End-to-end lag: how long after a commit on the source its row is visible in the Delta target,
with ``binlake mirror`` (a replica writing the server's files) feeding ``binlake sync --stream``.

    python benchmarks/lag.py [--rate 100] [--seconds 60] [--interval "1 second"] [--master local[2]]

A private MariaDB runs a workload of ``--rate`` single-row transactions a second; every half second
a probe row records its commit time. The probe's lag is split where it can be measured from
outside: *mirror* (commit -> its bytes in the mirrored file: the server's dump and the replica)
and *apply* (mirrored -> visible in Delta: waiting for the trigger, the Spark job, the Delta
commit). Prints p50/p90/p99/max of each, in seconds, then where the apply time goes: the sync
runs with ``$BINLAKE_TRACE`` (``binlake.spark.trace``), so each micro-batch's steps, its Spark jobs and
Spark's progress of each trigger are read back; a probe's apply lag is split into the wait for the
trigger that reads it and that trigger's run. Also the sync process's CPU time (the JVM and its
Python workers: every process of its session) and the machine's load (``uptime``).
"""

from __future__ import annotations

import argparse
import json
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


def session_cpu(sid: int) -> float:
    """CPU seconds used by every live process of session ``sid`` (and the children they reaped)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after the name: state ppid pgrp session ...
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def step(name: str) -> str:
    """A traced step's name without its table (``rows lag.work`` -> ``rows``)."""
    for prefix in ("rows ", "delta merge "):
        if name.startswith(prefix):
            return prefix.strip()
    return name


def breakdown(trace: Path, first: float) -> tuple[list[tuple[float, float]], list[str]]:
    """The traced micro-batches after ``first``: their (start, end) times, and lines saying where
    their time went."""
    batches, progress = [], []
    for line in trace.read_text().splitlines() if trace.exists() else []:
        r = json.loads(line)
        (batches if "batch" in r else progress).append(r)
    batches = [b for b in batches if b["start"] >= first]
    out = []
    if batches:
        out.append(f"micro-batches {len(batches)}: wall per batch {quantiles([b['wall'] for b in batches])}")
        steps: dict[str, list[float]] = {}
        for b in batches:
            per: dict[str, float] = {}
            for name, _, secs in b["spans"]:
                per[step(name)] = per.get(step(name), 0.0) + secs
            for name, secs in per.items():
                steps.setdefault(name, []).append(secs)
        for name, xs in sorted(steps.items(), key=lambda kv: -statistics.mean(kv[1])):
            out.append(f"  step {name:<18} mean {statistics.mean(xs):6.3f} s  in {len(xs)} batches")
        jobs = [len(b["jobs"]) for b in batches]
        out.append(f"  Spark jobs per batch: mean {statistics.mean(jobs):.1f}, max {max(jobs)}; "
                   f"tasks per batch mean {statistics.mean(sum(j[3] for j in b['jobs']) for b in batches):.0f}")  # fmt: skip
        per_job: dict[str, list[tuple[float, float, float]]] = {}
        for b in batches:
            for desc, _, secs, _, run, cpu in b["jobs"]:
                per_job.setdefault(step(str(desc)), []).append((secs, run, cpu))
        for name, xs in sorted(per_job.items(), key=lambda kv: -sum(x[0] for x in kv[1])):
            wall, run, cpu = (statistics.mean(x[i] for x in xs) for i in range(3))
            out.append(f"  jobs of {name:<16} {len(xs) / len(batches):4.1f} per batch, {wall:6.3f} s each "
                       f"(tasks ran {run:.3f} s, {cpu:.3f} s of it on a CPU)")  # fmt: skip
    durations: dict[str, list[float]] = {}
    for p in progress:
        for k, v in p["durationMs"].items():
            durations.setdefault(k, []).append(v / 1000)
    if durations:
        out.append("Spark's progress per trigger (mean s): " + ", ".join(
            f"{k} {statistics.mean(v):.3f}" for k, v in sorted(durations.items(), key=lambda kv: -statistics.mean(kv[1]))
        ))  # fmt: skip
    return [(b["start"], b["start"] + b["wall"]) for b in batches], out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=100.0, help="workload transactions per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", default="1 second", help="sync --interval (the trigger)")
    ap.add_argument("--reads", default="driver", choices=("driver", "tasks"), help="sync --reads")
    ap.add_argument(
        "--no-trace", action="store_true", help="the sync untraced (the tracer's own cost left out; no breakdown)"
    )
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
        trace = (ROOT / "trace.jsonl").absolute()
        sync_env = env if args.no_trace else {**env, "BINLAKE_TRACE": str(trace)}
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
             "--reads", args.reads, "--master", args.master],
            stdout=logs[1], stderr=subprocess.STDOUT, env=sync_env, start_new_session=True,
        )  # fmt: skip
        started = time.time()
        while not (lake / "_binlake_checkpoint" / "commits" / "0").exists():  # Spark is up: batch 0 ran
            if sync.poll() is not None or time.time() > started + 300:
                sys.exit(f"the sync did not start: see {ROOT / 'sync.log'}")
            time.sleep(0.2)
        print(f"sync up after {time.time() - started:.1f} s (Spark's start-up and the first batch, left out)")
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
        warm = 5.0  # the first seconds after the start-up: a backlog of the wait
        threads = [threading.Thread(target=workload), threading.Thread(target=watch)]
        loads = [load()]
        for t in threads:
            t.start()
        time.sleep(warm)
        cpu0, t0 = session_cpu(sync.pid), time.time()
        time.sleep(max(0.0, args.seconds - warm))
        cpu = (session_cpu(sync.pid) - cpu0) / max(1e-9, time.time() - t0)
        loads.append(load())
        stop.set()
        for t in threads:
            t.join()
        for proc in (sync, mirror):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
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
        spans, lines = breakdown(trace, first)
        starts = sorted(a for a, _ in spans)
        wait, run = [], []
        for p in visible:
            if p in mirrored and sent[p][0] >= first:
                later = [a for a in starts if a >= mirrored[p]]
                if later and later[0] <= visible[p]:  # the batch that read it started then
                    wait.append(later[0] - mirrored[p])
                    run.append(visible[p] - later[0])
        print(f"  waiting for its batch     {quantiles(wait)}")
        print(f"  its batch until visible   {quantiles(run)}")
        for line in lines:
            print(line)
        print(
            f"sync CPU {cpu:.2f} cores (JVM + Python, after the first {warm:g} s); machine {loads[0]} -> {loads[1]}"
        )


if __name__ == "__main__":
    main()
