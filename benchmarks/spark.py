"""The Spark pipeline's throughput: decode-only vs the change log vs the full sync into Delta, and
scaling from local[1] to local[2], and the memory each Python worker needs.

    python benchmarks/spark.py [--size-mb 1000] [--file-mb 1100]

A generated MySQL 8 series (cached under out/bench; by default ONE file of the whole size, so a 1 GB
file is what the workers split) is read by (1) the plain decoder in one process, (2) the `binlog`
data source counting change-log rows on local[1] and local[2], (3) `binlake sync` into a fresh Delta
directory. Prints MB/s, the pipeline's overhead over plain decoding, the local[2] / local[1] ratio,
and the peak resident memory of the largest Spark Python worker and of the JVM, sampled from /proc.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path("out/bench")


def series(size_mb: int, file_mb: int) -> Path:
    out = ROOT / f"series-{size_mb}mb-{file_mb}mb-files"
    if not (out / "binlog.index").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "binlake.cli",
                "generate",
                str(out),
                "--size",
                f"{size_mb}MB",
                "--max-file-size",
                f"{file_mb}MB",
            ],
            check=True,
        )
    return out


PEAKS: dict[str, float] = {}


def _proc_tree(root: int) -> list[int]:
    """Every live descendant of `root` (Spark's Python workers are forked by its JVM's daemon)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss_mb(pid: int) -> tuple[str, float]:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "", 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return Path(cmd).name, int(line.split()[1]) / 1024
    return "", 0.0


def _sample(root: int, done: threading.Event) -> None:
    """Record each process kind's peak RSS (VmHWM) below `root` until `done`."""
    while not done.wait(0.5):
        for pid in _proc_tree(root)[1:]:
            name, mb = _rss_mb(pid)
            kind = "jvm" if name == "java" else "python worker" if name.startswith("python") else ""
            if kind:
                PEAKS[kind] = max(PEAKS.get(kind, 0.0), mb)


def child(code: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    done = threading.Event()
    sampler = threading.Thread(target=_sample, args=(proc.pid, done), daemon=True)
    sampler.start()
    if proc.wait() != 0:
        raise SystemExit(f"benchmark step failed: {code}")
    done.set()
    sampler.join()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--file-mb", type=int, default=1100, help="largest file of the series")
    args = ap.parse_args()
    src = series(args.size_mb, args.file_mb)
    mb = sum(f.stat().st_size for f in src.glob("binlog.0*")) / 1e6
    decode = child(
        f"from binlake.series import BinlogSeries\nfor _ in BinlogSeries.open({str(src)!r}).events(): pass"
    )
    rows = child(
        "from binlake.series import BinlogSeries; from binlake.spark.changelog import file_changes\n"
        f"for f in BinlogSeries.open({str(src)!r}).files:\n"
        "    for _ in file_changes(f): pass"
    )
    arrow = child(
        "from binlake.series import BinlogSeries; from binlake.spark.changelog import file_changes, to_batches\n"
        f"for f in BinlogSeries.open({str(src)!r}).files:\n"
        "    for _ in to_batches(file_changes(f)): pass"
    )
    start = child(
        "from binlake.spark.session import spark_session; spark_session('local[1]').range(1).count()"
    )
    count = {}
    for n in (1, 2):
        count[n] = (
            child(
                "from binlake.spark.session import spark_session\n"
                f"spark_session('local[{n}]').read.format('binlog').load({str(src)!r}).count()"
            )
            - start
        )
    target = ROOT / "spark-delta"
    shutil.rmtree(target, ignore_errors=True)
    sync = (
        child(
            "from binlake.spark.session import spark_session; from binlake.spark.apply import sync_to_delta\n"
            f"sync_to_delta(spark_session('local[2]'), {str(src)!r}, {str(target)!r})"
        )
        - start
    )
    files = sorted(src.glob("binlog.0*"))
    print(
        f"series: {mb:.0f} MB in {len(files)} file(s), largest {max(f.stat().st_size for f in files) / 1e6:.0f} MB ({src})"
    )
    print(f"plain decoding, 1 process:          {decode:7.1f} s  {mb / decode:6.1f} MB/s")
    print(
        f"change-log rows, 1 process:         {rows:7.1f} s  {mb / rows:6.1f} MB/s (+ grouping, JSON images)"
    )
    print(f"change-log Arrow, 1 process:        {arrow:7.1f} s  {mb / arrow:6.1f} MB/s (+ Arrow batches)")
    print(
        f"change log on Spark local[1]:       {count[1]:7.1f} s  {mb / count[1]:6.1f} MB/s (Spark start-up {start:.1f} s excluded)"
    )
    print(
        f"change log on Spark local[2]:       {count[2]:7.1f} s  {mb / count[2]:6.1f} MB/s; local[2]/local[1] = {count[1] / count[2]:.2f}x"
    )
    print(
        f"full sync into Delta, local[2]:     {sync:7.1f} s  {mb / sync:6.1f} MB/s; overhead over decoding x{sync / decode * 2:.2f} per core"
    )
    print(
        f"peak RSS in Spark steps: largest Python worker {PEAKS.get('python worker', 0):.0f} MB, "
        f"JVM {PEAKS.get('jvm', 0):.0f} MB (the driver's own Python not counted)"
    )


if __name__ == "__main__":
    main()
