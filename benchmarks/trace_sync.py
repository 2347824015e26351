"""Where one batch sync's time goes: ``binlake sync`` of a generated series into a fresh Delta
directory on ``local[2]`` as one traced batch (``binlake.spark.trace``), then its named steps and
every Spark job it ran (wall seconds, tasks, executor run and CPU seconds), and whether the tables
equal the generator's truth.

    python benchmarks/trace_sync.py [--size-mb 100] [--file-mb 110] [--option NAME=VALUE ...]

``--option``: a read option of the ``binlog`` source over the sync's own (``apply.SYNC_READ``), e.g.
``changes=every`` to trace a sync without the last change per key found in the reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from spark import series  # noqa: E402 - the benchmark's own series, cached under out/bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--file-mb", type=int, default=110)
    ap.add_argument("--option", action="append", default=[], help="NAME=VALUE, a read option")
    args = ap.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    src = series(args.size_mb, args.file_mb)
    out = Path(tempfile.mkdtemp(prefix="binlake-trace-"))
    os.environ["BINLAKE_TRACE"] = str(out / "trace.jsonl")

    from binlake.demo import compare_to_truth
    from binlake.spark import trace
    from binlake.spark.apply import sync
    from binlake.spark.session import spark_session

    spark = spark_session("local[2]")
    target = out / "delta"
    t0 = time.time()
    with trace.batch(spark, 0):
        report = sync(spark, str(src), f"delta:{target}", options=options)
    print(f"sync: {time.time() - t0:.1f} s, {report.changes:,} row changes, {len(report.tables)} tables")
    for line in (out / "trace.jsonl").read_text().splitlines():
        record = json.loads(line)
        for name, start, seconds in record.get("spans", []):
            print(f"  step {name:40s} at {start:7.1f} s  {seconds:7.2f} s")
        for name, start, seconds, tasks, run, cpu in record.get("jobs", []):
            print(
                f"  job  {name[:40]:40s} at {start:7.1f} s  {seconds:7.2f} s  {tasks:4d} tasks  run {run:.1f} s  cpu {cpu:.1f} s"
            )
    compared = compare_to_truth(src / "truth", target)
    print("tables equal the truth:", all(got == want for got, want in compared.values()))
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
