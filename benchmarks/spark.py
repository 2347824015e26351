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
    """Run one step in a fresh interpreter; its output goes to out/bench/spark-step.log."""
    PEAKS.clear()
    log = ROOT / "spark-step.log"
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, done), daemon=True)
        sampler.start()
        rc = proc.wait()
        done.set()
        sampler.join()
    if rc != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
        raise SystemExit(f"benchmark step failed ({rc}): {code}\n{tail}")
    return time.perf_counter() - t0


def memory() -> str:
    return f"peak RSS: Python worker {PEAKS.get('python worker', 0):.0f} MB, JVM {PEAKS.get('jvm', 0):.0f} MB"


def say(label: str, seconds: float, mb: float, extra: str = "") -> None:
    print(f"{label:36s}{seconds:7.1f} s  {mb / seconds:6.1f} MB/s{extra}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--file-mb", type=int, default=1100, help="largest file of the series")
    args = ap.parse_args()
    src = series(args.size_mb, args.file_mb)
    files = sorted(src.glob("binlog.0*"))
    mb = sum(f.stat().st_size for f in files) / 1e6
    largest = max(f.stat().st_size for f in files) / 1e6
    print(f"series: {mb:.0f} MB in {len(files)} file(s), largest {largest:.0f} MB ({src})", flush=True)
    decode = child(
        f"from binlake.series import BinlogSeries\nfor _ in BinlogSeries.open({str(src)!r}).events(): pass"
    )
    say("plain decoding, 1 process:", decode, mb)
    rows = child(
        "from binlake.series import BinlogSeries; from binlake.spark.changelog import file_changes\n"
        f"for f in BinlogSeries.open({str(src)!r}).files:\n"
        "    for _ in file_changes(f): pass"
    )
    say("row changes, 1 process:", rows, mb, " (+ grouping, typed row changes)")
    arrow = child(
        "from binlake.series import BinlogSeries; from binlake.spark.changelog import file_batches\n"
        f"for f in BinlogSeries.open({str(src)!r}).files:\n"
        "    for _ in file_batches(f): pass"
    )
    say("change-log Arrow, 1 process:", arrow, mb, f" (+ VARIANT images, Arrow batches; {decode / arrow:.0%} of decoding)")
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
        extra = f" (Spark start-up {start:.1f} s excluded); {memory()}"
        if n == 2:
            extra = f"; local[2]/local[1] = {count[1] / count[2]:.2f}x; {memory()}"
        say(f"change log on Spark local[{n}]:", count[n], mb, extra)
    target = ROOT / "spark-delta"
    shutil.rmtree(target, ignore_errors=True)
    sync = (
        child(
            "from binlake.spark.session import spark_session; from binlake.spark.apply import sync\n"
            f"sync(spark_session('local[2]'), {str(src)!r}, {'delta:' + str(target)!r})"
        )
        - start
    )
    say(
        "full sync into Delta, local[2]:",
        sync,
        mb,
        f"; overhead over decoding x{sync / decode * 2:.2f} per core; {memory()}",
    )
    from binlake.demo import compare_to_truth

    compared = compare_to_truth(src / "truth", target)
    verdict = ", ".join(
        f"{name} {len(got):,} rows {'=' if got == want else '!='}" for name, (got, want) in compared.items()
    )
    say_line = (
        "equals the generator's truth"
        if all(g == w for g, w in compared.values())
        else "DIFFERS from the truth"
    )
    print(f"  synced tables {say_line} (DDL included, final names): {verdict}")


if __name__ == "__main__":
    main()
