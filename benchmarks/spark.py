"""The Spark pipeline's throughput: decode-only vs the change log vs the full sync into Delta, and
scaling from local[1] to local[2].

    python benchmarks/spark.py [--size-mb 1000]

A generated MySQL 8 series (cached under out/bench) is read by (1) the plain decoder in one process,
(2) the `binlog` data source counting change-log rows on local[1] and local[2], (3) `binlake sync`
into a fresh Delta directory. Prints MB/s, the pipeline's overhead over plain decoding, and the
local[2] / local[1] ratio.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path("out/bench")


def series(size_mb: int) -> Path:
    out = ROOT / f"series-{size_mb}mb"
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
                "128MB",
            ],
            check=True,
        )
    return out


def child(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1000)
    args = ap.parse_args()
    src = series(args.size_mb)
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
    print(f"series: {mb:.0f} MB ({src})")
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


if __name__ == "__main__":
    main()
